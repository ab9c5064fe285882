// llama.cpp's CPU exponential as its AVX-512 build computes the softmax of its tiled flash
// attention (ggml-cpu/vec.h, ggml_v_expf; docs/attention.md, "The f32 tile path"): the scalar
// form every kernel and reference shares, lane for lane.
#pragma once

namespace lf {

// Lanes of the exponentials' sum in ggml_vec_soft_max_f32: AVX-512's 16 f32.
constexpr int kExpLanes = 16;

// ggml_v_expf for one value: a polynomial after a range reduction, then scalef.
float expf_ggml(float x);
// Its last step: j · 2^n rounded once; 0 past n < -192, infinity past 192, NaN for a NaN n.
float scalef_ggml(float j, float n);
// x [kExpLanes] <- expf_ggml(x - max) each; returns their sum as _mm512_reduce_add_ps adds it
// (lanes l + 8, then + 4, + 2, + 1).
float sum_exp_lanes(float* x, float max);

}  // namespace lf
