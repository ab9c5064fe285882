// attention_f32_tiles (kernels/attention.h): ops/attention_f32_tiles.cpp's bytes, with each KV
// head's keys and values converted to f32 once per call (the keys transposed tile by tile), the
// scores' FMA chains run over 64 keys side by side (one madd of a transposed K row per d) and the
// values' over the head dim. Where
// f32x4.relaxed_madd is fused (the relaxed modules), kernels/relaxed_simd.wat runs both for three
// rows at a time with every running sum in a register, and the exponentials with their FMAs fused.
#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/attention_steps.h"
#include "kernels/exp_ggml.h"

#if LF_RELAXED_SIMD
// s_r [64] <- query row q_r's scores against the tile's keys kt [d][64] times scale, r = 0, 1, 2;
// max [3] <- each row's largest as scale_tile finds it; returns bit r set where row r has a NaN
extern "C" int32_t lf_attn_scores3_relaxed(float* s0, float* s1, float* s2, const float* kt, const float* q0,
                                           const float* q1, const float* q2, int32_t d, float scale, float* max);
// acc_r [d] <- the FMA chains continued over the tile's n keys: values v [n][d], weights w_r [n]
extern "C" void lf_attn_values3_relaxed(float* acc0, float* acc1, float* acc2, const float* v, const float* w0,
                                        const float* w1, const float* w2, int32_t n, int32_t d);
// x [n] <- expf_ggml(x - max); returns the vectors left to the scalar form (bit i: lanes 4i..4i+3)
extern "C" int32_t lf_exp_ggml_relaxed(float* x, int32_t n, float max, const void* consts);
#endif

namespace lf {

using namespace attn_steps;

namespace {

constexpr int kRows = 16;         // query rows sharing each converted tile
constexpr int kTileQueries = 64;  // GGML_FA_TILE_Q: the fewest rows of a call ggml tiles

#if LF_RELAXED_SIMD
// lf_exp_ggml_relaxed's constants, in the order of its offsets
struct ExpConstants {
  float log2e[4], round[4], ln2_hi[4], ln2_lo[4], p5[4], p4[4], p3[4], p2[4], p1[4], one[4];
  float last_normal[4], first_normal[4], floor[4];
  int32_t bias_under[4], bias[4];
  float down[4], zero_below[4];
};
#define LF_LANES(x) {x, x, x, x}
alignas(16) constexpr ExpConstants kExpConstants = {
    LF_LANES(0x1.715476p+0f), LF_LANES(0x1.8p23f),     LF_LANES(0x1.62e4p-1f),  LF_LANES(0x1.7f7d1cp-20f),
    LF_LANES(0x1.0e4020p-7f), LF_LANES(0x1.573e2ep-5f), LF_LANES(0x1.555e66p-3f), LF_LANES(0x1.fffdb6p-2f),
    LF_LANES(0x1.ffffecp-1f), LF_LANES(1.0f),           LF_LANES(127.0f),        LF_LANES(-125.0f),
    LF_LANES(-250.0f),        LF_LANES(126 + 127),      LF_LANES(127),           LF_LANES(0x1p-126f),
    LF_LANES(-192.0f)};
#undef LF_LANES
static_assert(sizeof(ExpConstants) == 272, "the offsets lf_exp_ggml_relaxed reads");
#endif

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

// Keys p0+t0 .. p0+t1-1 of one KV head (rows kv_row(p)) -> kT [D][T] f32, the tile's other keys
// zero; k32 [T][D] scratch.
template <typename KeyRow>
void load_tile_keys_transposed(KeyRow kv_row, int p0, int t0, int t1, int D, float* k32, float* kT) {
  constexpr int T = kF32TileKeys;
  for (int t = 0; t < T; ++t) {
    float* row = k32 + static_cast<int64_t>(t) * D;
    if (t >= t0 && t < t1) halves_to_f32(kv_row(p0 + t), row, D); else std::fill(row, row + D, 0.0f);
  }
  transpose_rows(k32, T, D, kT);
}

#if LF_RELAXED_SIMD
constexpr int kGroup = 3;  // query rows per call of the .wat kernels

// The .wat kernels' rows r0 .. r0+2 of `count` rows, the last one repeated past the end.
int group_row(int r0, int j, int count) { return r0 + std::min(j, count - 1 - r0); }
#endif

// s [T] (scaled) <- the keys outside [t0, t1) -inf; returns their largest by the reference's scan
// in key order (m = m > s ? m : s)
float scan_max(float* s, int t0, int t1) {
  constexpr int T = kF32TileKeys;
  float tile_max = -INFINITY;
  for (int t = 0; t < T; ++t) {
    if (t < t0 || t >= t1) s[t] = -INFINITY;
    tile_max = tile_max > s[t] ? tile_max : s[t];
  }
  return tile_max;
}

// s [T] <- s · kq_scale, the keys outside [t0, t1) -inf; returns their largest as scan_max finds
// it. For a whole tile, lanes scanning every fourth key and then each other find the same value
// unless a score is NaN (then the scan itself runs), but for the sign of a zero, which no later
// step sees.
float scale_tile(float* s, int t0, int t1, float kq_scale) {
  constexpr int T = kF32TileKeys;
  if (t0 > 0 || t1 < T) {
    for (int t = 0; t < T; ++t) s[t] *= kq_scale;
    return scan_max(s, t0, t1);
  }
  const simd::F32x4 scale = simd::splat(kq_scale);
  simd::F32x4 m = simd::splat(-INFINITY);
  bool nan = false;
  for (int t = 0; t < T; t += 4) {
    const simd::F32x4 x = simd::mul(simd::load_f32x4(s + t), scale);
    simd::store(s + t, x);
    m = simd::keep_greater(m, x);
    nan = nan || simd::any_nan(x);
  }
  if (nan) return scan_max(s, 0, T);
  alignas(16) float lanes[4];
  simd::store(lanes, m);
  float tile_max = -INFINITY;
  for (const float x : lanes) tile_max = tile_max > x ? tile_max : x;
  return tile_max;
}

// x [kExpLanes] -> their sum as _mm512_reduce_add_ps adds it: lanes l + 8, then l + 4 (vectors),
// then l + 2 and l + 1
float sum_lanes(const float* x) {
  const simd::F32x4 s = simd::add(simd::add(simd::load_f32x4(x), simd::load_f32x4(x + 8)),
                                  simd::add(simd::load_f32x4(x + 4), simd::load_f32x4(x + 12)));
  alignas(16) float l[4];
  simd::store(l, s);
  return (l[0] + l[2]) + (l[1] + l[3]);
}

// s [T] <- expf_ggml(s - max); returns their sum as the reference forms it: sum_exp_lanes of
// each 16, added in double.
double exp_tile(float* s, float max) {
  double sum = 0.0;
  for (int t = 0; t < kF32TileKeys; t += kExpLanes) sum += static_cast<double>(sum_exp_lanes_simd(s + t, max));
  return sum;
}

}  // namespace

bool takes_f32_tiles(int n_q, int D) { return n_q >= kTileQueries && D % kExpLanes == 0; }

float sum_exp_lanes_simd(float* x, float max) {
  static_assert(kExpLanes == 16, "four vectors");
#if LF_RELAXED_SIMD
  if (values_fused()) {
    // the .wat kernel, the vectors it leaves (a NaN, or n past 127) by the scalar form
    const int32_t scalar = lf_exp_ggml_relaxed(x, kExpLanes, max, &kExpConstants);
    for (int l = 0; l < kExpLanes; ++l) {
      if (scalar & (1 << (l / 4))) x[l] = expf_ggml(x[l] - max);
    }
    return sum_lanes(x);
  }
#endif
  for (int g = 0; g < 4; ++g) simd::store(x + 4 * g, exp_ggml(simd::add(simd::load_f32x4(x + 4 * g), simd::splat(-max))));
  return sum_lanes(x);
}

void attention_f32_tiles(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                         float kq_scale, float* out, AttentionWorkspace* ws) {
  const int D = kv.head_dim;
  assert(D % kExpLanes == 0 && kv.k_type == GgmlType::F16 && kv.v_type == GgmlType::F16);
  constexpr int T = kF32TileKeys;
  const bool grouped = values_fused();  // the .wat kernels run
  const F32TileKeys keys = f32_tile_keys(pos0, n_q, mask);
  const int n_tiles = (keys.last - keys.begin) / T + 1;
  const int64_t tile_size = static_cast<int64_t>(T) * D;
  ws->k32.resize(static_cast<size_t>(tile_size));
  ws->k.resize(static_cast<size_t>(n_tiles * tile_size));  // [tiles][D, T] a KV head's keys, transposed
  ws->v.resize(static_cast<size_t>(n_tiles * tile_size));  // [tiles][T, D] its values
  ws->scores.resize(static_cast<size_t>(kRows) * T);
  ws->acc.resize(static_cast<size_t>(kRows) * D);
  ws->max.resize(kRows);
  ws->sum.resize(kRows);
  int active[kRows];      // rows whose tile has a finite score: they take the tile's values
  float tile_max[kRows];  // each row's largest score in the tile
  int seen[kRows][2];     // each row's keys in the tile, [t0, t1)
  int converted = -1;     // the KV head in ws->k and ws->v
  // The call's keys of tile p0, [t0, t1): the keys past them padding.
  const auto call_keys = [&](int p0, int* t0, int* t1) {
    *t0 = std::max(0, keys.first - p0);
    *t1 = std::min(T, keys.last + 1 - p0);
  };
  for (int h = 0; h < n_head; ++h) {
    const int g = kv_head_for(h, n_head, kv.n_head_kv);
    const auto kv_row_of = [&](const void* rows, int p) { return halves(kv_row(kv, rows, GgmlType::F16, g, p)); };
    const auto q_row = [&](int i) { return q + (static_cast<int64_t>(i) * n_head + h) * D; };
    const auto scores = [&](int r) { return ws->scores.data() + static_cast<int64_t>(r) * T; };
    const auto acc_row = [&](int r) { return ws->acc.data() + static_cast<int64_t>(r) * D; };
    if (g != converted) {
      for (int p0 = keys.begin; p0 <= keys.last; p0 += T) {
        int t0, t1;
        call_keys(p0, &t0, &t1);
        float* kt = ws->k.data() + (p0 - keys.begin) / T * tile_size;
        float* vt = ws->v.data() + (p0 - keys.begin) / T * tile_size;
        load_tile_keys_transposed([&](int p) { return kv_row_of(kv.k, p); }, p0, t0, t1, D, ws->k32.data(), kt);
        for (int t = t0; t < t1; ++t) halves_to_f32(kv_row_of(kv.v, p0 + t), vt + static_cast<int64_t>(t) * D, D);
      }
      converted = g;
    }
    for (int i0 = 0; i0 < n_q; i0 += kRows) {
      const int rows = std::min(kRows, n_q - i0);
      std::fill(ws->acc.begin(), ws->acc.end(), 0.0f);
      std::fill(ws->max.begin(), ws->max.end(), -INFINITY);
      std::fill(ws->sum.begin(), ws->sum.end(), 0.0f);
      for (int p0 = keys.begin; p0 <= keys.last; p0 += T) {
        int t0, t1;
        call_keys(p0, &t0, &t1);
        const float* kt = ws->k.data() + (p0 - keys.begin) / T * tile_size;
        const float* vt = ws->v.data() + (p0 - keys.begin) / T * tile_size;
        for (int r = 0; r < rows; ++r) {
          const int p = pos0 + i0 + r;
          seen[r][0] = std::clamp(mask.first_key(p) - p0, 0, T);
          seen[r][1] = std::clamp(mask.last_key(p) + 1 - p0, seen[r][0], T);
        }
#if LF_RELAXED_SIMD
        if (grouped) {
          for (int r0 = 0; r0 < rows; r0 += kGroup) {
            const int a = group_row(r0, 0, rows), b = group_row(r0, 1, rows), c = group_row(r0, 2, rows);
            float max[kGroup];
            const int32_t nan = lf_attn_scores3_relaxed(scores(a), scores(b), scores(c), kt, q_row(i0 + a),
                                                        q_row(i0 + b), q_row(i0 + c), D, kq_scale, max);
            const int group[kGroup] = {a, b, c};
            for (int j = 0; j < kGroup; ++j) {
              const int r = group[j];
              const bool whole = seen[r][0] == 0 && seen[r][1] == T && !(nan & (1 << j));
              tile_max[r] = whole ? max[j] : scan_max(scores(r), seen[r][0], seen[r][1]);
            }
          }
        }
#endif
        int n_active = 0;
        for (int r = 0; r < rows; ++r) {
          float* s = scores(r);
          if (!grouped) {
            const float* qr = q_row(i0 + r);
            std::fill(s, s + T, 0.0f);
            for (int d = 0; d < D; ++d) madd_f32(s, kt + static_cast<int64_t>(d) * T, qr[d], T);
            tile_max[r] = scale_tile(s, seen[r][0], seen[r][1], kq_scale);
          }
          float& M = ws->max[r];
          float& S = ws->sum[r];
          if (tile_max[r] == -INFINITY) {
            float* acc = acc_row(r);
            for (int d = 0; d < D; ++d) acc[d] += 0.0f;  // as the reference: -0 becomes +0
            continue;
          }
          const float M_new = std::fmax(M, tile_max[r]);
          if (M_new > M) {
            const float ms = expf(M - M_new);
            float* acc = acc_row(r);
            for (int d = 0; d < D; ++d) acc[d] *= ms;
            S *= ms;
          }
          M = M_new;
          S = static_cast<float>(static_cast<double>(S) + exp_tile(s, M));
          active[n_active++] = r;
        }
#if LF_RELAXED_SIMD
        if (grouped) {
          const float* vt0 = vt + static_cast<int64_t>(t0) * D;
          for (int j0 = 0; j0 < n_active; j0 += kGroup) {
            const int a = active[group_row(j0, 0, n_active)], b = active[group_row(j0, 1, n_active)],
                      c = active[group_row(j0, 2, n_active)];
            lf_attn_values3_relaxed(acc_row(a), acc_row(b), acc_row(c), vt0, scores(a) + t0, scores(b) + t0,
                                    scores(c) + t0, t1 - t0, D);
          }
        }
#endif
        for (int j = 0; j < n_active; ++j) {
          float* acc = acc_row(active[j]);
          const float* s = scores(active[j]);
          if (!grouped) for (int t = t0; t < t1; ++t) madd_f32(acc, vt + static_cast<int64_t>(t) * D, s[t], D);
          if (t1 - t0 < T) for (int d = 0; d < D; ++d) acc[d] += 0.0f;
        }
      }
      for (int r = 0; r < rows; ++r) {
        const float S = ws->sum[r];
        const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
        const float* acc = acc_row(r);
        float* o = out + (static_cast<int64_t>(i0 + r) * n_head + h) * D;
        for (int d = 0; d < D; ++d) o[d] = acc[d] * S_inv;
      }
    }
  }
}

}  // namespace lf
