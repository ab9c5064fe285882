// The kernels' vector operations in SSE2, on every x86-64 (kernels/simd.h says the contract).
// Included by kernels/simd.h only.
#pragma once

#include <cstdint>
#include <cstring>

#include <emmintrin.h>

#include "kernels/simd_f16_bits.h"
#include "quant/quant.h"

namespace lf::simd {

inline constexpr const char* kIsa = "sse2";
struct I8x16 { __m128i v; };
struct I16x8 { __m128i v; };
struct I32x4 { __m128i v; };
struct F32x4 { __m128 v; };
struct F64x2 { __m128d v; };

inline I8x16 load_i8x16(const void* p) { return {_mm_loadu_si128(static_cast<const __m128i*>(p))}; }
// Each byte paired with itself, then an arithmetic shift keeps the sign-extended copy.
inline I16x8 widen_lo(I8x16 a) { return {_mm_srai_epi16(_mm_unpacklo_epi8(a.v, a.v), 8)}; }
inline I16x8 widen_hi(I8x16 a) { return {_mm_srai_epi16(_mm_unpackhi_epi8(a.v, a.v), 8)}; }
inline I8x16 low_nibbles_minus_8(I8x16 p) {
  return {_mm_sub_epi8(_mm_and_si128(p.v, _mm_set1_epi8(0x0F)), _mm_set1_epi8(8))};
}
// SSE2 has no 8-bit shift: shift 16-bit lanes and mask off the neighbour's bits.
inline I8x16 high_nibbles_minus_8(I8x16 p) {
  return {_mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(p.v, 4), _mm_set1_epi8(0x0F)), _mm_set1_epi8(8))};
}
inline I32x4 dot_pairs(I16x8 a, I16x8 b) { return {_mm_madd_epi16(a.v, b.v)}; }
inline I32x4 add(I32x4 a, I32x4 b) { return {_mm_add_epi32(a.v, b.v)}; }
inline I16x8 mul(I16x8 a, I16x8 b) { return {_mm_mullo_epi16(a.v, b.v)}; }
inline I16x8 add(I16x8 a, I16x8 b) { return {_mm_add_epi16(a.v, b.v)}; }
inline I16x8 splat_i16(int16_t s) { return {_mm_set1_epi16(s)}; }
// Each lane paired with a zero, so the pairwise multiply-add by the splat s is a plain product.
inline I32x4 mul_widen_lo(I16x8 a, I16x8 s) { return {_mm_madd_epi16(_mm_unpacklo_epi16(a.v, _mm_setzero_si128()), s.v)}; }
inline I32x4 mul_widen_hi(I16x8 a, I16x8 s) { return {_mm_madd_epi16(_mm_unpackhi_epi16(a.v, _mm_setzero_si128()), s.v)}; }
inline I32x4 sum_each(I32x4 a, I32x4 b, I32x4 c, I32x4 d) {
  const __m128i ab = _mm_add_epi32(_mm_unpacklo_epi32(a.v, b.v), _mm_unpackhi_epi32(a.v, b.v));
  const __m128i cd = _mm_add_epi32(_mm_unpacklo_epi32(c.v, d.v), _mm_unpackhi_epi32(c.v, d.v));
  return {_mm_add_epi32(_mm_unpacklo_epi64(ab, cd), _mm_unpackhi_epi64(ab, cd))};
}
// -> [a0 + a1, a2 + a3, b0 + b1, b2 + b3]
inline I32x4 add_pairs(I32x4 a, I32x4 b) {
  const __m128 af = _mm_castsi128_ps(a.v), bf = _mm_castsi128_ps(b.v);
  return {_mm_add_epi32(_mm_castps_si128(_mm_shuffle_ps(af, bf, _MM_SHUFFLE(2, 0, 2, 0))),
                        _mm_castps_si128(_mm_shuffle_ps(af, bf, _MM_SHUFFLE(3, 1, 3, 1))))};
}
inline I32x4 make_i32(int32_t a, int32_t b, int32_t c, int32_t d) { return {_mm_setr_epi32(a, b, c, d)}; }
inline I32x4 load_i32x4(const int32_t* p) { return {_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))}; }
inline void store_i32(int32_t* p, I32x4 a) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), a.v); }
inline F32x4 finite_halves_to_f32(I32x4 h) {
  const __m128i bits = _mm_slli_epi32(_mm_and_si128(h.v, _mm_set1_epi32(0x7FFF)), 13);
  const __m128i normal = _mm_add_epi32(bits, _mm_set1_epi32(112 << 23));
  const __m128 subnormal =
      _mm_sub_ps(_mm_castsi128_ps(_mm_add_epi32(bits, _mm_set1_epi32(113 << 23))), _mm_set1_ps(0x1p-14f));
  const __m128i is_subnormal = _mm_cmplt_epi32(bits, _mm_set1_epi32(1 << 23));
  const __m128i sign = _mm_slli_epi32(_mm_and_si128(h.v, _mm_set1_epi32(0x8000)), 16);
  const __m128i value = _mm_or_si128(_mm_and_si128(is_subnormal, _mm_castps_si128(subnormal)),
                                     _mm_andnot_si128(is_subnormal, normal));
  return {_mm_castsi128_ps(_mm_or_si128(value, sign))};
}
inline F32x4 to_f32(I32x4 a) { return {_mm_cvtepi32_ps(a.v)}; }
inline F32x4 splat(float f) { return {_mm_set1_ps(f)}; }
inline F32x4 make(float a, float b, float c, float d) { return {_mm_setr_ps(a, b, c, d)}; }
inline F32x4 mul(F32x4 a, F32x4 b) { return {_mm_mul_ps(a.v, b.v)}; }
inline F32x4 add(F32x4 a, F32x4 b) { return {_mm_add_ps(a.v, b.v)}; }
inline F32x4 keep_greater(F32x4 a, F32x4 b) { return {_mm_max_ps(a.v, b.v)}; }
inline F32x4 keep_less(F32x4 a, F32x4 b) { return {_mm_min_ps(a.v, b.v)}; }
inline bool any_nan(F32x4 x) { return _mm_movemask_ps(_mm_cmpunord_ps(x.v, x.v)) != 0; }
inline F32x4 load_f32x4(const float* p) { return {_mm_loadu_ps(p)}; }
inline void store(float* p, F32x4 a) { _mm_storeu_ps(p, a.v); }

// fused_madd's rare way
inline F32x4 fused_madd_lanes(F32x4 a, F32x4 b, F32x4 acc) {
  alignas(16) float av[4], bv[4], c[4];
  _mm_store_ps(av, a.v);
  _mm_store_ps(bv, b.v);
  _mm_store_ps(c, acc.v);
  for (int i = 0; i < 4; ++i) c[i] = fma_f32(av[i], bv[i], c[i]);
  return {_mm_load_ps(c)};
}

// lo, hi: lanes 0-1 and 2-3 of a·b + acc in double, the product exact and the sum rounded once
// -> *out, those sums rounded to f32 as fma_f32 (quant.h) rounds them; false where that second
// rounding may not be the correct one: where the double sum's low 28 bits are all clear (a
// halfway point it may have been rounded to, or a sum that f32 holds exactly, as acc + 0·b:
// rare), checked on the low 32-bit word of each double. cvtpd2ps rounds by MXCSR, which nothing
// in this library changes from round-to-nearest-even.
inline bool demote_rounded_once(__m128d lo, __m128d hi, F32x4* out) {
  const __m128 low_words = _mm_shuffle_ps(_mm_castpd_ps(lo), _mm_castpd_ps(hi), _MM_SHUFFLE(2, 0, 2, 0));
  const __m128i low_28 = _mm_and_si128(_mm_castps_si128(low_words), _mm_set1_epi32(0x0FFFFFFF));
  if (_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(low_28, _mm_setzero_si128()))) != 0) return false;
  out->v = _mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi));
  return true;
}

// a·b + acc on each lane as fma_f32 computes it, rounded once: in double, where a·b (24 + 24
// significant bits) is exact and the sum rounds once, then to f32 (demote_rounded_once), the
// lanes of a flagged vector through fma_f32 itself.
inline F32x4 fused_madd(F32x4 a, F32x4 b, F32x4 acc) {
  const auto high = [](__m128 x) { return _mm_cvtps_pd(_mm_movehl_ps(x, x)); };
  const __m128d lo = _mm_add_pd(_mm_mul_pd(_mm_cvtps_pd(a.v), _mm_cvtps_pd(b.v)), _mm_cvtps_pd(acc.v));
  const __m128d hi = _mm_add_pd(_mm_mul_pd(high(a.v), high(b.v)), high(acc.v));
  F32x4 r;
  if (__builtin_expect(demote_rounded_once(lo, hi, &r), 1)) return r;
  return fused_madd_lanes(a, b, acc);
}

// sumi·d + acc as fused_madd of sumi's f32 (|sumi| < 2^24, so that is exact), sumi widened to
// double directly.
inline F32x4 fused_madd(I32x4 sumi, F32x4 d, F32x4 acc) {
  const __m128d lo = _mm_add_pd(_mm_mul_pd(_mm_cvtepi32_pd(sumi.v), _mm_cvtps_pd(d.v)), _mm_cvtps_pd(acc.v));
  const __m128d hi = _mm_add_pd(_mm_mul_pd(_mm_cvtepi32_pd(_mm_shuffle_epi32(sumi.v, _MM_SHUFFLE(3, 2, 3, 2))),
                                           _mm_cvtps_pd(_mm_movehl_ps(d.v, d.v))),
                                _mm_cvtps_pd(_mm_movehl_ps(acc.v, acc.v)));
  F32x4 r;
  if (__builtin_expect(demote_rounded_once(lo, hi, &r), 1)) return r;
  return fused_madd_lanes(to_f32(sumi), d, acc);
}

// For the feature-major kernel (kernels/gemm_feature_major.cpp): int16 lanes from
// memory, sign-extended to int32, and int32 negation.
inline I16x8 load_i16x8(const void* p) { return {_mm_loadu_si128(static_cast<const __m128i*>(p))}; }
inline I32x4 widen_lo(I16x8 a) { return {_mm_srai_epi32(_mm_unpacklo_epi16(a.v, a.v), 16)}; }
inline I32x4 widen_hi(I16x8 a) { return {_mm_srai_epi32(_mm_unpackhi_epi16(a.v, a.v), 16)}; }
inline I32x4 neg(I32x4 a) { return {_mm_sub_epi32(_mm_setzero_si128(), a.v)}; }

// For the GEMV (decode) path of kernels/gemm_q4_0_q8_0.cpp: blocks split into their even
// and odd elements as int16 by shifts and masks inside 16-bit lanes (no byte widening), and the
// f16 scales of 4 rows gathered and converted for every f16 value, infinities and NaNs included.
//   nibbles_even_odd: packed Q4_0 quants [16] -> unsigned q [4][8] of elements 0,2..14 | 1,3..15
//                     | 16,18..30 | 17,19..31 (low nibbles are elements 0-15, high ones 16-31)
//   bytes_even_odd:   int8 [16] -> int16 elements 0,2..14 and 1,3..15
inline void nibbles_even_odd(I8x16 p, I16x8 q[4]) {
  const __m128i mask = _mm_set1_epi16(0x000F);
  q[0] = {_mm_and_si128(p.v, mask)};
  q[1] = {_mm_and_si128(_mm_srli_epi16(p.v, 8), mask)};
  q[2] = {_mm_and_si128(_mm_srli_epi16(p.v, 4), mask)};
  q[3] = {_mm_srli_epi16(p.v, 12)};
}
inline void bytes_even_odd(I8x16 b, I16x8* even, I16x8* odd) {
  *even = {_mm_srai_epi16(_mm_slli_epi16(b.v, 8), 8)};
  *odd = {_mm_srai_epi16(b.v, 8)};
}
inline I32x4 sub(I32x4 a, I32x4 b) { return {_mm_sub_epi32(a.v, b.v)}; }
inline I32x4 load_halves(const uint16_t* p0, const uint16_t* p1, const uint16_t* p2, const uint16_t* p3) {
  __m128i v = _mm_insert_epi16(_mm_setzero_si128(), *p0, 0);
  v = _mm_insert_epi16(v, *p1, 2);
  v = _mm_insert_epi16(v, *p2, 4);
  return {_mm_insert_epi16(v, *p3, 6)};
}
inline F32x4 halves_to_f32(I32x4 h) {
  const __m128i exponent_plus_1 = _mm_and_si128(_mm_add_epi32(h.v, _mm_set1_epi32(0x0400)), _mm_set1_epi32(0x7800));
  if (_mm_movemask_epi8(_mm_cmpeq_epi32(exponent_plus_1, _mm_setzero_si128())) == 0) {
    const __m128i moved = _mm_and_si128(_mm_srai_epi32(_mm_slli_epi32(h.v, 16), 3), _mm_set1_epi32(static_cast<int32_t>(0x8FFFE000u)));
    return {_mm_castsi128_ps(_mm_add_epi32(moved, _mm_set1_epi32(112 << 23)))};
  }
  const __m128i bits = _mm_slli_epi32(_mm_and_si128(h.v, _mm_set1_epi32(0x7FFF)), 13);
  const __m128i inf = _mm_and_si128(_mm_cmpgt_epi32(bits, _mm_set1_epi32(0x0F7FFFFF)), _mm_set1_epi32(0x7F800000));
  const __m128i quiet = _mm_and_si128(_mm_cmpgt_epi32(bits, _mm_set1_epi32(0x0F800000)), _mm_set1_epi32(0x00400000));
  return {_mm_or_ps(finite_halves_to_f32(h).v, _mm_castsi128_ps(_mm_or_si128(inf, quiet)))};
}

// For the feature-major kernel: packed bytes [16] -> their low or high nibbles
// (unsigned, in bytes), and unsigned bytes zero-extended to int16.
inline I8x16 low_nibbles(I8x16 p) { return {_mm_and_si128(p.v, _mm_set1_epi8(0x0F))}; }
inline I8x16 high_nibbles(I8x16 p) { return {_mm_and_si128(_mm_srli_epi16(p.v, 4), _mm_set1_epi8(0x0F))}; }
inline I16x8 widen_lo_u8(I8x16 a) { return {_mm_unpacklo_epi8(a.v, _mm_setzero_si128())}; }
inline I16x8 widen_hi_u8(I8x16 a) { return {_mm_unpackhi_epi8(a.v, _mm_setzero_si128())}; }

// For the attention kernels (kernels/attention_steps.h): f64 pairs for the exact V
// accumulation, a 4 × 4 transpose, and f16 conversion and rounding. Every float operation is a
// single IEEE operation per lane (never fused) and every check is exact, so all three backends
// give the bytes of the scalar reference (ops/attention.cpp).
inline F64x2 load_f64x2(const double* p) { return {_mm_loadu_pd(p)}; }
inline void store(double* p, F64x2 a) { _mm_storeu_pd(p, a.v); }
inline F64x2 splat_f64(double f) { return {_mm_set1_pd(f)}; }
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

}  // namespace lf::simd
