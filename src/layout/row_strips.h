// The row-strip layout of a Q4_0 weight, read by the relaxed-SIMD module's kernel
// (docs/kernels.md): 4 output rows interleaved block by block, so that one vector load gives 4
// rows' quants with each row in its own 32-bit lane and an i8 dot product sums a row's products
// in its lane: no sum across lanes, and the 4 scales in one 8-byte load.
//
// Layout of W [n_out, n_in] (n_out a multiple of 4): strip s holds rows 4s..4s+3 and is
// 4·row_bytes long; its block b (72 bytes, at 72·b) is
//   d   [4] f16       the 4 rows' block-b scales, row order;
//   qs  [4][4][4] u8  group k (k = 0..3) of each row: bytes 4k..4k+3 of row i's qs at 16k + 4i,
//                     so that vector k holds quants 4k..4k+3 (low nibbles) and 16+4k..16+4k+3
//                     (high nibbles) of the 4 rows, one row per 32-bit lane.
// A strip has exactly its 4 rows' bytes, so the layout is a permutation within each strip.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "layout/weight_view.h"

namespace lf {

constexpr int kStripRows = 4;

// W (in the file's layout, not a column slice) can be laid out in row
// strips: Q4_0, n_out a positive multiple of 4, n_in a multiple of 32, and every scale finite
// (the strip kernel converts scales without the infinity and NaN cases; a weight that has one
// stays in rows, where the other kernels handle it). Reads W's scales.
bool can_row_strips(const WeightView& W);

// Rows <-> strips, between two non-overlapping buffers of n_out · row_bytes bytes. W says the
// type and shape (it must pass can_row_strips); its data is not read.
void to_row_strips(const WeightView& W, const uint8_t* src, uint8_t* dst);
void from_row_strips(const WeightView& W, const uint8_t* src, uint8_t* dst);

// Row r of W, in the file's layout or in row strips, as n_in floats: an embedding lookup in a
// matrix that is also the head's, which the loader lays out in strips for the head's kernel.
Status dequantize_weight_row(const WeightView& W, int64_t r, float* out);

}  // namespace lf
