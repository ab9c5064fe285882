// Fast matmul kernels for the weight types that matter (Gemma 4 QAT ships Q4_0; Q8_0 too):
// a GEMM over a tile of 4 output rows × up to 8 tokens, each weight block unpacked once per
// tile, integer block products in SIMD (WASM SIMD128, SSE2, or a scalar twin elsewhere).
// Results are bit-identical to a loop of vec_dot_ref: the per-block integer sums are exact, and
// each output keeps the reference's sequential f32 accumulation over blocks (the vector lanes
// are 4 different output rows, never 4 blocks of one row). docs/bench/kernels.md has numbers.
#pragma once

#include <cstdint>

#include "layerfold/ggml_type.h"
#include "layerfold/weight_view.h"

namespace lf {

// True for Q4_0 and Q8_0, the weights whose activations are Q8_0 blocks.
bool has_gemm_kernel(GgmlType weight_type);

// W [n_out, n_in] (Q4_0 or Q8_0) · Xc [n_tok, n_in] (Q8_0 rows of activation_row_bytes(W.type,
// W.n_in) bytes) -> Y [n_tok, n_out], rows [r0, r1) and input columns [k0, k1) only (multiples
// of 32, k0 <= k1 <= n_in), as matmul_rows. Y row t is at Y + t·n_out.
void gemm_q8_0_activations(const WeightView& W, const uint8_t* Xc, int n_tok, float* Y, int64_t r0, int64_t r1,
                           int64_t k0, int64_t k1);

// Which backend the kernels were compiled for: "wasm-simd128", "sse2" or "scalar".
const char* gemm_kernel_isa();

}  // namespace lf
