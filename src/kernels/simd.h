// The few 128-bit vector operations the GEMM and attention kernels need, one backend chosen at
// compile time: WASM SIMD128 (__wasm_simd128__, kernels/simd_wasm.h), SSE2 (every x86-64,
// kernels/simd_sse2.h) and a portable scalar twin (kernels/simd_scalar.h). Each backend defines
// the same types (I8x16, I16x8, I32x4, F32x4, F64x2), the same functions and kIsa. All integer
// operations are exact and the float ones are single IEEE operations per lane, or fused_madd's
// a·b + c rounded once (computed in double, never by a fused instruction, whose use would depend
// on the build), so every backend computes bit-identical results.
#pragma once

// The relaxed-SIMD module variant (wasm/targets.cmake) defines this to 1.
#ifndef LF_RELAXED_SIMD
#define LF_RELAXED_SIMD 0
#endif

#if defined(__wasm_simd128__)
#define LF_SIMD_WASM 1
#include "kernels/simd_wasm.h"
#elif defined(__SSE2__)
#define LF_SIMD_SSE2 1
#include "kernels/simd_sse2.h"
#else
#include "kernels/simd_scalar.h"
#endif

namespace lf::simd {

// A block of 32 int8 in two halves -> int16 [4][8] in element order.
inline void widen_32(I8x16 lo, I8x16 hi, I16x8 q[4]) {
  q[0] = widen_lo(lo);
  q[1] = widen_hi(lo);
  q[2] = widen_lo(hi);
  q[3] = widen_hi(hi);
}

}  // namespace lf::simd
