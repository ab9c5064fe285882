// The row-strip layout (src/layout/row_strips.h): rows <-> strips of 4 interleaved rows.
#include <cstring>
#include <vector>

#include "quant/quant.h"
#include "layout/row_strips.h"

namespace lf {
namespace {

// Calls move(row-layout offset, strip-layout offset, n) for every piece row i of a strip is made
// of, both offsets from the strip's start: each block's scale (2 bytes) and its 4 groups of 4
// quant bytes.
template <typename Move>
void for_each_piece_of_row(const WeightView& W, uint64_t i, Move move) {
  const uint64_t row_bytes = W.column_bytes(W.n_in);
  const int64_t n_blocks = W.n_in / QK4_0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint64_t block = static_cast<uint64_t>(b) * kStripRows * sizeof(block_q4_0);
    const uint64_t row_block = i * row_bytes + static_cast<uint64_t>(b) * sizeof(block_q4_0);
    move(row_block, block + 2 * i, 2);
    for (uint64_t k = 0; k < 4; ++k) move(row_block + 2 + 4 * k, block + 8 + 16 * k + 4 * i, 4);
  }
}

// The same for every row of every strip, offsets from W's start
template <typename Move>
void for_each_piece(const WeightView& W, Move move) {
  const uint64_t strip_bytes = kStripRows * W.column_bytes(W.n_in);
  for (int64_t s = 0; s < W.n_out / kStripRows; ++s) {
    const uint64_t strip = static_cast<uint64_t>(s) * strip_bytes;
    for (uint64_t i = 0; i < kStripRows; ++i) {
      for_each_piece_of_row(W, i, [&](uint64_t row, uint64_t in_strip, size_t n) { move(strip + row, strip + in_strip, n); });
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

Status dequantize_weight_row(const WeightView& W, int64_t r, float* out) {
  if (!W.in_row_strips()) return dequantize_row(W.type, W.row(r), out, W.n_in);
  // row r's bytes put back together from its strip, as its file row
  const uint64_t i = static_cast<uint64_t>(r % kStripRows);
  const uint64_t row_bytes = W.column_bytes(W.n_in);
  std::vector<uint8_t> row(row_bytes);
  const uint8_t* strip = W.strip(r / kStripRows);
  for_each_piece_of_row(W, i, [&](uint64_t at, uint64_t in_strip, size_t n) {
    std::memcpy(row.data() + (at - i * row_bytes), strip + in_strip, n);
  });
  return dequantize_row(W.type, row.data(), out, W.n_in);
}

}  // namespace lf
