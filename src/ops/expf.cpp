// expf with the bits of glibc's (2.28 on, x86-64), which llama.cpp's CPU backend calls for
// ggml_sigmoid and the tails of its softmax: Arm's optimized-routines algorithm. x·32/ln2 is
// split into k + r (|r| <= 1/2) in double, 2^(k/32) taken from a table of the 32 powers 2^(i/32)
// with k/32's integer part added to the exponent, 2^(r/32) from a cubic, and the product rounded
// once to f32. Over all 2^32 inputs this equals glibc 2.36's expf but for 2 (±32.5 and -63.1,
// results of 2^47 and 2^-92, one ulp apart), whether glibc's FMA build fuses the polynomial or
// not, so it is computed plainly: the same bits in every build, unlike libm's expf.
//
// The coefficients and the method are optimized-routines' (Copyright Arm Limited, MIT OR
// Apache-2.0 WITH LLVM-exception); the table holds 2^(i/32) rounded to double.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {
namespace {

constexpr int kTableBits = 5;
constexpr double kPowers[1 << kTableBits] = {
    0x1p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f09p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e454p+0,
};

uint64_t bits64(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

double from_bits64(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

}  // namespace

float exp_f32(float x) {
  constexpr double kN = 1 << kTableBits;
  constexpr double kInvLn2N = 0x1.71547652b82fep+0 * kN;
  constexpr double kShift = 0x1.8p+52;  // adding it rounds to an integer, kept in the low bits
  constexpr double c0 = 0x1.c6af84b912394p-5 / kN / kN / kN, c1 = 0x1.ebfce50fac4f3p-3 / kN / kN;
  constexpr double c2 = 0x1.62e42ff0c52d6p-1 / kN;
  uint32_t word;
  std::memcpy(&word, &x, 4);
  if (((word >> 20) & 0x7ff) >= 0x42b) {  // |x| >= 88, or not finite
    if (word == 0xff800000u) return 0.0f;
    if (((word >> 20) & 0x7ff) >= 0x7f8) return x + x;
    if (x > 0x1.62e42ep6f) return INFINITY;
    if (x < -0x1.9fe368p6f) return 0.0f;
  }
  const double z = kInvLn2N * static_cast<double>(x);
  double kd = z + kShift;
  const uint64_t ki = bits64(kd);
  kd -= kShift;
  const double r = z - kd;
  // 2^(k/32): the table's power of its low bits, the rest added to the exponent.
  const double s = from_bits64(bits64(kPowers[ki % (1 << kTableBits)]) + ((ki >> kTableBits) << 52));
  const double y = (c0 * r + c1) * (r * r) + (c2 * r + 1.0);
  return static_cast<float>(y * s);
}

}  // namespace lf
