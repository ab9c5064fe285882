// The f32 bit patterns the backends' f16 rounding compares against (kernels/simd_wasm.h,
// simd_sse2.h, simd_scalar.h), in one place so that the three stay twins.
#pragma once

#include <cstdint>

namespace lf::simd {

// f32 bit patterns bounding the f16 normal range: 2^-14 and 65520 (65504 + half an ulp, which
// rounds to infinity). Inside it, rounding to f16 is rounding the f32 mantissa to 10 bits.
constexpr int32_t kHalfNormalMin = 0x38800000;
constexpr int32_t kHalfOverflow = 0x477FF000;
// |x| - 2^-14 moved to the bottom of the signed range: one signed compare then tests
// 2^-14 <= |x| < 65520 (SSE2 has no unsigned compare).
constexpr int32_t kNormalBias = static_cast<int32_t>(0x80000000u - static_cast<uint32_t>(kHalfNormalMin));
constexpr int32_t kNormalLimit = static_cast<int32_t>(0x80000000u + static_cast<uint32_t>(kHalfOverflow - kHalfNormalMin));
// Veltkamp's split constant 2^13 + 1: inside that range t = x·kHalfSplit, t + (x - t) (each
// operation rounded to nearest even) is x rounded to f16's 11 significant bits, ties to even
// (docs/attention.md, "Why the bytes are the same").
constexpr float kHalfSplit = 8193.0f;
constexpr int32_t kF32Inf = 0x7F800000;
constexpr int32_t kF32QuietNan = 0x7FC00000;  // the f16 NaN 0x7E00 read back as f32

}  // namespace lf::simd
