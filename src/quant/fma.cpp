// a·b + c rounded once, the same bits in every build (quant.h, docs/gguf.md "The fused step").
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quant/quant.h"

namespace lf {

float fma_f32(float a, float b, float c) {
  // a·b (24 + 24 bits) is exact in double, so s = a·b + c carries one rounding; rounding s to f32
  // is then the correctly rounded result unless s is itself an f32 halfway point the exact sum
  // is not (a double rounding). Such an s has its low 28 bits clear, whatever f32 precision the
  // result has (bit 28 marks the halfway point of a normal float, higher bits a subnormal's).
  const double ab = static_cast<double>(a) * static_cast<double>(b);
  const double s = ab + static_cast<double>(c);
  uint64_t u;
  std::memcpy(&u, &s, sizeof u);
  if ((u & 0x0FFFFFFFu) != 0 || !std::isfinite(s)) return static_cast<float>(s);
  // s's rounding error, exactly (Knuth's two-sum); where there is one, s rounded to odd (one
  // double step toward the exact sum) is off every f32 halfway point and rounds as the exact sum.
  const double ab_part = s - static_cast<double>(c);
  const double error = (ab - ab_part) + (static_cast<double>(c) - (s - ab_part));
  if (error != 0.0) u += (error > 0.0) == (s > 0.0) ? 1 : -1;
  double odd;
  std::memcpy(&odd, &u, sizeof odd);
  return static_cast<float>(odd);
}

}  // namespace lf
