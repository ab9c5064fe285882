// The few 128-bit vector operations the GEMM kernels need, behind one feature macro each:
// WASM SIMD128 (__wasm_simd128__), SSE2 (every x86-64) and a portable scalar twin. All
// integer operations are exact and the float ones are single IEEE operations per lane (never
// fused), so every backend computes bit-identical results.
#pragma once

#include <cstdint>
#include <cstring>

// The relaxed-SIMD module variant (wasm/targets.cmake) defines this to 1.
#ifndef LF_RELAXED_SIMD
#define LF_RELAXED_SIMD 0
#endif

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#define LF_SIMD_WASM 1
#elif defined(__SSE2__)
#include <emmintrin.h>
#define LF_SIMD_SSE2 1
#endif

namespace lf::simd {

#if LF_SIMD_WASM

inline constexpr const char* kIsa = "wasm-simd128";
struct I8x16 { v128_t v; };
struct I16x8 { v128_t v; };
struct I32x4 { v128_t v; };
struct F32x4 { v128_t v; };

inline I8x16 load_i8x16(const void* p) { return {wasm_v128_load(p)}; }
inline I16x8 widen_lo(I8x16 a) { return {wasm_i16x8_extend_low_i8x16(a.v)}; }
inline I16x8 widen_hi(I8x16 a) { return {wasm_i16x8_extend_high_i8x16(a.v)}; }
// packed [16] bytes -> low or high nibble of each, minus 8: the Q4_0 weights in [-8, 7]
inline I8x16 low_nibbles_minus_8(I8x16 p) {
  return {wasm_i8x16_sub(wasm_v128_and(p.v, wasm_i8x16_splat(0x0F)), wasm_i8x16_splat(8))};
}
inline I8x16 high_nibbles_minus_8(I8x16 p) { return {wasm_i8x16_sub(wasm_u8x16_shr(p.v, 4), wasm_i8x16_splat(8))}; }
// a [8] · b [8] -> [a0b0 + a1b1, a2b2 + a3b3, ...]
inline I32x4 dot_pairs(I16x8 a, I16x8 b) { return {wasm_i32x4_dot_i16x8(a.v, b.v)}; }
inline I32x4 add(I32x4 a, I32x4 b) { return {wasm_i32x4_add(a.v, b.v)}; }
// lane products and sums in 16 bits: exact only while they fit, which callers make sure of
inline I16x8 mul(I16x8 a, I16x8 b) { return {wasm_i16x8_mul(a.v, b.v)}; }
inline I16x8 add(I16x8 a, I16x8 b) { return {wasm_i16x8_add(a.v, b.v)}; }
inline I16x8 splat_i16(int16_t s) { return {wasm_i16x8_splat(s)}; }
// a [8] · s (one value splat in all lanes) -> lanes 0-3 or 4-7 as exact i32 products
inline I32x4 mul_widen_lo(I16x8 a, I16x8 s) { return {wasm_i32x4_extmul_low_i16x8(a.v, s.v)}; }
inline I32x4 mul_widen_hi(I16x8 a, I16x8 s) { return {wasm_i32x4_extmul_high_i16x8(a.v, s.v)}; }
// -> [Σa, Σb, Σc, Σd]
inline I32x4 sum_each(I32x4 a, I32x4 b, I32x4 c, I32x4 d) {
  const v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a.v, b.v, 0, 4, 1, 5), wasm_i32x4_shuffle(a.v, b.v, 2, 6, 3, 7));
  const v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c.v, d.v, 0, 4, 1, 5), wasm_i32x4_shuffle(c.v, d.v, 2, 6, 3, 7));
  return {wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7))};
}
inline I32x4 make_i32(int32_t a, int32_t b, int32_t c, int32_t d) { return {wasm_i32x4_make(a, b, c, d)}; }
inline I32x4 load_i32x4(const int32_t* p) { return {wasm_v128_load(p)}; }
inline void store_i32(int32_t* p, I32x4 a) { wasm_v128_store(p, a.v); }
// f16 bit patterns h [4] (finite) -> f32, never through an f32 subnormal (x86 takes a ~100-cycle
// microcode assist on each, and tiny scales are common): normal halves by moving the exponent
// bias in the integers, subnormal ones as (2^-14 + m·2^-24) - 2^-14, which is exact.
inline F32x4 finite_halves_to_f32(I32x4 h) {
  const v128_t bits = wasm_i32x4_shl(wasm_v128_and(h.v, wasm_i32x4_splat(0x7FFF)), 13);
  const v128_t normal = wasm_i32x4_add(bits, wasm_i32x4_splat(112 << 23));
  const v128_t subnormal = wasm_f32x4_sub(wasm_i32x4_add(bits, wasm_i32x4_splat(113 << 23)), wasm_f32x4_splat(0x1p-14f));
  const v128_t is_subnormal = wasm_i32x4_lt(bits, wasm_i32x4_splat(1 << 23));
  const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h.v, wasm_i32x4_splat(0x8000)), 16);
  return {wasm_v128_or(wasm_v128_bitselect(subnormal, normal, is_subnormal), sign)};
}
inline F32x4 to_f32(I32x4 a) { return {wasm_f32x4_convert_i32x4(a.v)}; }
inline F32x4 splat(float f) { return {wasm_f32x4_splat(f)}; }
inline F32x4 make(float a, float b, float c, float d) { return {wasm_f32x4_make(a, b, c, d)}; }
inline F32x4 mul(F32x4 a, F32x4 b) { return {wasm_f32x4_mul(a.v, b.v)}; }
inline F32x4 add(F32x4 a, F32x4 b) { return {wasm_f32x4_add(a.v, b.v)}; }
inline F32x4 load_f32x4(const float* p) { return {wasm_v128_load(p)}; }
inline void store(float* p, F32x4 a) { wasm_v128_store(p, a.v); }

#elif LF_SIMD_SSE2

inline constexpr const char* kIsa = "sse2";
struct I8x16 { __m128i v; };
struct I16x8 { __m128i v; };
struct I32x4 { __m128i v; };
struct F32x4 { __m128 v; };

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
inline F32x4 load_f32x4(const float* p) { return {_mm_loadu_ps(p)}; }
inline void store(float* p, F32x4 a) { _mm_storeu_ps(p, a.v); }

#else

inline constexpr const char* kIsa = "scalar";
struct I8x16 { int8_t v[16]; };
struct I16x8 { int16_t v[8]; };
struct I32x4 { int32_t v[4]; };
struct F32x4 { float v[4]; };

inline I8x16 load_i8x16(const void* p) {
  I8x16 r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
}
inline I16x8 widen_half(I8x16 a, int first) {
  I16x8 r;
  for (int i = 0; i < 8; ++i) r.v[i] = a.v[first + i];
  return r;
}
inline I16x8 widen_lo(I8x16 a) { return widen_half(a, 0); }
inline I16x8 widen_hi(I8x16 a) { return widen_half(a, 8); }
inline I8x16 nibbles_minus_8(I8x16 p, int shift) {
  I8x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = static_cast<int8_t>(((static_cast<uint8_t>(p.v[i]) >> shift) & 0x0F) - 8);
  return r;
}
inline I8x16 low_nibbles_minus_8(I8x16 p) { return nibbles_minus_8(p, 0); }
inline I8x16 high_nibbles_minus_8(I8x16 p) { return nibbles_minus_8(p, 4); }
inline I32x4 dot_pairs(I16x8 a, I16x8 b) {
  I32x4 r;
  for (int i = 0; i < 4; ++i) r.v[i] = a.v[2 * i] * b.v[2 * i] + a.v[2 * i + 1] * b.v[2 * i + 1];
  return r;
}
// wrapping, as the vector instructions are
inline I32x4 add(I32x4 a, I32x4 b) {
  for (int i = 0; i < 4; ++i) a.v[i] = static_cast<int32_t>(static_cast<uint32_t>(a.v[i]) + static_cast<uint32_t>(b.v[i]));
  return a;
}
inline I16x8 mul(I16x8 a, I16x8 b) {
  for (int i = 0; i < 8; ++i) a.v[i] = static_cast<int16_t>(a.v[i] * b.v[i]);
  return a;
}
inline I16x8 add(I16x8 a, I16x8 b) {
  for (int i = 0; i < 8; ++i) a.v[i] = static_cast<int16_t>(a.v[i] + b.v[i]);
  return a;
}
inline I16x8 splat_i16(int16_t s) {
  I16x8 r;
  for (int i = 0; i < 8; ++i) r.v[i] = s;
  return r;
}
inline I32x4 mul_widen(I16x8 a, I16x8 s, int first) {
  I32x4 r;
  for (int i = 0; i < 4; ++i) r.v[i] = a.v[first + i] * s.v[first + i];
  return r;
}
inline I32x4 mul_widen_lo(I16x8 a, I16x8 s) { return mul_widen(a, s, 0); }
inline I32x4 mul_widen_hi(I16x8 a, I16x8 s) { return mul_widen(a, s, 4); }
inline I32x4 sum_each(I32x4 a, I32x4 b, I32x4 c, I32x4 d) {
  const I32x4* in[4] = {&a, &b, &c, &d};
  I32x4 r;
  for (int i = 0; i < 4; ++i) r.v[i] = in[i]->v[0] + in[i]->v[1] + in[i]->v[2] + in[i]->v[3];
  return r;
}
inline I32x4 make_i32(int32_t a, int32_t b, int32_t c, int32_t d) { return {{a, b, c, d}}; }
inline I32x4 load_i32x4(const int32_t* p) {
  I32x4 r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
}
inline void store_i32(int32_t* p, I32x4 a) { std::memcpy(p, a.v, sizeof a.v); }
inline F32x4 finite_halves_to_f32(I32x4 h) {
  F32x4 r;
  for (int i = 0; i < 4; ++i) {
    const uint32_t magnitude_bits = static_cast<uint32_t>(h.v[i] & 0x7FFF) << 13;
    std::memcpy(&r.v[i], &magnitude_bits, sizeof(float));
    r.v[i] *= 0x1p112f;
    uint32_t bits;
    std::memcpy(&bits, &r.v[i], sizeof bits);
    bits |= static_cast<uint32_t>(h.v[i] & 0x8000) << 16;
    std::memcpy(&r.v[i], &bits, sizeof bits);
  }
  return r;
}
inline F32x4 to_f32(I32x4 a) {
  F32x4 r;
  for (int i = 0; i < 4; ++i) r.v[i] = static_cast<float>(a.v[i]);
  return r;
}
inline F32x4 make(float a, float b, float c, float d) { return {{a, b, c, d}}; }
inline F32x4 splat(float f) { return make(f, f, f, f); }
inline F32x4 mul(F32x4 a, F32x4 b) {
  for (int i = 0; i < 4; ++i) a.v[i] *= b.v[i];
  return a;
}
inline F32x4 add(F32x4 a, F32x4 b) {
  for (int i = 0; i < 4; ++i) a.v[i] += b.v[i];
  return a;
}
inline F32x4 load_f32x4(const float* p) {
  F32x4 r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
}
inline void store(float* p, F32x4 a) { std::memcpy(p, a.v, sizeof a.v); }

#endif

// Appended for the feature-major kernel (src/kernels/gemm_feature_major.cpp): int16 lanes from
// memory, sign-extended to int32, and int32 negation.
#if LF_SIMD_WASM
inline I16x8 load_i16x8(const void* p) { return {wasm_v128_load(p)}; }
inline I32x4 widen_lo(I16x8 a) { return {wasm_i32x4_extend_low_i16x8(a.v)}; }
inline I32x4 widen_hi(I16x8 a) { return {wasm_i32x4_extend_high_i16x8(a.v)}; }
inline I32x4 neg(I32x4 a) { return {wasm_i32x4_neg(a.v)}; }
#elif LF_SIMD_SSE2
inline I16x8 load_i16x8(const void* p) { return {_mm_loadu_si128(static_cast<const __m128i*>(p))}; }
inline I32x4 widen_lo(I16x8 a) { return {_mm_srai_epi32(_mm_unpacklo_epi16(a.v, a.v), 16)}; }
inline I32x4 widen_hi(I16x8 a) { return {_mm_srai_epi32(_mm_unpackhi_epi16(a.v, a.v), 16)}; }
inline I32x4 neg(I32x4 a) { return {_mm_sub_epi32(_mm_setzero_si128(), a.v)}; }
#else
inline I16x8 load_i16x8(const void* p) {
  I16x8 r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
}
inline I32x4 widen_i16_half(I16x8 a, int first) {
  I32x4 r;
  for (int i = 0; i < 4; ++i) r.v[i] = a.v[first + i];
  return r;
}
inline I32x4 widen_lo(I16x8 a) { return widen_i16_half(a, 0); }
inline I32x4 widen_hi(I16x8 a) { return widen_i16_half(a, 4); }
inline I32x4 neg(I32x4 a) {
  for (int i = 0; i < 4; ++i) a.v[i] = -a.v[i];
  return a;
}
#endif

// Appended for the GEMV (decode) path of src/kernels/gemm_q4_0_q8_0.cpp: blocks split into their even
// and odd elements as int16 by shifts and masks inside 16-bit lanes (no byte widening), and the
// f16 scales of 4 rows gathered and converted for every f16 value, infinities and NaNs included.
//   nibbles_even_odd: packed Q4_0 quants [16] -> unsigned q [4][8] of elements 0,2..14 | 1,3..15
//                     | 16,18..30 | 17,19..31 (low nibbles are elements 0-15, high ones 16-31)
//   bytes_even_odd:   int8 [16] -> int16 elements 0,2..14 and 1,3..15
#if LF_SIMD_WASM
inline void nibbles_even_odd(I8x16 p, I16x8 q[4]) {
  const v128_t mask = wasm_i16x8_splat(0x000F);
  q[0] = {wasm_v128_and(p.v, mask)};
  q[1] = {wasm_v128_and(wasm_u16x8_shr(p.v, 8), mask)};
  q[2] = {wasm_v128_and(wasm_u16x8_shr(p.v, 4), mask)};
  q[3] = {wasm_u16x8_shr(p.v, 12)};
}
inline void bytes_even_odd(I8x16 b, I16x8* even, I16x8* odd) {
  *even = {wasm_i16x8_shr(wasm_i16x8_shl(b.v, 8), 8)};
  *odd = {wasm_i16x8_shr(b.v, 8)};
}
inline I32x4 sub(I32x4 a, I32x4 b) { return {wasm_i32x4_sub(a.v, b.v)}; }
// *p0 .. *p3 -> the i32 lanes, zero-extended
inline I32x4 load_halves(const uint16_t* p0, const uint16_t* p1, const uint16_t* p2, const uint16_t* p3) {
  v128_t v = wasm_v128_load16_lane(p0, wasm_i32x4_splat(0), 0);
  v = wasm_v128_load16_lane(p1, v, 2);
  v = wasm_v128_load16_lane(p2, v, 4);
  return {wasm_v128_load16_lane(p3, v, 6)};
}
// As fp16_to_fp32 for each lane. Scales are nearly always normal halves: then the sign and the
// exponent and mantissa bits move into place by one arithmetic shift (the sign's copies masked
// off) and the bias by one add. Otherwise (a lane of exponent 0 or 31, i.e. exponent + 1 has no
// bit in 0x7800): finite_halves_to_f32, where exponent 31 comes out as 2^16·(1 + m), and setting
// every f32 exponent bit makes that the infinity, or the NaN with its payload, quieted.
inline F32x4 halves_to_f32(I32x4 h) {
  const v128_t exponent_plus_1 = wasm_v128_and(wasm_i32x4_add(h.v, wasm_i32x4_splat(0x0400)), wasm_i32x4_splat(0x7800));
  if (!wasm_v128_any_true(wasm_i32x4_eq(exponent_plus_1, wasm_i32x4_splat(0)))) {
    const v128_t moved = wasm_v128_and(wasm_i32x4_shr(wasm_i32x4_shl(h.v, 16), 3), wasm_i32x4_splat(static_cast<int32_t>(0x8FFFE000u)));
    return {wasm_i32x4_add(moved, wasm_i32x4_splat(112 << 23))};
  }
  const v128_t bits = wasm_i32x4_shl(wasm_v128_and(h.v, wasm_i32x4_splat(0x7FFF)), 13);
  const v128_t inf = wasm_v128_and(wasm_i32x4_gt(bits, wasm_i32x4_splat(0x0F7FFFFF)), wasm_i32x4_splat(0x7F800000));
  const v128_t quiet = wasm_v128_and(wasm_i32x4_gt(bits, wasm_i32x4_splat(0x0F800000)), wasm_i32x4_splat(0x00400000));
  return {wasm_v128_or(finite_halves_to_f32(h).v, wasm_v128_or(inf, quiet))};
}
#elif LF_SIMD_SSE2
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
#else
inline void nibbles_even_odd(I8x16 p, I16x8 q[4]) {
  for (int i = 0; i < 8; ++i) {
    const uint8_t lo = static_cast<uint8_t>(p.v[2 * i]), hi = static_cast<uint8_t>(p.v[2 * i + 1]);
    q[0].v[i] = lo & 0x0F;
    q[1].v[i] = hi & 0x0F;
    q[2].v[i] = lo >> 4;
    q[3].v[i] = hi >> 4;
  }
}
inline void bytes_even_odd(I8x16 b, I16x8* even, I16x8* odd) {
  for (int i = 0; i < 8; ++i) {
    even->v[i] = b.v[2 * i];
    odd->v[i] = b.v[2 * i + 1];
  }
}
inline I32x4 sub(I32x4 a, I32x4 b) {
  for (int i = 0; i < 4; ++i) a.v[i] -= b.v[i];
  return a;
}
inline I32x4 load_halves(const uint16_t* p0, const uint16_t* p1, const uint16_t* p2, const uint16_t* p3) {
  return make_i32(*p0, *p1, *p2, *p3);
}
inline F32x4 halves_to_f32(I32x4 h) {
  F32x4 r = finite_halves_to_f32(h);
  for (int i = 0; i < 4; ++i) {
    const uint32_t bits = static_cast<uint32_t>(h.v[i] & 0x7FFF) << 13;
    uint32_t f;
    std::memcpy(&f, &r.v[i], sizeof f);
    if (bits > 0x0F7FFFFFu) f |= 0x7F800000u;
    if (bits > 0x0F800000u) f |= 0x00400000u;
    std::memcpy(&r.v[i], &f, sizeof f);
  }
  return r;
}
#endif

// Appended for the feature-major kernel: packed bytes [16] -> their low or high nibbles
// (unsigned, in bytes), and unsigned bytes zero-extended to int16.
#if LF_SIMD_WASM
inline I8x16 low_nibbles(I8x16 p) { return {wasm_v128_and(p.v, wasm_i8x16_splat(0x0F))}; }
inline I8x16 high_nibbles(I8x16 p) { return {wasm_u8x16_shr(p.v, 4)}; }
inline I16x8 widen_lo_u8(I8x16 a) { return {wasm_u16x8_extend_low_u8x16(a.v)}; }
inline I16x8 widen_hi_u8(I8x16 a) { return {wasm_u16x8_extend_high_u8x16(a.v)}; }
#elif LF_SIMD_SSE2
inline I8x16 low_nibbles(I8x16 p) { return {_mm_and_si128(p.v, _mm_set1_epi8(0x0F))}; }
inline I8x16 high_nibbles(I8x16 p) { return {_mm_and_si128(_mm_srli_epi16(p.v, 4), _mm_set1_epi8(0x0F))}; }
inline I16x8 widen_lo_u8(I8x16 a) { return {_mm_unpacklo_epi8(a.v, _mm_setzero_si128())}; }
inline I16x8 widen_hi_u8(I8x16 a) { return {_mm_unpackhi_epi8(a.v, _mm_setzero_si128())}; }
#else
inline I8x16 nibbles(I8x16 p, int shift) {
  I8x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = static_cast<int8_t>((static_cast<uint8_t>(p.v[i]) >> shift) & 0x0F);
  return r;
}
inline I8x16 low_nibbles(I8x16 p) { return nibbles(p, 0); }
inline I8x16 high_nibbles(I8x16 p) { return nibbles(p, 4); }
inline I16x8 widen_u8_half(I8x16 a, int first) {
  I16x8 r;
  for (int i = 0; i < 8; ++i) r.v[i] = static_cast<uint8_t>(a.v[first + i]);
  return r;
}
inline I16x8 widen_lo_u8(I8x16 a) { return widen_u8_half(a, 0); }
inline I16x8 widen_hi_u8(I8x16 a) { return widen_u8_half(a, 8); }
#endif

// A block of 32 int8 in two halves -> int16 [4][8] in element order.
inline void widen_32(I8x16 lo, I8x16 hi, I16x8 q[4]) {
  q[0] = widen_lo(lo);
  q[1] = widen_hi(lo);
  q[2] = widen_lo(hi);
  q[3] = widen_hi(hi);
}

}  // namespace lf::simd
