// The per-key steps of the attention kernels, lf::attention's arithmetic operation for
// operation, shared by attention_tiled (kernels/attention.cpp) and attention_truncated
// (kernels/attention_truncated.cpp) so that a key the two both visit gets the same arithmetic.
// Inline in this header because they are the kernels' inner loops. Their vector operations are
// kernels/simd.h's, whose backends give the bytes of the scalar reference (ops/attention.cpp).
#pragma once

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kernels/kv_view.h"
#include "kernels/simd.h"
#include "quant/quant.h"

#if LF_RELAXED_SIMD
// acc [n] <- f16(f32(fma(v, w, acc))) lane by lane, held as f32, n a positive multiple of 8, by
// f32x4.relaxed_madd (src/kernels/relaxed_simd.wat); consts: attn_steps::HalfRounding
extern "C" void lf_attn_add_weighted_relaxed(float* acc, const float* v, float w, int32_t n, const void* consts);
// acc [n] <- lf_attn_add_weighted_relaxed(acc, rows[k], weights[k], n) for k = 0 .. keys-1 in
// order, keys > 0, n a positive multiple of 16, in one pass over acc, with flushed[k] for
// weights[k] where every lane stays in the f16 normal range
extern "C" void lf_attn_add_weighted_keys_relaxed(float* acc, const float* const* rows, const float* flushed,
                                                  const float* weights, int32_t keys, int32_t n, const void* consts);
// acc [n] <- f32(fma(v, w, acc)) lane by lane, n a positive multiple of 4, the same way
extern "C" void lf_attn_madd_relaxed(float* acc, const float* v, float w, int32_t n);
// acc [n] <- f32(fma(rows[k], weights[k], acc)) lane by lane for k = 0 .. keys-1 in order,
// keys > 0, n a positive multiple of 16, in one pass over acc
extern "C" void lf_attn_madd_keys_relaxed(float* acc, const float* const* rows, const float* weights, int32_t keys,
                                          int32_t n);
// f [i] <- fp16_to_fp32(h [i]), n a multiple of 8, up to the first 8 holding an infinity or
// NaN: returns how many it converted; consts: attn_steps::HalfWidening
extern "C" int32_t lf_halves_to_f32_relaxed(const uint16_t* h, float* f, int32_t n, const void* consts);
#endif

namespace lf::attn_steps {

// Whether the value step's FMA is f32x4.relaxed_madd, fused (the relaxed module where its
// kernels run): then it needs no f64 copy of the values.
inline bool values_fused() {
#if LF_RELAXED_SIMD
  static const bool fused = relaxed_kernels_run();
  return fused;
#else
  return false;
#endif
}

// acc [n] <- fma(v, w, acc) lane by lane, n a multiple of 4: f32x4.relaxed_madd where it is
// fused, else fused_madd (in double); the same bits.
inline void madd_f32(float* acc, const float* v, float w, int n) {
#if LF_RELAXED_SIMD
  if (values_fused()) return lf_attn_madd_relaxed(acc, v, w, n);
#endif
  const simd::F32x4 weight = simd::splat(w);
  for (int d = 0; d < n; d += 4) {
    simd::store(acc + d, simd::fused_madd(simd::load_f32x4(v + d), weight, simd::load_f32x4(acc + d)));
  }
}

// (query row, query head) pairs per tile: the K/V conversion of a key is shared by all of
// them, and [16, 512] f32 accumulators still sit in L2.
constexpr int kTileDots = 16;
// Keys scored together: the vector lanes run over keys, never over the head dim, so that each
// key's score keeps the reference's order of additions (attention_score, ops/attention.cpp).
constexpr int kKeyBlock = 8;

inline float round_to_half(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

// Lanes outside the f16 normal range: rare (mostly accumulators scaled towards 0 when the max
// jumps), so kept out of line.
[[gnu::noinline]] inline simd::F32x4 round_to_half_rare(simd::F32x4 x) { return simd::round_to_half_any(x); }

// The common case, every lane an f16 normal, costs a few integer operations inline.
inline simd::F32x4 round_to_half(simd::F32x4 x) {
  return simd::is_half_normal(x) ? simd::round_mantissa_to_half(x) : round_to_half_rare(x);
}

#if LF_RELAXED_SIMD
// The constants lf_halves_to_f32_relaxed reads: simd_wasm.h's try_halves_to_f32's.
struct HalfWidening {
  int16_t exponent[8];
  int32_t keep[4];
  float scale[4];
};
alignas(16) inline constexpr HalfWidening kHalfWidening = {
    {0x7C00, 0x7C00, 0x7C00, 0x7C00, 0x7C00, 0x7C00, 0x7C00, 0x7C00},
    {static_cast<int32_t>(0x8FFFFFFFu), static_cast<int32_t>(0x8FFFFFFFu), static_cast<int32_t>(0x8FFFFFFFu),
     static_cast<int32_t>(0x8FFFFFFFu)},
    {0x1p112f, 0x1p112f, 0x1p112f, 0x1p112f}};
static_assert(sizeof(HalfWidening) == 48, "the offsets lf_halves_to_f32_relaxed reads");
#endif

// h [n] f16 -> f [n] f32
inline void halves_to_f32(const uint16_t* h, float* f, int n) {
  int d = 0;
  while (d + 8 <= n) {
#if LF_RELAXED_SIMD
    d += lf_halves_to_f32_relaxed(h + d, f + d, (n - d) / 8 * 8, &kHalfWidening);
    if (d + 8 > n) break;
#endif
    simd::F32x4 lo, hi;
    if (simd::try_halves_to_f32(h + d, &lo, &hi)) {
      simd::store(f + d, lo);
      simd::store(f + d + 4, hi);
    } else {
      for (int i = d; i < d + 8; ++i) f[i] = fp16_to_fp32(h[i]);
    }
    d += 8;
  }
  for (; d < n; ++d) f[d] = fp16_to_fp32(h[d]);
}

// f [n] -> f64 [n]
inline void promote(const float* f, double* out, int n) {
  int d = 0;
  for (; d + 4 <= n; d += 4) {
    const simd::F32x4 x = simd::load_f32x4(f + d);
    simd::store(out + d, simd::promote_lo(x));
    simd::store(out + d + 2, simd::promote_hi(x));
  }
  for (; d < n; ++d) out[d] = f[d];
}

// q [D] f32 -> q16 [D]: rounded to f16 as the reference rounds the query, held as f32.
inline void load_query(const float* q, int D, float* q16) {
  int d = 0;
  for (; d + 4 <= D; d += 4) simd::store(q16 + d, round_to_half(simd::load_f32x4(q + d)));
  for (; d < D; ++d) q16[d] = round_to_half(q[d]);
}

// Offset of position p, KV head g, in the view's slots [capacity, n_head_kv, D].
inline int64_t kv_offset(const KvView& kv, int g, int p) {
  assert(p >= kv.first_pos && "key evicted from the ring before its last query ran");
  return (static_cast<int64_t>(p % kv.capacity) * kv.n_head_kv + g) * kv.head_dim;
}

// rows [n, D] -> cols [D, n] (n a multiple of 4), four rows × four columns per step
inline void transpose_rows(const float* rows, int n, int D, float* cols) {
  for (int b = 0; b < n; b += 4) {
    const float* r = rows + static_cast<int64_t>(b) * D;
    int d = 0;
    for (; d + 4 <= D; d += 4) {
      simd::F32x4 x0 = simd::load_f32x4(r + d), x1 = simd::load_f32x4(r + D + d),
                  x2 = simd::load_f32x4(r + 2 * D + d), x3 = simd::load_f32x4(r + 3 * D + d);
      simd::transpose(x0, x1, x2, x3);
      float* col = cols + static_cast<int64_t>(d) * n + b;
      simd::store(col, x0);
      simd::store(col + n, x1);
      simd::store(col + 2 * n, x2);
      simd::store(col + 3 * n, x3);
    }
    for (; d < D; ++d) {
      for (int i = 0; i < 4; ++i) cols[static_cast<int64_t>(d) * n + b + i] = r[i * D + d];
    }
  }
}

// Keys pb .. pb+nb-1 of KV head g -> kT [D, kKeyBlock] (missing keys zero). k32 [kKeyBlock, D]
// scratch.
inline void load_keys_transposed(const KvView& kv, int g, int pb, int nb, float* k32, float* kT) {
  const int D = kv.head_dim;
  for (int b = 0; b < kKeyBlock; ++b) {
    float* row = k32 + static_cast<int64_t>(b) * D;
    if (b < nb) {
      halves_to_f32(halves(kv.k) + kv_offset(kv, g, pb + b), row, D);
    } else {
      std::fill(row, row + D, 0.0f);
    }
  }
  transpose_rows(k32, kKeyBlock, D, kT);
}

// Values pb .. pb+nb-1 of KV head g -> v [kKeyBlock, D] f32 and v64, the same in f64 (where
// the value step needs them: not values_fused).
inline void load_values(const KvView& kv, int g, int pb, int nb, float* v, double* v64) {
  const int D = kv.head_dim;
  for (int b = 0; b < nb; ++b) {
    float* row = v + static_cast<int64_t>(b) * D;
    halves_to_f32(halves(kv.v) + kv_offset(kv, g, pb + b), row, D);
    if (!values_fused()) promote(row, v64 + static_cast<int64_t>(b) * D, D);
  }
}

// One of the 16 lanes of the score's f32 sum (attention_score: lanes l, l + 16, l + 32, l + 48,
// which are AVX-512's four accumulators' lane l) for the 8 keys of a block: the sum over the
// first n_in_lanes elements of each accumulator, in order, then the accumulators paired as
// GGML_F32x16_REDUCE pairs them, (acc0 + acc2) + (acc1 + acc3). q [D], kT [D, kKeyBlock] ->
// lane [kKeyBlock]. Products of f16 values are exact in f32, so mul then add is ggml's fma.
inline void score_lane(const float* q, const float* kT, int n_in_lanes, int l, float* lane) {
  static_assert(kKeyBlock == 8, "two f32x4 per accumulator");
  constexpr int kLaneStride = kScoreLanes / 4;
  simd::F32x4 acc[4][2];
  for (auto& a : acc) a[0] = a[1] = simd::splat(0.0f);
  for (int i = l; i < n_in_lanes; i += kScoreLanes) {
    for (int j = 0; j < 4; ++j) {
      const int d = i + j * kLaneStride;
      const simd::F32x4 qd = simd::splat(q[d]);
      const float* k = kT + static_cast<int64_t>(d) * kKeyBlock;
      acc[j][0] = simd::add(acc[j][0], simd::mul(simd::load_f32x4(k), qd));
      acc[j][1] = simd::add(acc[j][1], simd::mul(simd::load_f32x4(k + 4), qd));
    }
  }
  for (int h = 0; h < 2; ++h) {
    simd::store(lane + 4 * h, simd::add(simd::add(acc[0][h], acc[2][h]), simd::add(acc[1][h], acc[3][h])));
  }
}

// q [D] · K block kT [D, kKeyBlock] -> s [kKeyBlock] = attention_score·kq_scale per key: the 16
// lanes of each key side by side, reduced as _mm512_reduce_add_ps halves them (l + 8, + 4, + 2,
// + 1), then the leftover elements added in f64 lanes in order (an f32 product widened is the
// reference's double).
inline void score_block(const float* q, const float* kT, int D, float kq_scale, float* s) {
  constexpr int kLanes = kScoreLanes / 4;
  const int n_in_lanes = D - D % kScoreLanes;
  simd::F64x2 s01 = simd::zero_f64x2(), s23 = s01, s45 = s01, s67 = s01;
  if (n_in_lanes > 0) {
    float lanes[kLanes][kKeyBlock];
    for (int l = 0; l < kLanes; ++l) score_lane(q, kT, n_in_lanes, l, lanes[l]);
    for (int half = kLanes / 2; half >= 1; half /= 2) {
      for (int l = 0; l < half; ++l) {
        for (int h = 0; h < kKeyBlock; h += 4) {
          simd::store(lanes[l] + h, simd::add(simd::load_f32x4(lanes[l] + h), simd::load_f32x4(lanes[l + half] + h)));
        }
      }
    }
    const simd::F32x4 lo = simd::load_f32x4(lanes[0]), hi = simd::load_f32x4(lanes[0] + 4);
    s01 = simd::promote_lo(lo);
    s23 = simd::promote_hi(lo);
    s45 = simd::promote_lo(hi);
    s67 = simd::promote_hi(hi);
  }
  for (int d = n_in_lanes; d < D; ++d) {
    const simd::F64x2 qd = simd::splat_f64(q[d]);
    const float* k = kT + static_cast<int64_t>(d) * kKeyBlock;
    const simd::F32x4 lo = simd::load_f32x4(k), hi = simd::load_f32x4(k + 4);
    s01 = simd::add(s01, simd::mul(simd::promote_lo(lo), qd));
    s23 = simd::add(s23, simd::mul(simd::promote_hi(lo), qd));
    s45 = simd::add(s45, simd::mul(simd::promote_lo(hi), qd));
    s67 = simd::add(s67, simd::mul(simd::promote_hi(hi), qd));
  }
  double sums[kKeyBlock];
  simd::store(sums, s01);
  simd::store(sums + 2, s23);
  simd::store(sums + 4, s45);
  simd::store(sums + 6, s67);
  for (int b = 0; b < kKeyBlock; ++b) s[b] = static_cast<float>(sums[b]) * kq_scale;
}

// The reference's step for a key above the running max: acc [D] <- f16(v + f16(acc·ms)); with
// the key's weight 1, its fma(v, 1, a) is the f32 sum v + a.
inline void rescale_and_add(float* acc, const float* v, float ms, int D) {
  const simd::F32x4 scale = simd::splat(ms);
  int d = 0;
  for (; d + 4 <= D; d += 4) {
    const simd::F32x4 scaled = round_to_half(simd::mul(simd::load_f32x4(acc + d), scale));
    simd::store(acc + d, round_to_half(simd::add(simd::load_f32x4(v + d), scaled)));
  }
  for (; d < D; ++d) acc[d] = round_to_half(v[d] + round_to_half(acc[d] * ms));
}

// The reference's step for any other key: acc [D] <- f16(fma(v, w, acc)), v64 = v in f64.
// v·w is exact in f64 (11 × 24 significant bits), so the f64 sum is the exact result rounded
// once. Rounding that to f32 can differ from the FMA's f32 (when it lands exactly halfway
// between two f32), but never after the rounding to f16: docs/attention.md has the proof, the
// [attention] tests such a case.
// acc [4], v64 [4] -> f32(v64·w + acc) per lane
inline simd::F32x4 weighted_sum(const float* acc, const double* v64, simd::F64x2 w) {
  const simd::F32x4 a = simd::load_f32x4(acc);
  const simd::F64x2 lo = simd::add(simd::mul(simd::load_f64x2(v64), w), simd::promote_lo(a));
  const simd::F64x2 hi = simd::add(simd::mul(simd::load_f64x2(v64 + 2), w), simd::promote_hi(a));
  return simd::demote(lo, hi);
}

#if LF_RELAXED_SIMD
// The constants lf_attn_add_weighted_relaxed and lf_attn_add_weighted_keys_relaxed read, each in
// every lane: simd_wasm.h's rounding to f16 (simd_f16_bits.h)
struct HalfRounding {
  int32_t abs[4], normal_bias[4], normal_limit[4];
  float split[4];
  int32_t sign[4];
  float half[4];
  int32_t normal_min[4], inf[4], overflow_last[4], nan[4];
  int32_t normal_span[4];  // |x| - 2^-14 below this, unsigned: x is in the f16 normal range
};
#define LF_LANES(x) {x, x, x, x}
alignas(16) inline constexpr HalfRounding kHalfRounding = {
    LF_LANES(0x7FFFFFFF), LF_LANES(simd::kNormalBias), LF_LANES(simd::kNormalLimit), LF_LANES(simd::kHalfSplit),
    LF_LANES(static_cast<int32_t>(0x80000000u)), LF_LANES(0.5f), LF_LANES(simd::kHalfNormalMin), LF_LANES(simd::kF32Inf),
    LF_LANES(simd::kHalfOverflow - 1), LF_LANES(simd::kF32QuietNan), LF_LANES(simd::kHalfOverflow - simd::kHalfNormalMin)};
#undef LF_LANES
static_assert(sizeof(HalfRounding) == 176, "the offsets the .wat value steps read");
#endif

inline void add_weighted(float* acc, const float* v, const double* v64, float w, int D) {
  int d = 0;
#if LF_RELAXED_SIMD
  if (values_fused()) {  // the same two roundings, the FMA fused in the instruction
    d = D / 8 * 8;
    if (d > 0) lf_attn_add_weighted_relaxed(acc, v, w, d, &kHalfRounding);
    for (; d < D; ++d) acc[d] = round_to_half(std::fma(v[d], w, acc[d]));
    return;
  }
#endif
  const simd::F64x2 weight = simd::splat_f64(w);
  // Eight at a time: one range check and one branch for two vectors.
  for (; d + 8 <= D; d += 8) {
    const simd::F32x4 x0 = weighted_sum(acc + d, v64 + d, weight);
    const simd::F32x4 x1 = weighted_sum(acc + d + 4, v64 + d + 4, weight);
    if (simd::are_half_normal(x0, x1)) {
      simd::store(acc + d, simd::round_mantissa_to_half(x0));
      simd::store(acc + d + 4, simd::round_mantissa_to_half(x1));
    } else {
      simd::store(acc + d, round_to_half_rare(x0));
      simd::store(acc + d + 4, round_to_half_rare(x1));
    }
  }
  for (; d + 4 <= D; d += 4) simd::store(acc + d, round_to_half(weighted_sum(acc + d, v64 + d, weight)));
  for (; d < D; ++d) acc[d] = round_to_half(std::fma(v[d], w, acc[d]));
}

// Below this a weight is an f32 subnormal, as are its products: x86 takes a microcode assist
// on each (an FMA with one costs ~100 times one without). Such a weight changes no accumulator
// in the f16 normal range, nor the running sum S (at least 1 once a key is seen): |v·w| is
// below 2^-110 for any finite f16 v, while neighbouring f32 values of |acc| >= 2^-14 lie
// 2^-38 or more apart.
constexpr float kSmallestNormal = 0x1p-126f;

// Keys of one dot that each add their weighted value to its accumulator (keys below the
// running max), queued so that a run of them goes through the accumulator in one pass.
struct WeightedKeys {
  const float* v[kKeyBlock];
  const double* v64[kKeyBlock];
  float w[kKeyBlock];
  int n = 0;

  void push(const float* v_row, const double* v64_row, float weight) {
    v[n] = v_row;
    v64[n] = v64_row;
    w[n++] = weight;
  }
};

// acc [D] <- add_weighted of each queued key in order; the queue emptied.
inline void add_weighted_keys(float* acc, WeightedKeys& keys, int D) {
#if LF_RELAXED_SIMD
  if (values_fused() && keys.n > 1 && D >= 16) {
    // The run kernel's fast way takes subnormal weights as 0: its lanes all stay in the f16
    // normal range, where the two give the same bits (kSmallestNormal).
    float flushed[kKeyBlock];
    for (int k = 0; k < keys.n; ++k) flushed[k] = keys.w[k] < kSmallestNormal ? 0.0f : keys.w[k];
    const int d16 = D / 16 * 16;
    lf_attn_add_weighted_keys_relaxed(acc, keys.v, flushed, keys.w, keys.n, d16, &kHalfRounding);
    for (int k = 0; k < keys.n && d16 < D; ++k) add_weighted(acc + d16, keys.v[k] + d16, nullptr, keys.w[k], D - d16);
    keys.n = 0;
    return;
  }
#endif
  for (int k = 0; k < keys.n; ++k) add_weighted(acc, keys.v[k], keys.v64[k], keys.w[k], D);
  keys.n = 0;
}

// One key of a dot's online softmax (the reference's steps 3–4, docs/attention.md): score s,
// value v [D] (v64 the same in f64) -> the dot's f16 accumulator acc [D], running max M and
// running sum S. A key below the running max only joins `queued`, whose keys reach acc before
// anything else does (add_weighted_keys): each element's sequence of operations stays the
// reference's.
inline void softmax_step(float s, const float* v, const double* v64, int D, float* acc, float& M, float& S,
                         WeightedKeys& queued) {
  if (s > M) {
    add_weighted_keys(acc, queued, D);
    const float ms = expf(M - s);
    M = s;
    rescale_and_add(acc, v, ms, D);
    S = S * ms + 1.0f;
  } else {
    const float vs = expf(s - M);
    if (queued.n == kKeyBlock) add_weighted_keys(acc, queued, D);
    queued.push(v, v64, vs);
    if (!(vs < kSmallestNormal)) S += vs;  // S · 1 + vs, the same bits (kSmallestNormal)
  }
}

// acc [D] (the dot's f16 accumulator), S -> out [D] = acc / S (0 where S is 0), as the reference.
inline void store_output(const float* acc, float S, int D, float* out) {
  const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
  int d = 0;
  for (; d + 4 <= D; d += 4) simd::store(out + d, simd::mul(simd::load_f32x4(acc + d), simd::splat(S_inv)));
  for (; d < D; ++d) out[d] = acc[d] * S_inv;
}

// A tile of work: query rows [i0, i1) of the query heads that read KV head g (q [n_q, n_head,
// D]), with the workspace its dot products use; both kernels' tiles build on it.
class TileShape {
 protected:
  TileShape(const float* q, int pos0, int n_head, const KvView& kv, const KeyMask& mask, float kq_scale,
            AttentionWorkspace& ws, int g, int i0, int i1)
      : q_(q), pos0_(pos0), n_head_(n_head), kv_(kv), mask_(mask), kq_scale_(kq_scale), ws_(ws), D_(kv.head_dim),
        group_(n_head / kv.n_head_kv), g_(g), i0_(i0), i1_(i1) {}

  // Offset of query row i, head g·group + hh, in q and out.
  int64_t q_offset(int i, int hh) const { return (static_cast<int64_t>(i) * n_head_ + g_ * group_ + hh) * D_; }
  // Index of that (row, head) among the tile's dot products.
  int dot_index(int i, int hh) const { return (i - i0_) * group_ + hh; }
  // The keys some row of the tile sees lie in [first_key(), last_key()].
  int first_key() const { return mask_.first_key(pos0_ + i0_); }
  int last_key() const { return mask_.last_key(pos0_ + i1_ - 1); }
  bool visible(int p0, int i) const { return key_visible(p0, pos0_ + i, mask_); }
  // Whether query row i sees any of keys pb .. pb+nb-1.
  bool sees_any(int i, int pb, int nb) const {
    for (int b = 0; b < nb; ++b) {
      if (visible(pb + b, i)) return true;
    }
    return false;
  }

  // Every dot's accumulator over its sum into out, once the tile's keys are done.
  void store(float* out) const {
    for (int i = i0_; i < i1_; ++i) {
      for (int hh = 0; hh < group_; ++hh) {
        const int j = dot_index(i, hh);
        store_output(ws_.acc.data() + static_cast<int64_t>(j) * D_, ws_.sum[j], D_, out + q_offset(i, hh));
      }
    }
  }

  const float* q_;
  int pos0_, n_head_;
  const KvView& kv_;
  KeyMask mask_;
  float kq_scale_;
  AttentionWorkspace& ws_;
  int D_, group_, g_, i0_, i1_;
};

}  // namespace lf::attn_steps
