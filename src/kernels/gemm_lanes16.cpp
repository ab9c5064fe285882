// F16 weights times f16 activations, BF16 weights times bf16 activations, and F32 weights times
// f32 activations, as llama.cpp's CPU backend multiplies them when the weights sit in a plain
// buffer, as mtmd holds a projector's: llamafile's tinyBLAS (ggml-cpu/llamafile/sgemm.cpp,
// AVX-512: 16 f32 lanes). Each output keeps 16 partial sums, lane λ adding the products of
// elements λ, λ + 16, λ + 32, ... in order by fused multiply-adds; then _mm512_reduce_add_ps halves
// them: λ + 8, + 4, + 2, + 1. With AVX512-BF16 a BF16 step is _mm512_dpbf16_ps over 32 elements,
// whose lane λ adds the product of element 2λ + 1, then that of 2λ (each sum rounded: measured on
// the instruction itself): the same lanes over the elements in that order (dpbf16_element). A
// product of two f16, or two bf16, values is exact in f32, so there the fused multiply-add is the
// f32 sum of the exact product and plain multiplies and adds give its bits; F32 products are
// rounded once with the sum (f32x4.relaxed_madd where the engine fuses it, else
// simd::fused_madd), the same bits in every build. (The instruction also flushes subnormal
// inputs and sums to zero, which these sums do not: values that small do not occur in a tower.)
//
// Here a call converts its rows to f32 once, in strips of 8 rows laid out lane by lane (each
// lane's elements contiguous, the strip's rows side by side in two vectors), and each tile of
// tokens likewise; then for every strip and 6 tokens of the tile each lane's 12 running sums stay
// in registers and the 16 lanes are halved (kernels/relaxed_simd.wat's lf_f16_lane_sums_relaxed
// in the relaxed modules, with the madd and the halving as the lanes come, else strip_sums below).
#include <algorithm>
#include <cassert>
#include <vector>

#include "base/scratch_vector.h"
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

// acc [kLanes] <- each lane l's [kTokens][kRows] sums Σ fma(w_l[i][row], x_t[l·n + i], ·) over
// i < n in order from 0, w_l = w + l·n·kRows, then halved: the result in acc[0]. `relaxed`: the
// .wat kernel runs (relaxed_kernels_run, where its madd is fused); `exact`: the products are
// exact in f32 (f16 by f16), where a multiply and an add are the fused step
const float* strip_sums(bool relaxed, bool exact, const float* w, const float* const* x, int64_t n,
                        float (*acc)[kTokens * kRows]) {
  for (int l = 0; l < kLanes; ++l) {
#if LF_RELAXED_SIMD
    if (relaxed) {
      lf_f16_lane_sums_relaxed(w + l * n * kRows, x[0] + l * n, x[1] + l * n, x[2] + l * n, x[3] + l * n, x[4] + l * n,
                               x[5] + l * n, static_cast<int32_t>(n), acc[l]);
      continue;
    }
#else
    (void)relaxed;
#endif
    simd::F32x4 lo[kTokens], hi[kTokens];
    for (int t = 0; t < kTokens; ++t) lo[t] = hi[t] = simd::splat(0.0f);
    const float* wl_row = w + l * n * kRows;
    for (int64_t i = 0; i < n; ++i) {
      const simd::F32x4 wl = simd::load_f32x4(wl_row + i * kRows), wh = simd::load_f32x4(wl_row + i * kRows + 4);
      for (int t = 0; t < kTokens; ++t) {
        const simd::F32x4 a = simd::splat(x[t][l * n + i]);
        if (exact) {
          lo[t] = simd::add(lo[t], simd::mul(wl, a));
          hi[t] = simd::add(hi[t], simd::mul(wh, a));
        } else {
          lo[t] = simd::fused_madd(wl, a, lo[t]);
          hi[t] = simd::fused_madd(wh, a, hi[t]);
        }
      }
    }
    for (int t = 0; t < kTokens; ++t) {
      simd::store(acc[l] + t * kRows, lo[t]);
      simd::store(acc[l] + t * kRows + 4, hi[t]);
    }
  }
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) {
      for (int e = 0; e < kTokens * kRows; e += 4) {
        simd::store(acc[l] + e, simd::add(simd::load_f32x4(acc[l] + e), simd::load_f32x4(acc[l + width] + e)));
      }
    }
  }
  return acc[0];
}

// The element a BF16 step's lanes take j-th: in each 32, lane λ's odd element, then its even one.
int64_t dpbf16_element(int64_t j) {
  const int64_t chunk = j / (2 * kLanes), second = (j / kLanes) % 2, lane = j % kLanes;
  return 2 * kLanes * chunk + 2 * lane + (1 - second);
}

// Rows [r0, r1) of W -> strips [n_strips][kLanes][n_in / kLanes][kRows] f32, rows past r1 zero:
// each strip's 8 rows converted side by side, then for each 4 lanes of a 16-element step two 4 × 4
// transposes give the 8 rows' values of each lane, stored together.
void convert_strips(const WeightView& W, int64_t r0, int64_t r1, ScratchVector<float>* strips) {
  const int64_t n_in = W.n_in, per_lane = n_in / kLanes;
  const int64_t n_strips = (r1 - r0 + kRows - 1) / kRows;
  strips->resize(static_cast<size_t>(n_strips * n_in * kRows));
  std::vector<float> rows(static_cast<size_t>(kRows * n_in));
  for (int64_t s = 0; s < n_strips; ++s) {
    for (int64_t k = 0; k < kRows; ++k) {
      const int64_t r = r0 + s * kRows + k;
      float* row = rows.data() + k * n_in;
      if (r >= r1) {
        std::fill_n(row, n_in, 0.0f);
      } else if (W.type == GgmlType::F16) {
        halves_to_floats(static_cast<const uint16_t*>(static_cast<const void*>(W.row(r))), row, static_cast<int>(n_in));
      } else if (W.type == GgmlType::BF16) {
        const auto* w = static_cast<const uint16_t*>(static_cast<const void*>(W.row(r)));
        for (int64_t j = 0; j < n_in; ++j) row[j] = bf16_to_fp32(w[dpbf16_element(j)]);
      } else {
        std::copy_n(static_cast<const float*>(static_cast<const void*>(W.row(r))), n_in, row);
      }
    }
    float* strip = strips->data() + s * n_in * kRows;
    for (int64_t j = 0; j < per_lane; ++j) {
      for (int l = 0; l < kLanes; l += 4) {
        const int64_t i = j * kLanes + l;
        for (int half = 0; half < 2; ++half) {
          const float* r = rows.data() + half * 4 * n_in + i;
          simd::F32x4 x0 = simd::load_f32x4(r), x1 = simd::load_f32x4(r + n_in), x2 = simd::load_f32x4(r + 2 * n_in),
                      x3 = simd::load_f32x4(r + 3 * n_in);
          simd::transpose(x0, x1, x2, x3);  // x_m: lane l + m of the 4 rows
          const simd::F32x4* lanes[4] = {&x0, &x1, &x2, &x3};
          for (int m = 0; m < 4; ++m) simd::store(strip + ((l + m) * per_lane + j) * kRows + half * 4, *lanes[m]);
        }
      }
    }
  }
}

// Tokens [t0, t1) of X -> xl [t1 - t0][kLanes][n_in / kLanes]: each lane's elements contiguous,
// so that a lane's pass over 6 tokens reads 6 short runs, whatever n_in; `dpbf16`: in a BF16
// step's order. A token is a matrix [n_in / kLanes][kLanes] transposed, 4 × 4 blocks at a time
// where its rows come in fours.
void convert_tokens(const float* X, int64_t n_in, int t0, int t1, bool dpbf16, float* xl) {
  const int64_t per_lane = n_in / kLanes;
  std::vector<float> reordered(dpbf16 ? static_cast<size_t>(n_in) : 0);
  for (int t = t0; t < t1; ++t) {
    const float* x = X + t * n_in;
    if (dpbf16) {
      for (int64_t j = 0; j < n_in; ++j) reordered[j] = x[dpbf16_element(j)];
      x = reordered.data();
    }
    float* out = xl + (t - t0) * n_in;
    if (per_lane % 4 != 0) {
      for (int64_t i = 0; i < n_in; ++i) out[(i % kLanes) * per_lane + i / kLanes] = x[i];
      continue;
    }
    for (int64_t j = 0; j < per_lane; j += 4) {
      for (int l = 0; l < kLanes; l += 4) {
        const float* r = x + j * kLanes + l;
        simd::F32x4 x0 = simd::load_f32x4(r), x1 = simd::load_f32x4(r + kLanes), x2 = simd::load_f32x4(r + 2 * kLanes),
                    x3 = simd::load_f32x4(r + 3 * kLanes);
        simd::transpose(x0, x1, x2, x3);  // x_m: lane l + m of elements j .. j + 3
        simd::store(out + l * per_lane + j, x0);
        simd::store(out + (l + 1) * per_lane + j, x1);
        simd::store(out + (l + 2) * per_lane + j, x2);
        simd::store(out + (l + 3) * per_lane + j, x3);
      }
    }
  }
}

}  // namespace

namespace {

float halved_lanes(float* lane) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

}  // namespace

float dot_f16_lanes16_ref(const uint16_t* w, const float* x, int64_t n) {
  assert(n % kLanes == 0);
  float lane[kLanes] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % kLanes] += fp16_to_fp32(w[i]) * x[i];
  return halved_lanes(lane);
}

float dot_bf16_lanes16_ref(const uint16_t* w, const float* x, int64_t n) {
  assert(n % (2 * kLanes) == 0);
  float lane[kLanes] = {};
  for (int64_t i = 0; i < n; i += 2 * kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      lane[l] += bf16_to_fp32(w[i + 2 * l + 1]) * x[i + 2 * l + 1];
      lane[l] += bf16_to_fp32(w[i + 2 * l]) * x[i + 2 * l];
    }
  }
  return halved_lanes(lane);
}

float dot_f32_lanes16_ref(const float* w, const float* x, int64_t n) {
  assert(n % kLanes == 0);
  float lane[kLanes] = {};
  for (int64_t i = 0; i < n; ++i) lane[i % kLanes] = fma_f32(w[i], x[i], lane[i % kLanes]);
  return halved_lanes(lane);
}

float dot_f32_lanes16(const float* w, const float* x, int64_t n) {
  assert(n % kLanes == 0);
  // Lanes 0-3, 4-7, 8-11 and 12-15 in four vectors; halving adds lanes 8-15 to 0-7 (v2, v3 to
  // v0, v1), then 4-7 to 0-3, then within the vector 2-3 to 0-1 and 1 to 0.
  simd::F32x4 v[4];
  for (auto& a : v) a = simd::splat(0.0f);
  for (int64_t i = 0; i < n; i += kLanes) {
    for (int j = 0; j < 4; ++j) v[j] = simd::fused_madd(simd::load_f32x4(w + i + 4 * j), simd::load_f32x4(x + i + 4 * j), v[j]);
  }
  alignas(16) float lane[4];
  simd::store(lane, simd::add(simd::add(v[0], v[2]), simd::add(v[1], v[3])));
  return (lane[0] + lane[2]) + (lane[1] + lane[3]);
}

float dot_f32_ggml_ref(const float* x, const float* y, int64_t n) {
  assert(n % (4 * kLanes) == 0);
  float lane[4 * kLanes] = {};  // ggml's four vectors of 16 side by side
  for (int64_t i = 0; i < n; ++i) lane[i % (4 * kLanes)] = fma_f32(x[i], y[i], lane[i % (4 * kLanes)]);
  for (int l = 0; l < 2 * kLanes; ++l) lane[l] += lane[l + 2 * kLanes];
  for (int l = 0; l < kLanes; ++l) lane[l] += lane[l + kLanes];
  return halved_lanes(lane);
}

namespace {

// dot_f32_ggml; `exact`: every product is exact in f32 (f16 values both), so the fused step is a
// multiply and an add.
template <bool exact>
float dot_ggml(const float* x, const float* y, int64_t n) {
  assert(n % (4 * kLanes) == 0);
  simd::F32x4 v[16];  // ggml's vector j, lanes 4m..4m+3, in v[4j + m]
  for (auto& a : v) a = simd::splat(0.0f);
  for (int64_t i = 0; i < n; i += 4 * kLanes) {
    for (int j = 0; j < 16; ++j) {
      const simd::F32x4 a = simd::load_f32x4(x + i + 4 * j), b = simd::load_f32x4(y + i + 4 * j);
      v[j] = exact ? simd::add(v[j], simd::mul(a, b)) : simd::fused_madd(a, b, v[j]);
    }
  }
  for (int j = 0; j < 8; ++j) v[j] = simd::add(v[j], v[j + 8]);
  for (int j = 0; j < 4; ++j) v[j] = simd::add(v[j], v[j + 4]);
  alignas(16) float lane[4];
  simd::store(lane, simd::add(simd::add(v[0], v[2]), simd::add(v[1], v[3])));
  return (lane[0] + lane[2]) + (lane[1] + lane[3]);
}

}  // namespace

float dot_f32_ggml(const float* x, const float* y, int64_t n) { return dot_ggml<false>(x, y, n); }

float dot_bf16_ggml(const uint16_t* w, const float* x, int64_t n) {
  assert(n % (4 * kLanes) == 0);
  float c1[kLanes] = {}, c2[kLanes] = {};  // ggml's two dpbf16 accumulators, 32 elements each a step
  for (int64_t i = 0; i < n; i += 4 * kLanes) {
    for (int half = 0; half < 2; ++half) {
      float* c = half == 0 ? c1 : c2;
      const int64_t e = i + half * 2 * kLanes;
      for (int l = 0; l < kLanes; ++l) {
        c[l] += bf16_to_fp32(w[e + 2 * l + 1]) * x[e + 2 * l + 1];
        c[l] += bf16_to_fp32(w[e + 2 * l]) * x[e + 2 * l];
      }
    }
  }
  return static_cast<float>(static_cast<double>(halved_lanes(c1)) + static_cast<double>(halved_lanes(c2)));
}

bool gemm_ggml_fits(const WeightView& W) {
  const bool typed = W.type == GgmlType::F16 || W.type == GgmlType::BF16 || W.type == GgmlType::F32;
  return typed && W.n_in % (4 * kLanes) == 0;
}

void gemm_ggml(const WeightView& W, const float* X, int n_tok, float* Y, int64_t r0, int64_t r1) {
  assert(gemm_ggml_fits(W) && r0 <= r1);
  constexpr int kTileTokens = 16;  // tokens sharing each pass over the rows, in cache
  const int64_t n_in = W.n_in;
  // An F16 row converted once per call; F32 and BF16 rows are read as they are.
  std::vector<float> halves(W.type == GgmlType::F16 ? static_cast<size_t>((r1 - r0) * n_in) : 0);
  for (int64_t r = r0; W.type == GgmlType::F16 && r < r1; ++r) {
    halves_to_floats(static_cast<const uint16_t*>(static_cast<const void*>(W.row(r))), halves.data() + (r - r0) * n_in,
                     static_cast<int>(n_in));
  }
  for (int t0 = 0; t0 < n_tok; t0 += kTileTokens) {
    const int t1 = std::min(n_tok, t0 + kTileTokens);
    for (int64_t r = r0; r < r1; ++r) {
      const void* row = W.row(r);
      const float* w = W.type == GgmlType::F16 ? halves.data() + (r - r0) * n_in : static_cast<const float*>(row);
      for (int t = t0; t < t1; ++t) {
        const float* x = X + t * n_in;
        Y[t * W.n_out + r] = W.type == GgmlType::BF16 ? dot_bf16_ggml(static_cast<const uint16_t*>(row), x, n_in)
                             : W.type == GgmlType::F16  ? dot_ggml<true>(w, x, n_in)
                                                        : dot_ggml<false>(w, x, n_in);
      }
    }
  }
}

bool gemm_lanes16_fits(const WeightView& W) {
  const int64_t step = W.type == GgmlType::BF16 ? 2 * kLanes : kLanes;  // tinyBLAS's elements a step
  const bool typed = W.type == GgmlType::F16 || W.type == GgmlType::BF16 || W.type == GgmlType::F32;
  return typed && W.n_in % step == 0 && W.n_out % 4 == 0;
}

void gemm_lanes16(const WeightView& W, const float* X, int n_tok, float* Y, int64_t r0, int64_t r1) {
  assert(gemm_lanes16_fits(W) && r0 <= r1);
  const int64_t n_in = W.n_in, per_lane = n_in / kLanes;
  const bool relaxed = relaxed_kernels_run(), dpbf16 = W.type == GgmlType::BF16, exact = W.type != GgmlType::F32;
  ScratchVector<float> strips;
  std::vector<float> xl(static_cast<size_t>(kTileTokens * n_in));
  convert_strips(W, r0, r1, &strips);
  alignas(16) float partial[kLanes][kTokens * kRows];
  for (int t0 = 0; t0 < n_tok; t0 += kTileTokens) {
    const int t1 = std::min(n_tok, t0 + kTileTokens);
    convert_tokens(X, n_in, t0, t1, dpbf16, xl.data());
    for (int64_t r = r0; r < r1; r += kRows) {
      const float* strip = strips.data() + (r - r0) / kRows * n_in * kRows;
      const int64_t rows = std::min<int64_t>(kRows, r1 - r);
      for (int t = t0; t < t1; t += kTokens) {
        const int n = std::min(kTokens, t1 - t);
        const float* x[kTokens];
        for (int j = 0; j < kTokens; ++j) x[j] = xl.data() + (t - t0 + std::min(j, n - 1)) * n_in;
        const float* sums = strip_sums(relaxed, exact, strip, x, per_lane, partial);
        for (int j = 0; j < n; ++j) std::copy_n(sums + j * kRows, rows, Y + (t + j) * W.n_out + r);
      }
    }
  }
}

}  // namespace lf
