// sinf / cosf with the bits of glibc's x86-64 FMA build (docs/gemma-architecture.md, "RoPE"):
// the libms of the three builds differ (musl's, under both WASM modules, in about 1 angle in 50 of
// a RoPE table), so RoPE calls these instead of libm.
//
// glibc (2.28 on) computes them as Arm's optimized-routines do: the argument in double, reduced
// to r in [-π/4, π/4] and a quadrant n, then an odd polynomial of degree 7 for the sine or an even
// one of degree 8 for the cosine in r, rounded to f32 once. On a CPU with FMA and AVX2 its ifunc
// picks the copy compiled with -mfma, where GCC fuses every `a + b·c` of the reduction and the
// polynomials. Only the reduction's fusion shows in the f32 results: over all 2^32 inputs the
// polynomials fused or not give the same (and glibc's) values, while an unfused reduction
// differs on 34 inputs near multiples of π/2. The reduction is therefore computed exactly fused,
// the polynomials plainly (std::fma is a slow software routine in musl).
//
// The polynomial coefficients and the bits of 4/π below are optimized-routines' (Copyright Arm
// Limited, MIT OR Apache-2.0 WITH LLVM-exception): the same values are what gives glibc's bits.
#include <cmath>
#include <cstdint>

#include "ops/ops.h"

namespace lf {
namespace {

// The cosine's coefficients c0..c4 of 1, r², r⁴, r⁶, r⁸ and the sine's s1..s3 of r³, r⁵, r⁷.
struct Poly {
  double c[5];
  double s[3];
};
constexpr Poly kPoly = {{0x1p0, -0x1.ffffffd0c621cp-2, 0x1.55553e1068f19p-5, -0x1.6c087e89a359dp-10, 0x1.99343027bf8c3p-16},
                        {-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13}};
// The same with the cosine negated: quadrants 2 and 3 take it so that -cos costs nothing.
constexpr Poly kPolyNegCos = {{-0x1p0, 0x1.ffffffd0c621cp-2, -0x1.55553e1068f19p-5, 0x1.6c087e89a359dp-10, -0x1.99343027bf8c3p-16},
                              {-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13}};
constexpr double kQuadrantSign[4] = {1.0, -1.0, -1.0, 1.0};
constexpr double kTwoOverPiTimes2p24 = 0x1.45F306DC9C883p+23;
constexpr double kHalfPi = 0x1.921FB54442D18p0;
// π/2 (as the double above) split so that n·kHalfPiHigh (45 + 8 bits, |n| < 2^8) and
// n·kHalfPiLow (2 bits) are exact.
constexpr double kHalfPiHigh = 0x1.921FB54442D00p0;
constexpr double kHalfPiLow = 0x1.8p-48;
static_assert(kHalfPiHigh + kHalfPiLow == kHalfPi);
constexpr double kPiTimes2m64 = 0x1.921FB54442D18p-62;
// 4/π to 192 bits, a window of 32 bits starting every 8 bits (so every read is one aligned word).
constexpr uint32_t kFourOverPi[24] = {
    0xa2,       0xa2f9,     0xa2f983,   0xa2f9836e, 0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
    0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1, 0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
    0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599, 0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041};

// The comparisons glibc makes on the exponent and the top 3 mantissa bits only.
uint32_t top12(float x) { return (f32_bits(x) >> 20) & 0x7ff; }

// The sine polynomial of r (n even) or the cosine's (n odd), r2 = r².
float poly(double r, double r2, const Poly& p, int n) {
  if ((n & 1) == 0) {
    const double r3 = r * r2;
    const double s23 = p.s[1] + r2 * p.s[2];
    const double r7 = r3 * r2;
    const double s = r + r3 * p.s[0];
    return static_cast<float>(s + r7 * s23);
  }
  const double r4 = r2 * r2;
  const double c34 = p.c[3] + r2 * p.c[4];
  const double c01 = p.c[0] + r2 * p.c[1];
  const double r6 = r4 * r2;
  const double c = c01 + r4 * p.c[2];
  return static_cast<float>(c + r6 * c34);
}

// |x| < 120: r = x − n·π/2 rounded once, as the fused step, n rounded from x·2/π through a
// 2^24-scaled truncation (rounds half up for either sign). |n| <= 77, so x − n·kHalfPiHigh is
// exact (both multiples of 2^-44, the difference below 1): one rounding, in the last subtraction.
double reduce_small(double x, int* n) {
  const double scaled = x * kTwoOverPiTimes2p24;
  *n = (static_cast<int>(scaled) + 0x800000) >> 24;
  const double nd = static_cast<double>(*n);
  return (x - nd * kHalfPiHigh) - nd * kHalfPiLow;
}

// Any finite |x| >= 2 (bits xi; the sign ignored): the exact fixed-point product of the
// mantissa with 4/π's bits at its exponent, modulo 4 quadrants, as a 2.62 fraction.
double reduce_large(uint32_t xi, int* n) {
  const uint32_t* w = &kFourOverPi[(xi >> 26) & 15];
  const int shift = (xi >> 23) & 7;
  const uint32_t m = ((xi & 0xffffff) | 0x800000) << shift;
  uint64_t low = static_cast<uint32_t>(m * w[0]);  // only its low 32 bits count
  const uint64_t mid = static_cast<uint64_t>(m) * w[4];
  const uint64_t high = static_cast<uint64_t>(m) * w[8];
  low = (high >> 32) | (low << 32);
  low += mid;
  const uint64_t q = (low + (uint64_t{1} << 61)) >> 62;
  low -= q << 62;
  *n = static_cast<int>(q);
  return static_cast<double>(static_cast<int64_t>(low)) * kPiTimes2m64;
}

// sin (cos = false) or cos of y, quadrant by quadrant as glibc's sinf and cosf.
float sin_or_cos(float y, bool cos) {
  double x = y;
  const int odd = cos ? 1 : 0;
  if (top12(y) < top12(0x1.921FB6p-1f)) {  // |y| < π/4, to glibc's 12-bit precision
    if (top12(y) < top12(0x1p-12f)) return cos ? 1.0f : y;
    return poly(x, x * x, kPoly, odd);
  }
  int n = 0, quadrant = 0;
  if (top12(y) < top12(120.0f)) {
    x = reduce_small(x, &n);
    quadrant = n;
  } else if (top12(y) < top12(INFINITY)) {
    x = reduce_large(f32_bits(y), &n);
    quadrant = n + static_cast<int>(f32_bits(y) >> 31);
  } else {
    return (y - y) / (y - y);  // inf or NaN: NaN
  }
  const Poly& p = (quadrant & 2) ? kPolyNegCos : kPoly;
  return poly(x * kQuadrantSign[quadrant & 3], x * x, p, n ^ odd);
}

}  // namespace

float sin_f32(float x) { return sin_or_cos(x, false); }
float cos_f32(float x) { return sin_or_cos(x, true); }

}  // namespace lf
