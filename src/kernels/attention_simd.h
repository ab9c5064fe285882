// The vector operations of the attention kernels, behind the feature macros of kernels/simd.h
// (whose f32 vectors they share): WASM SIMD128, SSE2 (every x86-64) and a portable scalar twin.
// Every float operation is a single IEEE operation per lane (never fused), and every check is
// exact, so all three backends give the bytes of the scalar reference (ops/attention.cpp).
// Then the per-key steps built from them, shared by attention_tiled (kernels/attention.cpp) and
// attention_truncated (kernels/attention_truncated.cpp), so that a key the two both visit gets
// the same arithmetic.
#pragma once

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/simd.h"
#include "kernels/attention.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace lf::attn_simd {

// f32 bit patterns bounding the f16 normal range: 2^-14 and 65520 (65504 + half an ulp, which
// rounds to infinity). Inside it, rounding to f16 is rounding the f32 mantissa to 10 bits.
constexpr int32_t kHalfNormalMin = 0x38800000;
constexpr int32_t kHalfOverflow = 0x477FF000;
// |x| - 2^-14 moved to the bottom of the signed range: one signed compare then tests
// 2^-14 <= |x| < 65520 (SSE2 has no unsigned compare).
constexpr int32_t kNormalBias = static_cast<int32_t>(0x80000000u - static_cast<uint32_t>(kHalfNormalMin));
constexpr int32_t kNormalLimit = static_cast<int32_t>(0x80000000u + static_cast<uint32_t>(kHalfOverflow - kHalfNormalMin));
constexpr int32_t kF32Inf = 0x7F800000;
constexpr int32_t kF32QuietNan = 0x7FC00000;  // the f16 NaN 0x7E00 read back as f32

// The f32 vectors are kernels/simd.h's.
using simd::add;
using simd::F32x4;
using simd::mul;
using simd::splat;
using simd::store;
inline F32x4 load(const float* p) { return simd::load_f32x4(p); }

#if LF_SIMD_WASM

struct F64x2 { v128_t v; };

inline F64x2 load(const double* p) { return {wasm_v128_load(p)}; }
inline void store(double* p, F64x2 a) { wasm_v128_store(p, a.v); }
inline F64x2 splat(double f) { return {wasm_f64x2_splat(f)}; }
inline F64x2 zero_f64x2() { return {wasm_f64x2_splat(0.0)}; }
inline F64x2 mul(F64x2 a, F64x2 b) { return {wasm_f64x2_mul(a.v, b.v)}; }
inline F64x2 add(F64x2 a, F64x2 b) { return {wasm_f64x2_add(a.v, b.v)}; }
inline F64x2 promote_lo(F32x4 a) { return {wasm_f64x2_promote_low_f32x4(a.v)}; }
inline F64x2 promote_hi(F32x4 a) { return {wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(a.v, a.v, 2, 3, 2, 3))}; }
inline F32x4 demote(F64x2 lo, F64x2 hi) {
  return {wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(lo.v), wasm_f32x4_demote_f64x2_zero(hi.v), 0, 1, 4, 5)};
}
// Rows r0..r3 -> columns: a 4 × 4 transpose in place
inline void transpose(F32x4& r0, F32x4& r1, F32x4& r2, F32x4& r3) {
  const v128_t t0 = wasm_i32x4_shuffle(r0.v, r1.v, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r0.v, r1.v, 2, 6, 3, 7);
  const v128_t t2 = wasm_i32x4_shuffle(r2.v, r3.v, 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(r2.v, r3.v, 2, 6, 3, 7);
  r0.v = wasm_i32x4_shuffle(t0, t2, 0, 1, 4, 5);
  r1.v = wasm_i32x4_shuffle(t0, t2, 2, 3, 6, 7);
  r2.v = wasm_i32x4_shuffle(t1, t3, 0, 1, 4, 5);
  r3.v = wasm_i32x4_shuffle(t1, t3, 2, 3, 6, 7);
}

// h [8] f16 -> lo, hi [4] f32, exact, subnormals included; false (outputs unset) if any is
// inf or NaN. The bits moved to an f32's places read as the value times 2^-112, restored by
// one multiplication.
inline v128_t widened_halves_to_f32(v128_t h32) {
  const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h32, wasm_i32x4_splat(0x8000)), 16);
  const v128_t magnitude = wasm_i32x4_shl(wasm_v128_and(h32, wasm_i32x4_splat(0x7FFF)), 13);
  return wasm_v128_or(wasm_f32x4_mul(magnitude, wasm_f32x4_splat(0x1p112f)), sign);
}
inline bool try_halves_to_f32(const uint16_t* h, F32x4* lo, F32x4* hi) {
  const v128_t x = wasm_v128_load(h);
  const v128_t exponent = wasm_v128_and(x, wasm_i16x8_splat(0x7C00));
  if (wasm_v128_any_true(wasm_i16x8_eq(exponent, wasm_i16x8_splat(0x7C00)))) return false;
  lo->v = widened_halves_to_f32(wasm_u32x4_extend_low_u16x8(x));
  hi->v = widened_halves_to_f32(wasm_u32x4_extend_high_u16x8(x));
  return true;
}

// x [4] -> the nearest f16 of each (ties to even), held as f32: the mantissa's low 13 bits
// rounded off; exact only where every lane is in f16's normal range (is_half_normal).
inline F32x4 round_mantissa_to_half(F32x4 x) {
  const v128_t odd = wasm_v128_and(wasm_u32x4_shr(x.v, 13), wasm_i32x4_splat(1));
  const v128_t up = wasm_i32x4_add(wasm_i32x4_add(x.v, wasm_i32x4_splat(0xFFF)), odd);
  return {wasm_v128_and(up, wasm_i32x4_splat(static_cast<int32_t>(0xFFFFE000u)))};
}
inline v128_t half_normal_lanes(F32x4 x) {
  const v128_t biased = wasm_i32x4_add(wasm_v128_and(x.v, wasm_i32x4_splat(0x7FFFFFFF)), wasm_i32x4_splat(kNormalBias));
  return wasm_i32x4_lt(biased, wasm_i32x4_splat(kNormalLimit));
}
inline bool is_half_normal(F32x4 x) { return wasm_i32x4_all_true(half_normal_lanes(x)); }
inline bool are_half_normal(F32x4 x, F32x4 y) {
  return wasm_i32x4_all_true(wasm_v128_and(half_normal_lanes(x), half_normal_lanes(y)));
}
// The same for any x: f16 subnormals are multiples of 2^-24, which adding and removing 0.5
// rounds to (ties to even); beyond 65520 infinity; NaN the f16 NaN's f32 (sign kept).
inline F32x4 round_to_half_any(F32x4 x) {
  const v128_t sign = wasm_v128_and(x.v, wasm_i32x4_splat(static_cast<int32_t>(0x80000000u)));
  const v128_t a = wasm_v128_and(x.v, wasm_i32x4_splat(0x7FFFFFFF));
  const v128_t sub = wasm_f32x4_sub(wasm_f32x4_add(a, wasm_f32x4_splat(0.5f)), wasm_f32x4_splat(0.5f));
  v128_t r = round_mantissa_to_half(x).v;
  r = wasm_v128_bitselect(wasm_v128_or(sub, sign), r, wasm_i32x4_lt(a, wasm_i32x4_splat(kHalfNormalMin)));
  r = wasm_v128_bitselect(wasm_v128_or(sign, wasm_i32x4_splat(kF32Inf)), r, wasm_i32x4_gt(a, wasm_i32x4_splat(kHalfOverflow - 1)));
  return {wasm_v128_bitselect(wasm_v128_or(sign, wasm_i32x4_splat(kF32QuietNan)), r, wasm_i32x4_gt(a, wasm_i32x4_splat(kF32Inf)))};
}

#elif LF_SIMD_SSE2

struct F64x2 { __m128d v; };

inline F64x2 load(const double* p) { return {_mm_loadu_pd(p)}; }
inline void store(double* p, F64x2 a) { _mm_storeu_pd(p, a.v); }
inline F64x2 splat(double f) { return {_mm_set1_pd(f)}; }
inline F64x2 zero_f64x2() { return {_mm_setzero_pd()}; }
inline F64x2 mul(F64x2 a, F64x2 b) { return {_mm_mul_pd(a.v, b.v)}; }
inline F64x2 add(F64x2 a, F64x2 b) { return {_mm_add_pd(a.v, b.v)}; }
inline F64x2 promote_lo(F32x4 a) { return {_mm_cvtps_pd(a.v)}; }
inline F64x2 promote_hi(F32x4 a) { return {_mm_cvtps_pd(_mm_movehl_ps(a.v, a.v))}; }
// cvtpd_ps rounds by MXCSR, which nothing in this library changes from round-to-nearest-even.
inline F32x4 demote(F64x2 lo, F64x2 hi) { return {_mm_movelh_ps(_mm_cvtpd_ps(lo.v), _mm_cvtpd_ps(hi.v))}; }
inline void transpose(F32x4& r0, F32x4& r1, F32x4& r2, F32x4& r3) { _MM_TRANSPOSE4_PS(r0.v, r1.v, r2.v, r3.v); }

// A half moved to the top of a 32-bit lane holds the f32 sign in place; its other 15 bits,
// moved down 3, sit in an f32's exponent and mantissa places.
inline __m128 widened_halves_to_f32(__m128i h_high) {
  const __m128i sign = _mm_and_si128(h_high, _mm_set1_epi32(static_cast<int32_t>(0x80000000u)));
  const __m128i magnitude = _mm_and_si128(_mm_srli_epi32(h_high, 3), _mm_set1_epi32(0x0FFFE000));
  return _mm_or_ps(_mm_mul_ps(_mm_castsi128_ps(magnitude), _mm_set1_ps(0x1p112f)), _mm_castsi128_ps(sign));
}
inline bool try_halves_to_f32(const uint16_t* h, F32x4* lo, F32x4* hi) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h));
  const __m128i exponent = _mm_and_si128(x, _mm_set1_epi16(0x7C00));
  if (_mm_movemask_epi8(_mm_cmpeq_epi16(exponent, _mm_set1_epi16(0x7C00))) != 0) return false;
  lo->v = widened_halves_to_f32(_mm_unpacklo_epi16(_mm_setzero_si128(), x));
  hi->v = widened_halves_to_f32(_mm_unpackhi_epi16(_mm_setzero_si128(), x));
  return true;
}

inline F32x4 round_mantissa_to_half(F32x4 x) {
  const __m128i u = _mm_castps_si128(x.v);
  const __m128i odd = _mm_and_si128(_mm_srli_epi32(u, 13), _mm_set1_epi32(1));
  const __m128i up = _mm_add_epi32(_mm_add_epi32(u, _mm_set1_epi32(0xFFF)), odd);
  return {_mm_castsi128_ps(_mm_and_si128(up, _mm_set1_epi32(static_cast<int32_t>(0xFFFFE000u))))};
}
inline __m128i half_normal_lanes(F32x4 x) {
  const __m128i a = _mm_and_si128(_mm_castps_si128(x.v), _mm_set1_epi32(0x7FFFFFFF));
  return _mm_cmplt_epi32(_mm_add_epi32(a, _mm_set1_epi32(kNormalBias)), _mm_set1_epi32(kNormalLimit));
}
inline bool is_half_normal(F32x4 x) { return _mm_movemask_epi8(half_normal_lanes(x)) == 0xFFFF; }
inline bool are_half_normal(F32x4 x, F32x4 y) {
  return _mm_movemask_epi8(_mm_and_si128(half_normal_lanes(x), half_normal_lanes(y))) == 0xFFFF;
}
inline __m128i select(__m128i mask, __m128i yes, __m128i no) {
  return _mm_or_si128(_mm_and_si128(mask, yes), _mm_andnot_si128(mask, no));
}
inline F32x4 round_to_half_any(F32x4 x) {
  const __m128i u = _mm_castps_si128(x.v);
  const __m128i sign = _mm_and_si128(u, _mm_set1_epi32(static_cast<int32_t>(0x80000000u)));
  const __m128i a = _mm_and_si128(u, _mm_set1_epi32(0x7FFFFFFF));
  const __m128 sub = _mm_sub_ps(_mm_add_ps(_mm_castsi128_ps(a), _mm_set1_ps(0.5f)), _mm_set1_ps(0.5f));
  __m128i r = _mm_castps_si128(round_mantissa_to_half(x).v);
  r = select(_mm_cmplt_epi32(a, _mm_set1_epi32(kHalfNormalMin)), _mm_or_si128(_mm_castps_si128(sub), sign), r);
  r = select(_mm_cmpgt_epi32(a, _mm_set1_epi32(kHalfOverflow - 1)), _mm_or_si128(sign, _mm_set1_epi32(kF32Inf)), r);
  r = select(_mm_cmpgt_epi32(a, _mm_set1_epi32(kF32Inf)), _mm_or_si128(sign, _mm_set1_epi32(kF32QuietNan)), r);
  return {_mm_castsi128_ps(r)};
}

#else

struct F64x2 { double v[2]; };

inline F64x2 load(const double* p) { return {{p[0], p[1]}}; }
inline void store(double* p, F64x2 a) { std::memcpy(p, a.v, sizeof a.v); }
inline F64x2 splat(double f) { return {{f, f}}; }
inline F64x2 zero_f64x2() { return {{0.0, 0.0}}; }
inline F64x2 mul(F64x2 a, F64x2 b) { return {{a.v[0] * b.v[0], a.v[1] * b.v[1]}}; }
inline F64x2 add(F64x2 a, F64x2 b) { return {{a.v[0] + b.v[0], a.v[1] + b.v[1]}}; }
inline F64x2 promote_lo(F32x4 a) { return {{a.v[0], a.v[1]}}; }
inline F64x2 promote_hi(F32x4 a) { return {{a.v[2], a.v[3]}}; }
inline F32x4 demote(F64x2 lo, F64x2 hi) {
  return {{static_cast<float>(lo.v[0]), static_cast<float>(lo.v[1]), static_cast<float>(hi.v[0]),
           static_cast<float>(hi.v[1])}};
}
inline void transpose(F32x4& r0, F32x4& r1, F32x4& r2, F32x4& r3) {
  F32x4* r[4] = {&r0, &r1, &r2, &r3};
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) std::swap(r[i]->v[j], r[j]->v[i]);
  }
}

inline bool try_halves_to_f32(const uint16_t* h, F32x4* lo, F32x4* hi) {
  for (int i = 0; i < 8; ++i) {
    if ((h[i] & 0x7C00) == 0x7C00) return false;
  }
  for (int i = 0; i < 8; ++i) {
    const uint32_t magnitude_bits = static_cast<uint32_t>(h[i] & 0x7FFF) << 13;
    float magnitude;
    std::memcpy(&magnitude, &magnitude_bits, sizeof magnitude);
    magnitude *= 0x1p112f;
    uint32_t bits;
    std::memcpy(&bits, &magnitude, sizeof bits);
    bits |= static_cast<uint32_t>(h[i] & 0x8000) << 16;
    std::memcpy(i < 4 ? &lo->v[i] : &hi->v[i - 4], &bits, sizeof bits);
  }
  return true;
}

inline uint32_t round_mantissa_to_half(uint32_t u) { return (u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u; }
inline F32x4 round_mantissa_to_half(F32x4 x) {
  uint32_t u[4];
  std::memcpy(u, x.v, sizeof u);
  for (uint32_t& l : u) l = round_mantissa_to_half(l);
  std::memcpy(x.v, u, sizeof u);
  return x;
}
inline bool is_half_normal(F32x4 x) {
  uint32_t u[4];
  std::memcpy(u, x.v, sizeof u);
  for (uint32_t l : u) {
    const uint32_t a = l & 0x7FFFFFFFu;
    if (a < static_cast<uint32_t>(kHalfNormalMin) || a >= static_cast<uint32_t>(kHalfOverflow)) return false;
  }
  return true;
}
inline bool are_half_normal(F32x4 x, F32x4 y) { return is_half_normal(x) && is_half_normal(y); }
inline F32x4 round_to_half_any(F32x4 x) {
  uint32_t u[4];
  std::memcpy(u, x.v, sizeof u);
  for (uint32_t& l : u) {
    const uint32_t sign = l & 0x80000000u, a = l & 0x7FFFFFFFu;
    if (a > static_cast<uint32_t>(kF32Inf)) {
      l = sign | static_cast<uint32_t>(kF32QuietNan);
    } else if (a >= static_cast<uint32_t>(kHalfOverflow)) {
      l = sign | static_cast<uint32_t>(kF32Inf);
    } else if (a < static_cast<uint32_t>(kHalfNormalMin)) {
      float magnitude;
      std::memcpy(&magnitude, &a, sizeof magnitude);
      magnitude = (magnitude + 0.5f) - 0.5f;
      std::memcpy(&l, &magnitude, sizeof l);
      l |= sign;
    } else {
      l = round_mantissa_to_half(l);
    }
  }
  std::memcpy(x.v, u, sizeof u);
  return x;
}

#endif

}  // namespace lf::attn_simd

// --- The per-key steps: lf::attention's arithmetic, operation for operation ---
namespace lf::attn_steps {

namespace vec = attn_simd;

// (query row, query head) pairs per tile: the K/V conversion of a key is shared by all of
// them, and [16, 512] f32 accumulators still sit in L2.
constexpr int kTileDots = 16;
// Keys scored together: the vector lanes run over keys, never over the head dim, so that each
// key's score keeps the reference's order of additions (attention_score, ops/attention.cpp).
constexpr int kKeyBlock = 8;

inline float round_to_half(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

// Lanes outside the f16 normal range: rare (mostly accumulators scaled towards 0 when the max
// jumps), so kept out of line.
[[gnu::noinline]] inline vec::F32x4 round_to_half_rare(vec::F32x4 x) { return vec::round_to_half_any(x); }

// The common case, every lane an f16 normal, costs a few integer operations inline.
inline vec::F32x4 round_to_half(vec::F32x4 x) {
  return vec::is_half_normal(x) ? vec::round_mantissa_to_half(x) : round_to_half_rare(x);
}

// h [n] f16 -> f [n] f32
inline void halves_to_f32(const uint16_t* h, float* f, int n) {
  int d = 0;
  for (; d + 8 <= n; d += 8) {
    vec::F32x4 lo, hi;
    if (vec::try_halves_to_f32(h + d, &lo, &hi)) {
      vec::store(f + d, lo);
      vec::store(f + d + 4, hi);
    } else {
      for (int i = d; i < d + 8; ++i) f[i] = fp16_to_fp32(h[i]);
    }
  }
  for (; d < n; ++d) f[d] = fp16_to_fp32(h[d]);
}

// f [n] -> f64 [n]
inline void promote(const float* f, double* out, int n) {
  int d = 0;
  for (; d + 4 <= n; d += 4) {
    const vec::F32x4 x = vec::load(f + d);
    vec::store(out + d, vec::promote_lo(x));
    vec::store(out + d + 2, vec::promote_hi(x));
  }
  for (; d < n; ++d) out[d] = f[d];
}

// q [D] f32 -> q16 [D]: rounded to f16 as the reference rounds the query, held as f32.
inline void load_query(const float* q, int D, float* q16) {
  int d = 0;
  for (; d + 4 <= D; d += 4) vec::store(q16 + d, round_to_half(vec::load(q + d)));
  for (; d < D; ++d) q16[d] = round_to_half(q[d]);
}

// Offset of position p, KV head g, in the view's slots [capacity, n_head_kv, D].
inline int64_t kv_offset(const KvView& kv, int g, int p) {
  assert(p >= kv.first_pos && "key evicted from the ring before its last query ran");
  return (static_cast<int64_t>(p % kv.capacity) * kv.n_head_kv + g) * kv.head_dim;
}

// Keys pb .. pb+nb-1 of KV head g -> kT [D, kKeyBlock] (missing keys zero), four keys × four
// dims per step. k32 [kKeyBlock, D] scratch.
inline void load_keys_transposed(const KvView& kv, int g, int pb, int nb, float* k32, float* kT) {
  const int D = kv.head_dim;
  for (int b = 0; b < kKeyBlock; ++b) {
    float* row = k32 + static_cast<int64_t>(b) * D;
    if (b < nb) {
      halves_to_f32(kv.k + kv_offset(kv, g, pb + b), row, D);
    } else {
      std::fill(row, row + D, 0.0f);
    }
  }
  for (int b = 0; b < kKeyBlock; b += 4) {
    const float* r = k32 + static_cast<int64_t>(b) * D;
    int d = 0;
    for (; d + 4 <= D; d += 4) {
      vec::F32x4 x0 = vec::load(r + d), x1 = vec::load(r + D + d), x2 = vec::load(r + 2 * D + d),
                 x3 = vec::load(r + 3 * D + d);
      vec::transpose(x0, x1, x2, x3);
      float* col = kT + static_cast<int64_t>(d) * kKeyBlock + b;
      vec::store(col, x0);
      vec::store(col + kKeyBlock, x1);
      vec::store(col + 2 * kKeyBlock, x2);
      vec::store(col + 3 * kKeyBlock, x3);
    }
    for (; d < D; ++d) {
      for (int i = 0; i < 4; ++i) kT[static_cast<int64_t>(d) * kKeyBlock + b + i] = r[i * D + d];
    }
  }
}

// Values pb .. pb+nb-1 of KV head g -> v [kKeyBlock, D] f32 and v64, the same in f64.
inline void load_values(const KvView& kv, int g, int pb, int nb, float* v, double* v64) {
  const int D = kv.head_dim;
  for (int b = 0; b < nb; ++b) {
    float* row = v + static_cast<int64_t>(b) * D;
    halves_to_f32(kv.v + kv_offset(kv, g, pb + b), row, D);
    promote(row, v64 + static_cast<int64_t>(b) * D, D);
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
  vec::F32x4 acc[4][2];
  for (auto& a : acc) a[0] = a[1] = vec::splat(0.0f);
  for (int i = l; i < n_in_lanes; i += kScoreLanes) {
    for (int j = 0; j < 4; ++j) {
      const int d = i + j * kLaneStride;
      const vec::F32x4 qd = vec::splat(q[d]);
      const float* k = kT + static_cast<int64_t>(d) * kKeyBlock;
      acc[j][0] = vec::add(acc[j][0], vec::mul(vec::load(k), qd));
      acc[j][1] = vec::add(acc[j][1], vec::mul(vec::load(k + 4), qd));
    }
  }
  for (int h = 0; h < 2; ++h) {
    vec::store(lane + 4 * h, vec::add(vec::add(acc[0][h], acc[2][h]), vec::add(acc[1][h], acc[3][h])));
  }
}

// q [D] · K block kT [D, kKeyBlock] -> s [kKeyBlock] = attention_score·kq_scale per key: the 16
// lanes of each key side by side, reduced as _mm512_reduce_add_ps halves them (l + 8, + 4, + 2,
// + 1), then the leftover elements added in f64 lanes in order (an f32 product widened is the
// reference's double).
inline void score_block(const float* q, const float* kT, int D, float kq_scale, float* s) {
  constexpr int kLanes = kScoreLanes / 4;
  const int n_in_lanes = D - D % kScoreLanes;
  vec::F64x2 s01 = vec::zero_f64x2(), s23 = s01, s45 = s01, s67 = s01;
  if (n_in_lanes > 0) {
    float lanes[kLanes][kKeyBlock];
    for (int l = 0; l < kLanes; ++l) score_lane(q, kT, n_in_lanes, l, lanes[l]);
    for (int half = kLanes / 2; half >= 1; half /= 2) {
      for (int l = 0; l < half; ++l) {
        for (int h = 0; h < kKeyBlock; h += 4) {
          vec::store(lanes[l] + h, vec::add(vec::load(lanes[l] + h), vec::load(lanes[l + half] + h)));
        }
      }
    }
    const vec::F32x4 lo = vec::load(lanes[0]), hi = vec::load(lanes[0] + 4);
    s01 = vec::promote_lo(lo);
    s23 = vec::promote_hi(lo);
    s45 = vec::promote_lo(hi);
    s67 = vec::promote_hi(hi);
  }
  for (int d = n_in_lanes; d < D; ++d) {
    const vec::F64x2 qd = vec::splat(static_cast<double>(q[d]));
    const float* k = kT + static_cast<int64_t>(d) * kKeyBlock;
    const vec::F32x4 lo = vec::load(k), hi = vec::load(k + 4);
    s01 = vec::add(s01, vec::mul(vec::promote_lo(lo), qd));
    s23 = vec::add(s23, vec::mul(vec::promote_hi(lo), qd));
    s45 = vec::add(s45, vec::mul(vec::promote_lo(hi), qd));
    s67 = vec::add(s67, vec::mul(vec::promote_hi(hi), qd));
  }
  double sums[kKeyBlock];
  vec::store(sums, s01);
  vec::store(sums + 2, s23);
  vec::store(sums + 4, s45);
  vec::store(sums + 6, s67);
  for (int b = 0; b < kKeyBlock; ++b) s[b] = static_cast<float>(sums[b]) * kq_scale;
}

// The reference's step for a key above the running max: acc [D] <- f16(v + f16(acc·ms)); with
// the key's weight 1, its fma(v, 1, a) is the f32 sum v + a.
inline void rescale_and_add(float* acc, const float* v, float ms, int D) {
  const vec::F32x4 scale = vec::splat(ms);
  int d = 0;
  for (; d + 4 <= D; d += 4) {
    const vec::F32x4 scaled = round_to_half(vec::mul(vec::load(acc + d), scale));
    vec::store(acc + d, round_to_half(vec::add(vec::load(v + d), scaled)));
  }
  for (; d < D; ++d) acc[d] = round_to_half(v[d] + round_to_half(acc[d] * ms));
}

// The reference's step for any other key: acc [D] <- f16(fma(v, w, acc)), v64 = v in f64.
// v·w is exact in f64 (11 × 24 significant bits), so the f64 sum is the exact result rounded
// once. Rounding that to f32 can differ from the FMA's f32 (when it lands exactly halfway
// between two f32), but never after the rounding to f16: docs/attention.md has the proof, the
// [attention] tests such a case.
// acc [4], v64 [4] -> f32(v64·w + acc) per lane
inline vec::F32x4 weighted_sum(const float* acc, const double* v64, vec::F64x2 w) {
  const vec::F32x4 a = vec::load(acc);
  const vec::F64x2 lo = vec::add(vec::mul(vec::load(v64), w), vec::promote_lo(a));
  const vec::F64x2 hi = vec::add(vec::mul(vec::load(v64 + 2), w), vec::promote_hi(a));
  return vec::demote(lo, hi);
}

inline void add_weighted(float* acc, const float* v, const double* v64, float w, int D) {
  const vec::F64x2 weight = vec::splat(static_cast<double>(w));
  int d = 0;
  // Eight at a time: one range check and one branch for two vectors.
  for (; d + 8 <= D; d += 8) {
    const vec::F32x4 x0 = weighted_sum(acc + d, v64 + d, weight);
    const vec::F32x4 x1 = weighted_sum(acc + d + 4, v64 + d + 4, weight);
    if (vec::are_half_normal(x0, x1)) {
      vec::store(acc + d, vec::round_mantissa_to_half(x0));
      vec::store(acc + d + 4, vec::round_mantissa_to_half(x1));
    } else {
      vec::store(acc + d, round_to_half_rare(x0));
      vec::store(acc + d + 4, round_to_half_rare(x1));
    }
  }
  for (; d + 4 <= D; d += 4) vec::store(acc + d, round_to_half(weighted_sum(acc + d, v64 + d, weight)));
  for (; d < D; ++d) acc[d] = round_to_half(std::fma(v[d], w, acc[d]));
}

// One key of a dot's online softmax (the reference's steps 3–4, docs/attention.md): score s,
// value v [D] (v64 the same in f64) -> the dot's f16 accumulator acc [D], running max M and
// running sum S.
inline void softmax_step(float s, const float* v, const double* v64, int D, float* acc, float& M, float& S) {
  const float M_old = M;
  float ms = 1.0f;
  float vs = 1.0f;
  if (s > M) {
    M = s;
    ms = expf(M_old - M);
    rescale_and_add(acc, v, ms, D);
  } else {
    vs = expf(s - M);
    add_weighted(acc, v, v64, vs, D);
  }
  S = S * ms + vs;
}

// acc [D] (the dot's f16 accumulator), S -> out [D] = acc / S (0 where S is 0), as the reference.
inline void store_output(const float* acc, float S, int D, float* out) {
  const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
  int d = 0;
  for (; d + 4 <= D; d += 4) vec::store(out + d, vec::mul(vec::load(acc + d), vec::splat(S_inv)));
  for (; d < D; ++d) out[d] = acc[d] * S_inv;
}

// A tile of work: query rows [i0, i1) of the query heads that read KV head g (q [n_q, n_head,
// D]), with the workspace its dot products use; both kernels' tiles build on it.
class TileShape {
 protected:
  TileShape(const float* q, int pos0, int n_head, const KvView& kv, int n_swa, float kq_scale, AttentionWorkspace& ws,
            int g, int i0, int i1)
      : q_(q), pos0_(pos0), n_head_(n_head), kv_(kv), n_swa_(n_swa), kq_scale_(kq_scale), ws_(ws), D_(kv.head_dim),
        group_(n_head / kv.n_head_kv), g_(g), i0_(i0), i1_(i1) {}

  // Offset of query row i, head g·group + hh, in q and out.
  int64_t q_offset(int i, int hh) const { return (static_cast<int64_t>(i) * n_head_ + g_ * group_ + hh) * D_; }
  // Index of that (row, head) among the tile's dot products.
  int dot_index(int i, int hh) const { return (i - i0_) * group_ + hh; }

  const float* q_;
  int pos0_, n_head_;
  const KvView& kv_;
  int n_swa_;
  float kq_scale_;
  AttentionWorkspace& ws_;
  int D_, group_, g_, i0_, i1_;
};

}  // namespace lf::attn_steps
