// F16 weights times f16 activations as llama.cpp's CPU backend multiplies them when the weights
// sit in a plain buffer, as mtmd holds a projector's: llamafile's tinyBLAS (ggml-cpu/llamafile/
// sgemm.cpp, AVX-512: 16 f32 lanes). Each output keeps 16 partial sums, lane λ adding the products
// of elements λ, λ + 16, λ + 32, ... in order; then _mm512_reduce_add_ps halves them: λ + 8, + 4,
// + 2, + 1. A product of two f16 values is exact in f32, so tinyBLAS's fused multiply-add is the
// f32 sum of the exact product: plain multiplies and adds give its bits in every build.
//
// Here a call converts its rows to f32 once, in strips of 8 rows laid out lane by lane (each
// lane's elements contiguous, the strip's rows side by side in two vectors), and each tile of
// tokens likewise; then for every strip and 6 tokens of the tile each lane's 12 running sums stay
// in registers (kernels/relaxed_simd.wat's lf_f16_lane_sums_relaxed in the relaxed modules, with
// the madd, else lane_sums below), and the 16 lanes are halved.
#include <algorithm>
#include <cassert>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/simd.h"
#include "quant/quant.h"

#if LF_RELAXED_SIMD
// acc [6][8] <- lane sums of a strip's 8 rows (w [n][8]) for tokens x0..x5 (each [n])
extern "C" void lf_f16_lane_sums_relaxed(const float* w, const float* x0, const float* x1, const float* x2,
                                         const float* x3, const float* x4, const float* x5, int32_t n, float* acc);
#endif

namespace lf {
namespace {

constexpr int kLanes = 16;      // tinyBLAS's partial sums per output
constexpr int kRows = 8;        // output rows of a strip: two vectors
constexpr int kTokens = 6;      // tokens sharing each weight load
constexpr int kTileTokens = 30; // tokens per pass over the strips, their rows in L2 (12 to 66: within 3%)
static_assert(kRows == 8 && kTokens == 6, "lf_f16_lane_sums_relaxed's shape");

// acc [kTokens][kRows] <- Σ w[i][row] · x_t[i] over i < n in order, from 0; `relaxed`:
// the .wat kernel runs (relaxed_kernels_run)
void lane_sums(bool relaxed, const float* w, const float* const* x, int64_t n, float* acc) {
#if LF_RELAXED_SIMD
  if (relaxed) return lf_f16_lane_sums_relaxed(w, x[0], x[1], x[2], x[3], x[4], x[5], static_cast<int32_t>(n), acc);
#else
  (void)relaxed;
#endif
  simd::F32x4 lo[kTokens], hi[kTokens];
  for (int t = 0; t < kTokens; ++t) lo[t] = hi[t] = simd::splat(0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const simd::F32x4 wl = simd::load_f32x4(w + i * kRows), wh = simd::load_f32x4(w + i * kRows + 4);
    for (int t = 0; t < kTokens; ++t) {
      const simd::F32x4 a = simd::splat(x[t][i]);
      lo[t] = simd::add(lo[t], simd::mul(wl, a));
      hi[t] = simd::add(hi[t], simd::mul(wh, a));
    }
  }
  for (int t = 0; t < kTokens; ++t) {
    simd::store(acc + t * kRows, lo[t]);
    simd::store(acc + t * kRows + 4, hi[t]);
  }
}

// Rows [r0, r1) of W -> strips [n_strips][kLanes][n_in / kLanes][kRows] f32, rows past r1 zero
void convert_strips(const WeightView& W, int64_t r0, int64_t r1, std::vector<float>* strips) {
  const int64_t n_in = W.n_in, per_lane = n_in / kLanes;
  const int64_t n_strips = (r1 - r0 + kRows - 1) / kRows;
  strips->assign(static_cast<size_t>(n_strips * n_in * kRows), 0.0f);
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = r0; r < r1; ++r) {
    halves_to_floats(static_cast<const uint16_t*>(static_cast<const void*>(W.row(r))), row.data(), static_cast<int>(n_in));
    float* strip = strips->data() + (r - r0) / kRows * n_in * kRows;
    const int64_t k = (r - r0) % kRows;
    for (int64_t i = 0; i < n_in; ++i) strip[((i % kLanes) * per_lane + i / kLanes) * kRows + k] = row[i];
  }
}

// Tokens [t0, t1) of X -> xl [t1 - t0][kLanes][n_in / kLanes]: each lane's elements contiguous,
// so that a lane's pass over 6 tokens reads 6 short runs, whatever n_in
void convert_tokens(const float* X, int64_t n_in, int t0, int t1, float* xl) {
  const int64_t per_lane = n_in / kLanes;
  for (int t = t0; t < t1; ++t) {
    const float* x = X + t * n_in;
    float* out = xl + (t - t0) * n_in;
    for (int64_t i = 0; i < n_in; ++i) out[(i % kLanes) * per_lane + i / kLanes] = x[i];
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
  return W.type == GgmlType::F16 && W.n_in % kLanes == 0 && W.n_out % 4 == 0;
}

void gemm_f16_lanes16(const WeightView& W, const float* X, int n_tok, float* Y, int64_t r0, int64_t r1) {
  assert(gemm_f16_lanes16_fits(W) && r0 <= r1);
  const int64_t n_in = W.n_in, per_lane = n_in / kLanes;
  const bool relaxed = relaxed_kernels_run();
  std::vector<float> strips, xl(static_cast<size_t>(kTileTokens * n_in));
  convert_strips(W, r0, r1, &strips);
  alignas(16) float partial[kLanes][kTokens * kRows];
  for (int t0 = 0; t0 < n_tok; t0 += kTileTokens) {
    const int t1 = std::min(n_tok, t0 + kTileTokens);
    convert_tokens(X, n_in, t0, t1, xl.data());
    for (int64_t r = r0; r < r1; r += kRows) {
      const float* strip = strips.data() + (r - r0) / kRows * n_in * kRows;
      const int64_t rows = std::min<int64_t>(kRows, r1 - r);
      for (int t = t0; t < t1; t += kTokens) {
        const int n = std::min(kTokens, t1 - t);
        for (int l = 0; l < kLanes; ++l) {
          const float* x[kTokens];
          for (int j = 0; j < kTokens; ++j) x[j] = xl.data() + (t - t0 + std::min(j, n - 1)) * n_in + l * per_lane;
          lane_sums(relaxed, strip + l * per_lane * kRows, x, per_lane, partial[l]);
        }
        for (int width = kLanes / 2; width >= 1; width /= 2) {
          for (int l = 0; l < width; ++l) {
            for (int e = 0; e < kTokens * kRows; e += 4) {
              simd::store(partial[l] + e, simd::add(simd::load_f32x4(partial[l] + e), simd::load_f32x4(partial[l + width] + e)));
            }
          }
        }
        for (int j = 0; j < n; ++j) std::copy_n(partial[0] + j * kRows, rows, Y + (t + j) * W.n_out + r);
      }
    }
  }
}

}  // namespace lf
