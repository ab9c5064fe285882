// The kernels' vector operations as portable scalar loops, lane by lane: the twin the SIMD
// backends must equal bit for bit (kernels/simd.h says the contract).
// Included by kernels/simd.h only.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/simd_f16_bits.h"
#include "quant/quant.h"

namespace lf::simd {

inline constexpr const char* kIsa = "scalar";
struct I8x16 { int8_t v[16]; };
struct I16x8 { int16_t v[8]; };
struct I32x4 { int32_t v[4]; };
struct F32x4 { float v[4]; };
struct F64x2 { double v[2]; };

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
inline I32x4 add_pairs(I32x4 a, I32x4 b) { return {{a.v[0] + a.v[1], a.v[2] + a.v[3], b.v[0] + b.v[1], b.v[2] + b.v[3]}}; }
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
inline F32x4 keep_greater(F32x4 a, F32x4 b) {
  for (int i = 0; i < 4; ++i) a.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
  return a;
}
inline F32x4 keep_less(F32x4 a, F32x4 b) {
  for (int i = 0; i < 4; ++i) a.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i];
  return a;
}
inline bool any_nan(F32x4 x) { return x.v[0] != x.v[0] || x.v[1] != x.v[1] || x.v[2] != x.v[2] || x.v[3] != x.v[3]; }
inline F32x4 load_f32x4(const float* p) {
  F32x4 r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
}
inline void store(float* p, F32x4 a) { std::memcpy(p, a.v, sizeof a.v); }
inline F32x4 fused_madd(F32x4 a, F32x4 b, F32x4 acc) {
  for (int i = 0; i < 4; ++i) acc.v[i] = fma_f32(a.v[i], b.v[i], acc.v[i]);
  return acc;
}
inline F32x4 fused_madd(I32x4 sumi, F32x4 d, F32x4 acc) { return fused_madd(to_f32(sumi), d, acc); }

// For the feature-major kernel (kernels/gemm_feature_major.cpp): int16 lanes from
// memory, sign-extended to int32, and int32 negation.
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

// For the GEMV (decode) path of kernels/gemm_q4_0_q8_0.cpp: blocks split into their even
// and odd elements as int16 by shifts and masks inside 16-bit lanes (no byte widening), and the
// f16 scales of 4 rows gathered and converted for every f16 value, infinities and NaNs included.
//   nibbles_even_odd: packed Q4_0 quants [16] -> unsigned q [4][8] of elements 0,2..14 | 1,3..15
//                     | 16,18..30 | 17,19..31 (low nibbles are elements 0-15, high ones 16-31)
//   bytes_even_odd:   int8 [16] -> int16 elements 0,2..14 and 1,3..15
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

// For the feature-major kernel: packed bytes [16] -> their low or high nibbles
// (unsigned, in bytes), and unsigned bytes zero-extended to int16.
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

// For the attention kernels (kernels/attention_steps.h): f64 pairs for the exact V
// accumulation, a 4 × 4 transpose, and f16 conversion and rounding. Every float operation is a
// single IEEE operation per lane (never fused) and every check is exact, so all three backends
// give the bytes of the scalar reference (ops/attention.cpp).
inline F64x2 load_f64x2(const double* p) { return {{p[0], p[1]}}; }
inline void store(double* p, F64x2 a) { std::memcpy(p, a.v, sizeof a.v); }
inline F64x2 splat_f64(double f) { return {{f, f}}; }
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

}  // namespace lf::simd
