// The kernels' vector operations in WASM SIMD128 (kernels/simd.h says the contract).
// Included by kernels/simd.h only.
#pragma once

#include <cstdint>
#include <cstring>

#include <wasm_simd128.h>

#include "kernels/simd_f16_bits.h"
#include "quant/quant.h"

namespace lf::simd {

inline constexpr const char* kIsa = "wasm-simd128";
struct I8x16 { v128_t v; };
struct I16x8 { v128_t v; };
struct I32x4 { v128_t v; };
struct F32x4 { v128_t v; };
struct F64x2 { v128_t v; };

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
// -> [a0 + a1, a2 + a3, b0 + b1, b2 + b3]
inline I32x4 add_pairs(I32x4 a, I32x4 b) {
  return {wasm_i32x4_add(wasm_i32x4_shuffle(a.v, b.v, 0, 2, 4, 6), wasm_i32x4_shuffle(a.v, b.v, 1, 3, 5, 7))};
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
// a where a > b, else b, lane by lane (x86's maxps: a NaN or an equal pair gives b)
inline F32x4 keep_greater(F32x4 a, F32x4 b) { return {wasm_f32x4_pmax(b.v, a.v)}; }
// a where a < b, else b, lane by lane (x86's minps)
inline F32x4 keep_less(F32x4 a, F32x4 b) { return {wasm_f32x4_pmin(b.v, a.v)}; }
inline bool any_nan(F32x4 x) { return !wasm_i32x4_all_true(wasm_f32x4_eq(x.v, x.v)); }
inline F32x4 load_f32x4(const float* p) { return {wasm_v128_load(p)}; }
inline void store(float* p, F32x4 a) { wasm_v128_store(p, a.v); }

// fused_madd's rare way, out of line so that the common one keeps its registers
[[gnu::noinline]] inline F32x4 fused_madd_lanes(F32x4 a, F32x4 b, F32x4 acc) {
  alignas(16) float av[4], bv[4], c[4];
  wasm_v128_store(av, a.v);
  wasm_v128_store(bv, b.v);
  wasm_v128_store(c, acc.v);
  for (int i = 0; i < 4; ++i) c[i] = fma_f32(av[i], bv[i], c[i]);
  return {wasm_v128_load(c)};
}

// lo, hi: lanes 0-1 and 2-3 of a·b + acc in double, the product exact and the sum rounded once
// -> *out, those sums rounded to f32 as fma_f32 (quant.h) rounds them; false where that second
// rounding may not be the correct one: where the double sum's low 28 bits are all clear (a
// halfway point it may have been rounded to, or a sum that f32 holds exactly, as acc + 0·b:
// rare), checked on the low 32-bit word of each double.
inline bool demote_rounded_once(v128_t lo, v128_t hi, F32x4* out) {
  const v128_t low_28 = wasm_v128_and(wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6), wasm_i32x4_splat(0x0FFFFFFF));
  if (wasm_v128_any_true(wasm_i32x4_eq(low_28, wasm_i32x4_splat(0)))) return false;
  out->v = wasm_i32x4_shuffle(wasm_f32x4_demote_f64x2_zero(lo), wasm_f32x4_demote_f64x2_zero(hi), 0, 1, 4, 5);
  return true;
}

// a·b + acc on each lane as fma_f32 computes it, rounded once: in double, where a·b (24 + 24
// significant bits) is exact and the sum rounds once, then to f32 (demote_rounded_once), the
// lanes of a flagged vector through fma_f32 itself.
inline F32x4 fused_madd(F32x4 a, F32x4 b, F32x4 acc) {
  const auto high = [](v128_t x) { return wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(x, x, 2, 3, 2, 3)); };
  const v128_t lo = wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_promote_low_f32x4(a.v), wasm_f64x2_promote_low_f32x4(b.v)),
                                   wasm_f64x2_promote_low_f32x4(acc.v));
  const v128_t hi = wasm_f64x2_add(wasm_f64x2_mul(high(a.v), high(b.v)), high(acc.v));
  F32x4 r;
  if (__builtin_expect(demote_rounded_once(lo, hi, &r), 1)) return r;
  return fused_madd_lanes(a, b, acc);
}

// sumi·d + acc as fused_madd of sumi's f32 (|sumi| < 2^24, so that is exact), sumi widened to
// double directly.
inline F32x4 fused_madd(I32x4 sumi, F32x4 d, F32x4 acc) {
  const v128_t lo = wasm_f64x2_add(wasm_f64x2_mul(wasm_f64x2_convert_low_i32x4(sumi.v), wasm_f64x2_promote_low_f32x4(d.v)),
                                   wasm_f64x2_promote_low_f32x4(acc.v));
  const v128_t hi = wasm_f64x2_add(
      wasm_f64x2_mul(wasm_f64x2_convert_low_i32x4(wasm_i32x4_shuffle(sumi.v, sumi.v, 2, 3, 2, 3)),
                     wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(d.v, d.v, 2, 3, 2, 3))),
      wasm_f64x2_promote_low_f32x4(wasm_i32x4_shuffle(acc.v, acc.v, 2, 3, 2, 3)));
  F32x4 r;
  if (__builtin_expect(demote_rounded_once(lo, hi, &r), 1)) return r;
  return fused_madd_lanes(to_f32(sumi), d, acc);
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

// For the attention kernels (kernels/attention_steps.h): f64 pairs for the exact V
// accumulation, a 4 × 4 transpose, and f16 conversion and rounding. Every float operation is a
// single IEEE operation per lane (never fused) and every check is exact, so all three backends
// give the bytes of the scalar reference (ops/attention.cpp).
inline F64x2 load_f64x2(const double* p) { return {wasm_v128_load(p)}; }
inline void store(double* p, F64x2 a) { wasm_v128_store(p, a.v); }
inline F64x2 splat_f64(double f) { return {wasm_f64x2_splat(f)}; }
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
// inf or NaN. A half sign-extended to 32 bits and shifted left by 13 holds its exponent and
// mantissa in an f32's places (reading as its value times 2^-112) and its sign in bits 31..28;
// bits 30..28 masked off, one multiplication by 2^112 gives the value, its sign kept.
inline v128_t widened_halves_to_f32(v128_t h32) {
  const v128_t bits = wasm_v128_and(wasm_i32x4_shl(h32, 13), wasm_i32x4_splat(static_cast<int32_t>(0x8FFFFFFFu)));
  return wasm_f32x4_mul(bits, wasm_f32x4_splat(0x1p112f));
}
inline bool try_halves_to_f32(const uint16_t* h, F32x4* lo, F32x4* hi) {
  const v128_t x = wasm_v128_load(h);
  const v128_t exponent = wasm_v128_and(x, wasm_i16x8_splat(0x7C00));
  if (wasm_v128_any_true(wasm_i16x8_eq(exponent, wasm_i16x8_splat(0x7C00)))) return false;
  lo->v = widened_halves_to_f32(wasm_i32x4_extend_low_i16x8(x));
  hi->v = widened_halves_to_f32(wasm_i32x4_extend_high_i16x8(x));
  return true;
}

// x [4] -> the nearest f16 of each (ties to even), held as f32, by Veltkamp's split
// (simd_f16_bits.h); exact only where every lane is in f16's normal range (is_half_normal).
inline F32x4 round_mantissa_to_half(F32x4 x) {
  const v128_t t = wasm_f32x4_mul(x.v, wasm_f32x4_splat(kHalfSplit));
  return {wasm_f32x4_add(t, wasm_f32x4_sub(x.v, t))};
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

}  // namespace lf::simd
