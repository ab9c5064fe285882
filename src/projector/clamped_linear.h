// A clipped linear layer over many tokens, shared by the workers of a pool: what both of a
// projector's towers compute their matrices with.
#pragma once

#include <cstdint>
#include <vector>

#include "base/scratch_vector.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "projector/projector_tensors.h"

namespace lf {

// The buffers clamped_linear needs, sized once per encode for the widest input it will see and
// the most input values (tokens × width) of one call.
struct LinearScratch {
  ScratchVector<uint8_t> xc;            // [n_tok, row bytes] the activations in the weight's vec_dot type
  std::vector<std::vector<float>> row;  // [workers][widest input] one clamped input row
  std::vector<Status> failed;           // [workers] a conversion's failure, reported after the encode

  void size_for(int workers, int64_t widest_input, int64_t most_values);
};

// Which operand of llama.cpp's mul_mat is its src0, whose rows tinyBLAS takes only in fours: a
// linear's weight, or a convolution's patches (ggml_conv_2d multiplies its im2col by the kernel).
enum class Src0 { weight, patches };

// Y [n_tok, n_out] = clamp_out(W · clamp_in(X [n_tok, n_in])), called by every worker of pool:
// each converts its share of the tokens, then computes its share of the output rows over every
// token. An F16 W takes f16 activations, and F16 and F32 W take the sums llama.cpp's CPU backend
// takes for a plain buffer's weights, as mtmd holds a projector's: tinyBLAS's (gemm_lanes16) for
// 2 tokens and more where src0 has rows in fours, else ggml's vector dot (gemm_ggml).
void clamped_linear(ThreadPool& pool, int worker, const ClampedLinear& L, const float* X, int n_tok, float* Y,
                    LinearScratch* s, Src0 src0 = Src0::weight);

}  // namespace lf
