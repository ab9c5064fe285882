// The kernels' vector operations in WASM SIMD128 (kernels/simd.h says the contract).
// Included by kernels/simd.h only.
#pragma once

#include <cstdint>
#include <cstring>

#include <wasm_simd128.h>

#include "quant/quant.h"

namespace lf::simd {

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

// fused_madd's rare way, out of line so that the common one keeps its registers
[[gnu::noinline]] inline F32x4 fused_madd_lanes(I32x4 sumi, F32x4 d, F32x4 acc) {
  alignas(16) int32_t s[4];
  alignas(16) float dv[4], c[4];
  wasm_v128_store(s, sumi.v);
  wasm_v128_store(dv, d.v);
  wasm_v128_store(c, acc.v);
  for (int i = 0; i < 4; ++i) c[i] = fma_f32(static_cast<float>(s[i]), dv[i], c[i]);
  return {wasm_v128_load(c)};
}

// sumi·d + acc on each lane as fma_f32 (quant.h) computes it, rounded once: in double, where
// sumi (|sumi| < 2^24, so its f32 is exact) times d is exact and the sum rounds once, then to
// f32. That second rounding is the correct one unless the double sum's low 28 bits are all clear
// (a halfway point it may have been rounded to, or a sum that f32 holds exactly, as acc + 0·d:
// rare), checked on the low 32-bit word of each double; the 4 lanes are then taken through
// fma_f32.
inline F32x4 fused_madd(I32x4 sumi, F32x4 d, F32x4 acc) {
  const v128_t lo = wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_convert_low_i32x4(sumi.v), wasm_f64x2_promote_low_f32x4(d.v)),
                                   wasm_f64x2_promote_low_f32x4(acc.v));
  const v128_t hi = wasm_f64x2_add(
      wasm_f64x2_mul(wasm_f64x2_convert_low_i32x4(wasm_i32x4_shuffle(sumi.v, sumi.v, 2, 3, 2, 3)),
                     wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(d.v, d.v, 2, 3, 2, 3))),
      wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(acc.v, acc.v, 2, 3, 2, 3)));
  const v128_t low_28 = wasm_v128_and(wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6), wasm_i32x4_splat(0x0FFFFFFF));
  if (__builtin_expect(!wasm_v128_any_true(wasm_i32x4_eq(low_28, wasm_i32x4_splat(0))), 1)) {
    return {wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(lo), wasm_f32x4_demote_f64x2_zero(hi), 0, 1, 4, 5)};
  }
  return fused_madd_lanes(sumi, d, acc);
}

// For the feature-major kernel (kernels/gemm_feature_major.cpp): int16 lanes from
// memory, sign-extended to int32, and int32 negation.
inline I16x8 load_i16x8(const void* p) { return {wasm_v128_load(p)}; }
inline I32x4 widen_lo(I16x8 a) { return {wasm_i32x4_extend_low_i16x8(a.v)}; }
inline I32x4 widen_hi(I16x8 a) { return {wasm_i32x4_extend_high_i16x8(a.v)}; }
inline I32x4 neg(I32x4 a) { return {wasm_i32x4_neg(a.v)}; }

// For the GEMV (decode) path of kernels/gemm_q4_0_q8_0.cpp: blocks split into their even
// and odd elements as int16 by shifts and masks inside 16-bit lanes (no byte widening), and the
// f16 scales of 4 rows gathered and converted for every f16 value, infinities and NaNs included.
//   nibbles_even_odd: packed Q4_0 quants [16] -> unsigned q [4][8] of elements 0,2..14 | 1,3..15
//                     | 16,18..30 | 17,19..31 (low nibbles are elements 0-15, high ones 16-31)
//   bytes_even_odd:   int8 [16] -> int16 elements 0,2..14 and 1,3..15
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

// For the feature-major kernel: packed bytes [16] -> their low or high nibbles
// (unsigned, in bytes), and unsigned bytes zero-extended to int16.
inline I8x16 low_nibbles(I8x16 p) { return {wasm_v128_and(p.v, wasm_i8x16_splat(0x0F))}; }
inline I8x16 high_nibbles(I8x16 p) { return {wasm_u8x16_shr(p.v, 4)}; }
inline I16x8 widen_lo_u8(I8x16 a) { return {wasm_u16x8_extend_low_u8x16(a.v)}; }
inline I16x8 widen_hi_u8(I8x16 a) { return {wasm_u16x8_extend_high_u8x16(a.v)}; }

}  // namespace lf::simd
