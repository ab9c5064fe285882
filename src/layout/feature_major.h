// The feature-major layout of a Q4_0 / Q8_0 weight and its GEMM: for a product whose activations
// are mostly zero (the top-K gate FFN keeps K of n_ff features per token and feeds ffn_down
// zeros elsewhere), each input column (feature) is one contiguous, block-quantized run over the
// rows, so the kernel reads only the columns of features some token kept.
//
// Layout of W [n_out, n_in] (ggml ne = [n_in, n_out]): the input columns are cut into blocks of
// 32 (the quant block). Stripe b holds everything of columns [32b, 32b + 32) of every row, and
// the stripes follow each other in block order, so a block-aligned column range is one
// contiguous region:
//   scales  [n_out] f16        the rows' block-b scales, in row order;
//   then, for each of the 32 columns f, that column's n_out quants in row order:
//     Q8_0  [n_out] int8;
//     Q4_0  [n_out / 2] bytes, the rows in groups of 32 (the last group g < 32 rows, g even):
//           group byte i holds row i in its low nibble and row g/2 + i in its high nibble
//           (g = 32 for full groups: low nibbles rows 0..15, high nibbles rows 16..31), which
//           the kernel unpacks with the row kernels' nibble helpers.
// A stripe has exactly the bytes of the row layout's n_out blocks (Q4_0 18·n_out, Q8_0
// 34·n_out): the layout is a byte permutation (lossless) of the tensor into a buffer of the
// same size.
#pragma once

#include <cstdint>

#include "layout/weight_view.h"

namespace lf {

// W (in the file's layout, whole rows) can be laid out
// feature-major: Q4_0 with an even n_out, or Q8_0; n_in a multiple of 32. Otherwise the loader
// keeps the file's layout.
bool can_feature_major(const WeightView& W);

// File layout <-> feature-major: byte permutations between two non-overlapping buffers of
// n_out · row_bytes bytes. W is in the file's layout and says the type and shape (it must pass
// can_feature_major); its data is not read.
void to_feature_major(const WeightView& W, const uint8_t* src, uint8_t* dst);
void from_feature_major(const WeightView& W, const uint8_t* src, uint8_t* dst);

// W [n_out, n_in] (feature-major Q4_0 or Q8_0) · Xc [n_tok, n_in] (Q8_0 rows x_row bytes apart)
// -> Y [n_tok, n_out], rows [r0, r1) only; Y row t is at Y + t·n_out. The same contract as
// gemm_q8_0_strided (src/kernels/gemm.h), and the same bits: each output is the
// vec_dot_ref loop's on the row layout. Work scales with the nonzero activation quants.
void gemm_feature_major(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                        int64_t r1);

}  // namespace lf
