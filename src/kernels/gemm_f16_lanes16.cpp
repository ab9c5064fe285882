// F16 weights times f16 activations as llama.cpp's CPU backend multiplies them when the weights
// sit in a plain buffer, as mtmd holds a projector's: llamafile's tinyBLAS (ggml-cpu/llamafile/
// sgemm.cpp, AVX-512: 16 f32 lanes). Each output keeps 16 partial sums, lane λ adding the products
// of elements λ, λ + 16, λ + 32, ... in order; then _mm512_reduce_add_ps halves them: λ + 8, + 4,
// + 2, + 1. A product of two f16 values is exact in f32, so tinyBLAS's fused multiply-add is the
// f32 sum of the exact product: plain multiplies and adds give its bits in every build.
//
// Here the lanes hold 4 output rows (a strip, converted to f32 as [n_in][4] once per token tile),
// and the 16 partial sums are computed one after another, each over 4 tokens at a time.
#include <algorithm>
#include <cassert>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/simd.h"
#include "quant/quant.h"

namespace lf {
namespace {

constexpr int kLanes = 16;      // tinyBLAS's partial sums per output
constexpr int kRows = 4;        // output rows side by side in a vector
constexpr int kTokens = 4;      // tokens sharing each weight load
constexpr int kTileTokens = 64; // tokens per converted strip
static_assert(kTokens == 4, "strip_tokens has a case for each count up to kTokens");

// p [kLanes] partial sums (each a vector of kRows outputs) -> their sum, halved as tinyBLAS's hsum
simd::F32x4 halve_lanes(simd::F32x4 p[kLanes]) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) p[l] = simd::add(p[l], p[l + width]);
  }
  return p[0];
}

// One strip (w [n_in][kRows] f32) · N tokens (x rows of n_in f16-valued floats) -> y [N][kRows];
// N fixed, so that the running sums stay in registers.
template <int N>
void strip_tokens(const float* w, const float* const* x, int64_t n_in, float* y) {
  simd::F32x4 partial[N][kLanes];
  for (int l = 0; l < kLanes; ++l) {
    simd::F32x4 acc[N];
    for (int t = 0; t < N; ++t) acc[t] = simd::splat(0.0f);
    for (int64_t i = l; i < n_in; i += kLanes) {
      const simd::F32x4 wi = simd::load_f32x4(w + i * kRows);
      for (int t = 0; t < N; ++t) acc[t] = simd::add(acc[t], simd::mul(wi, simd::splat(x[t][i])));
    }
    for (int t = 0; t < N; ++t) partial[t][l] = acc[t];
  }
  for (int t = 0; t < N; ++t) simd::store(y + t * kRows, halve_lanes(partial[t]));
}

void strip_tokens(const float* w, const float* const* x, int n, int64_t n_in, float* y) {
  switch (n) {
    case 4: return strip_tokens<4>(w, x, n_in, y);
    case 3: return strip_tokens<3>(w, x, n_in, y);
    case 2: return strip_tokens<2>(w, x, n_in, y);
    default: return strip_tokens<1>(w, x, n_in, y);
  }
}

}  // namespace

float dot_f16_lanes16_ref(const uint16_t* w, const float* x, int64_t n) {
  assert(n % kLanes == 0);
  float lane[kLanes] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % kLanes] += fp16_to_fp32(w[i]) * x[i];
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

bool gemm_f16_lanes16_fits(const WeightView& W) {
  return W.type == GgmlType::F16 && W.n_in % kLanes == 0 && W.n_out % kRows == 0;
}

void gemm_f16_lanes16(const WeightView& W, const float* X, int n_tok, float* Y, int64_t r0, int64_t r1) {
  assert(gemm_f16_lanes16_fits(W) && r0 % kRows == 0 && r1 % kRows == 0);
  const int64_t n_in = W.n_in;
  std::vector<float> row(static_cast<size_t>(n_in)), strip(static_cast<size_t>(n_in) * kRows);
  float out[kTokens * kRows];
  for (int t0 = 0; t0 < n_tok; t0 += kTileTokens) {
    const int t1 = std::min(n_tok, t0 + kTileTokens);
    for (int64_t r = r0; r < r1; r += kRows) {
      for (int k = 0; k < kRows; ++k) {
        halves_to_floats(static_cast<const uint16_t*>(static_cast<const void*>(W.row(r + k))), row.data(),
                         static_cast<int>(n_in));
        for (int64_t i = 0; i < n_in; ++i) strip[i * kRows + k] = row[i];
      }
      for (int t = t0; t < t1; t += kTokens) {
        const int n = std::min(kTokens, t1 - t);
        const float* x[kTokens];
        for (int j = 0; j < n; ++j) x[j] = X + (t + j) * n_in;
        strip_tokens(strip.data(), x, n, n_in, out);
        for (int j = 0; j < n; ++j) std::copy_n(out + j * kRows, kRows, Y + (t + j) * W.n_out + r);
      }
    }
  }
}

}  // namespace lf
