// The feature-major layout (src/layout/feature_major.h): file layout <-> stripes.
#include <cstring>

#include "layout/feature_major.h"
#include "quant/quant.h"

namespace lf {
namespace {

// Where one quant lives: a byte, and for Q4_0 the nibble's shift in it (0 or 4).
struct Place {
  uint64_t byte;
  int shift;
};

// Calls move_scale(file, feature-major) for every scale's byte offset and move_quant(file,
// feature-major) for every quant's Place: the pieces both layouts are made of.
template <typename MoveScale, typename MoveQuant>
void for_each_piece(const WeightView& W, MoveScale move_scale, MoveQuant move_quant) {
  const bool q4 = W.type == GgmlType::Q4_0;
  const uint64_t n_out = static_cast<uint64_t>(W.n_out);
  const uint64_t block = W.column_bytes(QK8_0);
  const uint64_t column = q4 ? n_out / 2 : n_out;  // one feature's quants in a stripe
  const int64_t n_blocks = W.n_in / QK8_0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint64_t stripe = static_cast<uint64_t>(b) * block * n_out;
    for (uint64_t r = 0; r < n_out; ++r) {
      const uint64_t file = r * W.row_bytes + static_cast<uint64_t>(b) * block;
      move_scale(file, stripe + 2 * r);
      const uint64_t quants = stripe + 2 * n_out;
      if (!q4) {
        for (uint64_t f = 0; f < QK8_0; ++f) move_quant(Place{file + 2 + f, 0}, Place{quants + f * column + r, 0});
        continue;
      }
      const uint64_t group = r / 32;
      const uint64_t half = (n_out - 32 * group < 32 ? n_out - 32 * group : 32) / 2;
      const uint64_t p = r % 32;
      const Place in_column{16 * group + (p < half ? p : p - half), p < half ? 0 : 4};
      for (uint64_t f = 0; f < QK4_0; ++f) {
        move_quant(Place{file + 2 + f % 16, f < 16 ? 0 : 4}, Place{quants + f * column + in_column.byte, in_column.shift});
      }
    }
  }
}

// Each destination byte gathers two nibbles from different places, so it starts at zero and
// takes them by OR.
template <bool kToFeatureMajor>
void permute(const WeightView& W, const uint8_t* src, uint8_t* dst) {
  const uint64_t bytes = static_cast<uint64_t>(W.n_out) * W.row_bytes;
  std::memset(dst, 0, static_cast<size_t>(bytes));
  for_each_piece(
      W,
      [&](uint64_t file, uint64_t fm) {
        const uint64_t from = kToFeatureMajor ? file : fm, to = kToFeatureMajor ? fm : file;
        std::memcpy(dst + to, src + from, 2);
      },
      [&](Place file, Place fm) {
        const Place from = kToFeatureMajor ? file : fm, to = kToFeatureMajor ? fm : file;
        const int mask = W.type == GgmlType::Q4_0 ? 0x0F : 0xFF;
        dst[to.byte] = static_cast<uint8_t>(dst[to.byte] | ((src[from.byte] >> from.shift) & mask) << to.shift);
      });
}

}  // namespace

bool can_feature_major(const WeightView& W) {
  if (W.type != GgmlType::Q4_0 && W.type != GgmlType::Q8_0) return false;
  if (W.layout != WeightLayout::rows || W.n_in < 0 || W.n_out < 1 || W.n_in % QK8_0 != 0) return false;
  if (W.row_bytes != W.column_bytes(W.n_in)) return false;  // whole rows, not a column slice
  return W.type == GgmlType::Q8_0 || W.n_out % 2 == 0;    // Q4_0: two rows per byte of a column
}

void to_feature_major(const WeightView& W, const uint8_t* src, uint8_t* dst) { permute<true>(W, src, dst); }

void from_feature_major(const WeightView& W, const uint8_t* src, uint8_t* dst) { permute<false>(W, src, dst); }

}  // namespace lf
