// fp16 / bf16 conversions against hand-picked bit patterns (docs/gguf.md, "Float types").
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "quant/quant.h"

namespace {

bool is_f16_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0; }

}  // namespace

TEST_CASE("fp32_to_fp16 on hand-picked values", "[quant]") {
  CHECK(lf::fp32_to_fp16(0.0f) == 0x0000);
  CHECK(lf::fp32_to_fp16(-0.0f) == 0x8000);
  CHECK(lf::fp32_to_fp16(1.0f) == 0x3C00);
  CHECK(lf::fp32_to_fp16(-2.0f) == 0xC000);
  CHECK(lf::fp32_to_fp16(65504.0f) == 0x7BFF);
  CHECK(lf::fp32_to_fp16(65519.996f) == 0x7BFF);  // just under the halfway point to 65536
  CHECK(lf::fp32_to_fp16(65520.0f) == 0x7C00);    // halfway, 0x7BFF is odd: rounds up to inf
  CHECK(lf::fp32_to_fp16(-65520.0f) == 0xFC00);
  CHECK(lf::fp32_to_fp16(1e10f) == 0x7C00);
  CHECK(lf::fp32_to_fp16(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(lf::fp32_to_fp16(-std::numeric_limits<float>::infinity()) == 0xFC00);
  CHECK(lf::fp32_to_fp16(lf::f32_from_bits(0x7FC00000)) == 0x7E00);
  CHECK(lf::fp32_to_fp16(lf::f32_from_bits(0x7F800001)) == 0x7E00);  // signalling NaN, payload dropped
  CHECK(lf::fp32_to_fp16(lf::f32_from_bits(0xFFC00000)) == 0xFE00);  // ggml keeps the NaN's sign

  // Normal halfway cases: 1 + 2^-11 lies between 0x3C00 and 0x3C01 -> even 0x3C00.
  CHECK(lf::fp32_to_fp16(1.0f + 0x1p-11f) == 0x3C00);
  CHECK(lf::fp32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3C02);
  CHECK(lf::fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3C01);
  CHECK(lf::fp32_to_fp16(2049.0f) == 0x6800);  // 2048 and 2050 are neighbours; 2048 is even
  CHECK(lf::fp32_to_fp16(2051.0f) == 0x6802);  // -> 2052

  // Subnormals: 2^-24 is the smallest, 2^-14 the smallest normal.
  CHECK(lf::fp32_to_fp16(0x1p-24f) == 0x0001);
  CHECK(lf::fp32_to_fp16(-0x1p-24f) == 0x8001);
  CHECK(lf::fp32_to_fp16(0x1p-25f) == 0x0000);                      // tie with 0: even
  CHECK(lf::fp32_to_fp16(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);  // just above the tie
  CHECK(lf::fp32_to_fp16(1.5f * 0x1p-24f) == 0x0002);               // tie 1|2 -> 2
  CHECK(lf::fp32_to_fp16(2.5f * 0x1p-24f) == 0x0002);               // tie 2|3 -> 2
  CHECK(lf::fp32_to_fp16(1023 * 0x1p-24f) == 0x03FF);
  CHECK(lf::fp32_to_fp16(0x1p-14f - 0x1p-25f) == 0x0400);  // tie 0x3FF|0x400 -> 0x400 (even)
  CHECK(lf::fp32_to_fp16(0x1p-14f) == 0x0400);
  CHECK(lf::fp32_to_fp16(1e-10f) == 0x0000);
}

TEST_CASE("fp16_to_fp32 on hand-picked values", "[quant]") {
  CHECK(lf::fp16_to_fp32(0x0000) == 0.0f);
  CHECK(lf::f32_bits(lf::fp16_to_fp32(0x8000)) == 0x80000000u);
  CHECK(lf::f32_bits(lf::fp16_to_fp32(0x7E00)) == 0x7FC00000u);
  CHECK(lf::f32_bits(lf::fp16_to_fp32(0x7C01)) == 0x7FC02000u);  // made quiet, payload kept
  CHECK(lf::fp16_to_fp32(0x3C00) == 1.0f);
  CHECK(lf::fp16_to_fp32(0xC000) == -2.0f);
  CHECK(lf::fp16_to_fp32(0x3555) == 0.333251953125f);
  CHECK(lf::fp16_to_fp32(0x7BFF) == 65504.0f);
  CHECK(lf::fp16_to_fp32(0x0001) == 0x1p-24f);
  CHECK(lf::fp16_to_fp32(0x03FF) == 1023 * 0x1p-24f);
  CHECK(lf::fp16_to_fp32(0x8200) == -512 * 0x1p-24f);
  CHECK(lf::fp16_to_fp32(0x0400) == 0x1p-14f);
  CHECK(lf::fp16_to_fp32(0x7C00) == std::numeric_limits<float>::infinity());
  CHECK(lf::fp16_to_fp32(0xFC00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(lf::fp16_to_fp32(0x7E00)));
  CHECK(std::isnan(lf::fp16_to_fp32(0x7C01)));
  CHECK(std::isnan(lf::fp16_to_fp32(0xFFFF)));
}

TEST_CASE("fp16 round trip is the identity on every non-NaN half", "[quant]") {
  int mismatches = 0;
  float previous = -std::numeric_limits<float>::infinity();
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<uint16_t>(h);
    if (is_f16_nan(half)) continue;
    const float f = lf::fp16_to_fp32(half);
    if (lf::fp16_to_fp32(lf::fp32_to_fp16(f)) != f || lf::fp32_to_fp16(f) != half) ++mismatches;
    // Positive halves in bit order must be strictly increasing floats.
    if (h <= 0x7C00) {
      if (h > 0 && !(f > previous)) ++mismatches;
      previous = f;
    }
  }
  CHECK(mismatches == 0);
}

#if defined(__FLT16_MANT_DIG__) && !defined(__wasm__)
// The compiler's own _Float16 conversion is an independent oracle for round-to-nearest-even.
TEST_CASE("fp16 conversions agree with the compiler's _Float16", "[quant]") {
  int mismatches = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<uint16_t>(h);
    if (is_f16_nan(half)) continue;
    _Float16 native;
    std::memcpy(&native, &half, sizeof native);
    if (lf::f32_bits(lf::fp16_to_fp32(half)) != lf::f32_bits(static_cast<float>(native))) ++mismatches;
  }
  // A stride coprime to 2^32 visits float bit patterns of every exponent, sign and mantissa shape.
  for (uint64_t u = 0; u < 0x100000000ull; u += 4099) {
    const float f = lf::f32_from_bits(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    const _Float16 native = static_cast<_Float16>(f);
    uint16_t expected;
    std::memcpy(&expected, &native, sizeof expected);
    if (lf::fp32_to_fp16(f) != expected) ++mismatches;
  }
  CHECK(mismatches == 0);
}
#endif

TEST_CASE("bf16 conversions on hand-picked values", "[quant]") {
  CHECK(lf::fp32_to_bf16(0.0f) == 0x0000);
  CHECK(lf::fp32_to_bf16(-0.0f) == 0x8000);
  CHECK(lf::fp32_to_bf16(1.0f) == 0x3F80);
  CHECK(lf::fp32_to_bf16(-3.0f) == 0xC040);
  CHECK(lf::fp32_to_bf16(lf::f32_from_bits(0x3F808000)) == 0x3F80);  // tie, 0x3F80 even: down
  CHECK(lf::fp32_to_bf16(lf::f32_from_bits(0x3F818000)) == 0x3F82);  // tie, 0x3F81 odd: up
  CHECK(lf::fp32_to_bf16(lf::f32_from_bits(0x3F808001)) == 0x3F81);  // above the tie
  CHECK(lf::fp32_to_bf16(lf::f32_from_bits(0x3F807FFF)) == 0x3F80);  // below the tie
  CHECK(lf::fp32_to_bf16(lf::f32_from_bits(0x00000001)) == 0x0000);  // f32 subnormals round like any value
  CHECK(lf::fp32_to_bf16(lf::f32_from_bits(0x00018000)) == 0x0002);
  CHECK(lf::fp32_to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // rounds up to inf
  CHECK(lf::fp32_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(lf::fp32_to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(lf::fp32_to_bf16(lf::f32_from_bits(0x7F800001)) == 0x7FC0);  // signalling NaN made quiet
  CHECK(lf::fp32_to_bf16(lf::f32_from_bits(0xFFC00000)) == 0xFFC0);
  CHECK(lf::fp32_to_bf16(lf::f32_from_bits(0x7FFFFFFF)) == 0x7FFF);  // no carry into the sign

  CHECK(lf::bf16_to_fp32(0x3F80) == 1.0f);
  CHECK(lf::bf16_to_fp32(0xC040) == -3.0f);
  CHECK(lf::bf16_to_fp32(0x0001) == lf::f32_from_bits(0x00010000));
  CHECK(lf::bf16_to_fp32(0xFF80) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(lf::bf16_to_fp32(0x7FC0)));
  for (uint32_t h = 0; h < 0x10000; h += 7) {  // every non-NaN bf16 survives a round trip
    const auto b = static_cast<uint16_t>(h);
    if (std::isnan(lf::bf16_to_fp32(b))) continue;
    REQUIRE(lf::fp32_to_bf16(lf::bf16_to_fp32(b)) == b);
  }
}
