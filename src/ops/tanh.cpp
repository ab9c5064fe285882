// tanhf with the bits of glibc's (2.36, every x86-64 CPU: no ifunc variant), which llama.cpp's
// CPU backend calls for ggml_tanh and the audio encoder's soft cap: fdlibm's algorithm, through
// its expm1f, in f32 arithmetic step for step. libm's tanhf differs between glibc, musl and
// wasi-libc (and glibc's is not correctly rounded), so the engine computes it here in every
// build; over all 2^32 inputs these equal glibc 2.36's tanhf and expm1f.
//
// The constants and the steps are fdlibm's (Copyright (C) 1993 by Sun Microsystems, Inc.;
// "Permission to use, copy, modify, and distribute this software is freely granted, provided that
// this notice is preserved"): the same values and order are what give glibc's bits.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {
namespace {

// y · 2^k by adding k to its exponent field (y normal, the result too)
float scaled(float y, int k) { return f32_from_bits(f32_bits(y) + (static_cast<uint32_t>(k) << 23)); }

// e^x - 1: x = k·ln2 + r (hi - lo, c the rounding of that difference), a rational approximation
// of r's part in Q1..Q5, then k put back with the care fdlibm takes near 0, -1 and large k.
float expm1_fdlibm(float x) {
  const float ln2_hi = f32_from_bits(0x3f317180), ln2_lo = f32_from_bits(0x3717f7d1), inv_ln2 = f32_from_bits(0x3fb8aa3b);
  const float q1 = f32_from_bits(0xbd088889), q2 = f32_from_bits(0x3ad00d01), q3 = f32_from_bits(0xb8a670cd);
  const float q4 = f32_from_bits(0x36867e54), q5 = f32_from_bits(0xb457edbb);
  const uint32_t word = f32_bits(x), hx = word & 0x7fffffff;
  const bool negative = (word >> 31) != 0;
  if (hx >= 0x4195b844) {  // |x| >= 27·ln2
    if (hx >= 0x42b17218) {
      if (hx > 0x7f800000) return x + x;
      if (hx == 0x7f800000) return negative ? -1.0f : x;
      if (x > f32_from_bits(0x42b17180)) return INFINITY;
    }
    if (negative) return 1.0e-30f - 1.0f;
  }
  float hi, lo, c = 0.0f;
  int k = 0;
  if (hx > 0x3eb17218) {  // |x| > ln2 / 2
    if (hx < 0x3F851592) {  // and < 3·ln2 / 2
      k = negative ? -1 : 1;
      hi = negative ? x + ln2_hi : x - ln2_hi;
      lo = negative ? -ln2_lo : ln2_lo;
    } else {
      k = static_cast<int>(inv_ln2 * x + (negative ? -0.5f : 0.5f));
      const auto t = static_cast<float>(k);
      hi = x - t * ln2_hi;
      lo = t * ln2_lo;
    }
    x = hi - lo;
    c = (hi - x) - lo;
  } else if (hx < 0x33000000) {  // |x| < 2^-25
    return x;
  }
  const float hfx = 0.5f * x;
  const float hxs = x * hfx;
  const float r1 = 1.0f + hxs * (q1 + hxs * (q2 + hxs * (q3 + hxs * (q4 + hxs * q5))));
  float t = 3.0f - r1 * hfx;
  float e = hxs * ((r1 - t) / (6.0f - x * t));
  if (k == 0) return x - (x * e - hxs);
  e = x * (e - c) - c;
  e -= hxs;
  if (k == -1) return 0.5f * (x - e) - 0.5f;
  if (k == 1) return x < -0.25f ? -2.0f * (e - (x + 0.5f)) : 1.0f + 2.0f * (x - e);
  if (k <= -2 || k > 56) return scaled(1.0f - (e - x), k) - 1.0f;
  if (k < 23) {
    t = f32_from_bits(0x3f800000 - (0x1000000u >> k));  // 1 - 2^-k
    return scaled(t - (e - x), k);
  }
  t = f32_from_bits(static_cast<uint32_t>(0x7f - k) << 23);  // 2^-k
  return scaled((x - (e + t)) + 1.0f, k);
}

}  // namespace

float tanh_f32(float x) {
  const uint32_t word = f32_bits(x), ix = word & 0x7fffffff;
  const bool negative = (word >> 31) != 0;
  if (ix >= 0x7f800000) return negative ? 1.0f / x - 1.0f : 1.0f / x + 1.0f;  // ±1, NaN
  float z;
  if (ix < 0x41b00000) {  // |x| < 22
    if (ix == 0) return x;
    if (ix < 0x24000000) return x * (1.0f + x);  // |x| < 2^-55
    if (ix >= 0x3f800000) {  // |x| >= 1
      z = 1.0f - 2.0f / (expm1_fdlibm(2.0f * std::fabs(x)) + 2.0f);
    } else {
      const float t = expm1_fdlibm(-2.0f * std::fabs(x));
      z = -t / (t + 2.0f);
    }
  } else {
    z = 1.0f - 1.0e-30f;
  }
  return negative ? -z : z;
}

}  // namespace lf
