// Half-precision conversions with ggml's semantics (docs/gguf.md, "Float types"). Written on the
// bits rather than with ggml's float-arithmetic trick so the result cannot depend on the FPU's
// rounding mode or on a compiler's contraction choices; the outputs are the same for every input.
#include "quant/quant.h"

namespace lf {
namespace {

// Drops the low `shift` bits of `v`, rounding to nearest, ties to the even result.
uint32_t shift_right_rne(uint32_t v, int shift) {
  const uint32_t kept = v >> shift;
  const uint32_t rest = v & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
}

constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32Inf = 0x7F800000u;
constexpr uint32_t kF32Quiet = 0x00400000u;
constexpr uint32_t kF32SmallestF16Normal = 0x38800000u;  // 2^-14
constexpr uint32_t kF32HalfSmallestF16Sub = 0x33000000u;  // 2^-25: ties to even, i.e. to 0
constexpr uint32_t kF32F16Overflow = 0x477FF000u;        // 65520 = 65504 + half an ulp, ties up

}  // namespace

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) {
    // NaNs come out quiet with their payload, as x86's F16C and ggml's table both give.
    return f32_from_bits(sign | kF32Inf | (mantissa << 13) | (mantissa ? kF32Quiet : 0));
  }
  if (exponent == 0) {
    // Subnormal (or zero): mantissa · 2^-24 is exact in f32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return f32_from_bits(sign | f32_bits(magnitude));
  }
  return f32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & kF32AbsMask;
  if (a > kF32Inf) return sign | 0x7E00;  // ggml keeps the sign of a NaN, drops its payload
  if (a >= kF32F16Overflow) return sign | 0x7C00;
  if (a >= kF32SmallestF16Normal) {
    // Rebias the exponent (127 -> 15) and round the mantissa from 23 to 10 bits; a carry out of
    // the mantissa correctly bumps the exponent.
    return sign | static_cast<uint16_t>(shift_right_rne(a - 0x38000000u, 13));
  }
  if (a <= kF32HalfSmallestF16Sub) return sign;
  // f16 subnormal: round(|f| · 2^24). |f| = m · 2^(e-150) with the implicit bit in m, so the
  // f16 mantissa is m >> (126 - e); rounding up from 0x3FF gives 0x400, the smallest normal.
  const int exponent = static_cast<int>(a >> 23);
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  return sign | static_cast<uint16_t>(shift_right_rne(m, 126 - exponent));
}

float bf16_to_fp32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & kF32AbsMask) > kF32Inf) return static_cast<uint16_t>((u >> 16) | 0x40);  // force quiet
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);
}

}  // namespace lf
