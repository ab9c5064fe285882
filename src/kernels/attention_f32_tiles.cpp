// attention_f32_tiles (kernels/attention.h): ops/attention_f32_tiles.cpp's bytes, with each tile
// of keys converted to f32 once for 16 query rows, the scores' FMA chains run over 64 keys side by
// side (one madd of a transposed K row per d) and the values' over the head dim.
#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/attention_steps.h"
#include "kernels/exp_ggml.h"

namespace lf {

using namespace attn_steps;

namespace {

constexpr int kRows = 16;         // query rows sharing each converted tile
constexpr int kTileQueries = 64;  // GGML_FA_TILE_Q: the fewest rows of a call ggml tiles

// expf_ggml of each lane: the polynomial in vectors, scalef lane by lane (2^n made from its bits
// where j · 2^n stays normal, else in double, as the reference).
simd::F32x4 exp_ggml(simd::F32x4 x) {
  using simd::fused_madd, simd::splat;
  const simd::F32x4 z = fused_madd(x, splat(0x1.715476p+0f), splat(0x1.8p23f));
  const simd::F32x4 n = simd::add(z, splat(-0x1.8p23f));
  const simd::F32x4 minus_n = simd::mul(n, splat(-1.0f));
  const simd::F32x4 b = fused_madd(minus_n, splat(0x1.7f7d1cp-20f), fused_madd(minus_n, splat(0x1.62e4p-1f), x));
  const simd::F32x4 u = simd::mul(b, b);
  const simd::F32x4 j = fused_madd(
      fused_madd(fused_madd(splat(0x1.0e4020p-7f), b, splat(0x1.573e2ep-5f)), u,
                 fused_madd(splat(0x1.555e66p-3f), b, splat(0x1.fffdb6p-2f))),
      u, fused_madd(splat(0x1.ffffecp-1f), b, splat(1.0f)));
  alignas(16) float nl[4], jl[4], e[4];
  simd::store(nl, n);
  simd::store(jl, j);
  for (int l = 0; l < 4; ++l) {
    if (nl[l] >= -125.0f && nl[l] <= 127.0f) {
      e[l] = jl[l] * f32_from_bits(static_cast<uint32_t>(static_cast<int32_t>(nl[l]) + 127) << 23);
    } else {
      e[l] = scalef_ggml(jl[l], nl[l]);
    }
  }
  return simd::load_f32x4(e);
}

}  // namespace

bool takes_f32_tiles(int n_q, int D) { return n_q >= kTileQueries && D % kExpLanes == 0; }

float sum_exp_lanes_simd(float* x, float max) {
  static_assert(kExpLanes == 16, "four vectors");
  simd::F32x4 e[4];
  for (int g = 0; g < 4; ++g) {
    e[g] = exp_ggml(simd::add(simd::load_f32x4(x + 4 * g), simd::splat(-max)));
    simd::store(x + 4 * g, e[g]);
  }
  // lanes l + 8, then l + 4: vectors; then l + 2 and l + 1
  const simd::F32x4 s = simd::add(simd::add(e[0], e[2]), simd::add(e[1], e[3]));
  alignas(16) float l[4];
  simd::store(l, s);
  return (l[0] + l[2]) + (l[1] + l[3]);
}

void attention_f32_tiles(const float* q, int n_q, int n_head, const uint16_t* k, const uint16_t* v, int n_kv,
                         int n_head_kv, int D, float kq_scale, float* out, AttentionWorkspace* ws) {
  assert(D % kExpLanes == 0);
  constexpr int T = kF32TileKeys;
  ws->k.resize(static_cast<size_t>(D) * T);  // [D, T] the tile's keys, transposed
  ws->v.resize(static_cast<size_t>(T) * D);  // [T, D] its values
  ws->scores.resize(static_cast<size_t>(kRows) * T);
  ws->acc.resize(static_cast<size_t>(kRows) * D);
  ws->max.resize(kRows);
  ws->sum.resize(kRows);
  for (int h = 0; h < n_head; ++h) {
    const int g = kv_head_for(h, n_head, n_head_kv);
    const auto kv_row = [&](const uint16_t* kv, int p) { return kv + (static_cast<int64_t>(p) * n_head_kv + g) * D; };
    const auto q_row = [&](int i) { return q + (static_cast<int64_t>(i) * n_head + h) * D; };
    for (int i0 = 0; i0 < n_q; i0 += kRows) {
      const int rows = std::min(kRows, n_q - i0);
      std::fill(ws->acc.begin(), ws->acc.end(), 0.0f);
      std::fill(ws->max.begin(), ws->max.end(), -INFINITY);
      std::fill(ws->sum.begin(), ws->sum.end(), 0.0f);
      for (int p0 = 0; p0 < n_kv; p0 += T) {
        const int n = std::min(T, n_kv - p0);
        for (int d = 0; d < D && n < T; ++d) std::fill_n(ws->k.begin() + static_cast<int64_t>(d) * T + n, T - n, 0.0f);
        for (int t = 0; t < n; ++t) {
          const uint16_t* kt = kv_row(k, p0 + t);
          for (int d = 0; d < D; ++d) ws->k[static_cast<size_t>(d) * T + t] = fp16_to_fp32(kt[d]);
          halves_to_f32(kv_row(v, p0 + t), ws->v.data() + static_cast<int64_t>(t) * D, D);
        }
        for (int r = 0; r < rows; ++r) {
          float* s = ws->scores.data() + static_cast<int64_t>(r) * T;
          float* acc = ws->acc.data() + static_cast<int64_t>(r) * D;
          const float* qr = q_row(i0 + r);
          std::fill(s, s + T, 0.0f);
          for (int d = 0; d < D; ++d) madd_f32(s, ws->k.data() + static_cast<int64_t>(d) * T, qr[d], T);
          float tile_max = -INFINITY;
          for (int t = 0; t < T; ++t) {
            s[t] = t < n ? s[t] * kq_scale : -INFINITY;
            tile_max = tile_max > s[t] ? tile_max : s[t];
          }
          float& M = ws->max[r];
          float& S = ws->sum[r];
          if (tile_max == -INFINITY) {
            for (int d = 0; d < D; ++d) acc[d] += 0.0f;  // as the reference: -0 becomes +0
            continue;
          }
          const float M_new = std::fmax(M, tile_max);
          if (M_new > M) {
            const float ms = expf(M - M_new);
            for (int d = 0; d < D; ++d) acc[d] *= ms;
            S *= ms;
          }
          M = M_new;
          double sum = 0.0;
          for (int t = 0; t < T; t += kExpLanes) sum += static_cast<double>(sum_exp_lanes_simd(s + t, M));
          S = static_cast<float>(static_cast<double>(S) + sum);
          for (int t = 0; t < n; ++t) madd_f32(acc, ws->v.data() + static_cast<int64_t>(t) * D, s[t], D);
          if (n < T) for (int d = 0; d < D; ++d) acc[d] += 0.0f;
        }
      }
      for (int r = 0; r < rows; ++r) {
        const float S = ws->sum[r];
        const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
        const float* acc = ws->acc.data() + static_cast<int64_t>(r) * D;
        float* o = out + (static_cast<int64_t>(i0 + r) * n_head + h) * D;
        for (int d = 0; d < D; ++d) o[d] = acc[d] * S_inv;
      }
    }
  }
}

}  // namespace lf
