// The row-strip layout (src/layout/row_strips.h): rows <-> strips of 4 interleaved rows.
#include <cstring>

#include "quant/quant.h"
#include "layout/row_strips.h"

namespace lf {
namespace {

// Calls move(row-layout offset, strip-layout offset, n) for every piece both layouts are made
// of: each block's scale (2 bytes) and its 4 groups of 4 quant bytes.
template <typename Move>
void for_each_piece(const WeightView& W, Move move) {
  const uint64_t row_bytes = W.column_bytes(W.n_in);
  const int64_t n_blocks = W.n_in / QK4_0;
  for (int64_t s = 0; s < W.n_out / kStripRows; ++s) {
    const uint64_t strip = static_cast<uint64_t>(s) * kStripRows * row_bytes;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint64_t block = strip + static_cast<uint64_t>(b) * kStripRows * sizeof(block_q4_0);
      for (uint64_t i = 0; i < kStripRows; ++i) {
        const uint64_t row_block = strip + i * row_bytes + static_cast<uint64_t>(b) * sizeof(block_q4_0);
        move(row_block, block + 2 * i, 2);
        for (uint64_t k = 0; k < 4; ++k) move(row_block + 2 + 4 * k, block + 8 + 16 * k + 4 * i, 4);
      }
    }
  }
}

}  // namespace

bool can_row_strips(const WeightView& W) {
  if (W.type != GgmlType::Q4_0 || W.layout != WeightLayout::rows) return false;
  if (W.n_out < kStripRows || W.n_out % kStripRows != 0 || W.n_in % QK4_0 != 0) return false;
  if (W.row_bytes != W.column_bytes(W.n_in)) return false;  // whole rows, not a column slice
  // Whole rows of whole blocks: every scale is at a multiple of 18.
  const uint64_t n_blocks = static_cast<uint64_t>(W.n_out) * static_cast<uint64_t>(W.n_in / QK4_0);
  for (uint64_t b = 0; b < n_blocks; ++b) {
    uint16_t d;
    std::memcpy(&d, W.data + b * sizeof(block_q4_0), sizeof d);
    if ((d & 0x7C00u) == 0x7C00u) return false;
  }
  return true;
}

void to_row_strips(const WeightView& W, const uint8_t* src, uint8_t* dst) {
  for_each_piece(W, [&](uint64_t row, uint64_t strip, size_t n) { std::memcpy(dst + strip, src + row, n); });
}

void from_row_strips(const WeightView& W, const uint8_t* src, uint8_t* dst) {
  for_each_piece(W, [&](uint64_t row, uint64_t strip, size_t n) { std::memcpy(dst + row, src + strip, n); });
}

}  // namespace lf
