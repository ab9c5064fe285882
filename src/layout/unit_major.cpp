#include "layout/unit_major.h"

#include <cstring>

namespace lf {
namespace {

// Calls copy(file offset, unit-major offset, bytes) once for each row of each unit: the pieces
// both layouts are made of.
template <typename Copy>
void for_each_unit_row(const WeightView& W, const ColumnUnits& units, Copy copy) {
  uint64_t unit_major = 0;
  for (int u = 0; u < units.n_units; ++u) {
    const uint64_t skip = W.column_bytes(units.begin(u));
    const uint64_t bytes = W.column_bytes(units.end(u) - units.begin(u));
    for (int64_t r = 0; r < W.n_out; ++r, unit_major += bytes) copy(static_cast<uint64_t>(r) * W.row_bytes + skip, unit_major, bytes);
  }
}

}  // namespace

void to_unit_major(const WeightView& W, const ColumnUnits& units, const uint8_t* src, uint8_t* dst) {
  for_each_unit_row(W, units, [&](uint64_t file, uint64_t unit_major, uint64_t n) { std::memcpy(dst + unit_major, src + file, n); });
}

void from_unit_major(const WeightView& W, const ColumnUnits& units, const uint8_t* src, uint8_t* dst) {
  for_each_unit_row(W, units, [&](uint64_t file, uint64_t unit_major, uint64_t n) { std::memcpy(dst + file, src + unit_major, n); });
}

}  // namespace lf
