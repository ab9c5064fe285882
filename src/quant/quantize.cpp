// Reference quantizers with llama.cpp's exact rounding (docs/gguf.md, "Reference quantizers" and
// "Activation quantization"): Q4_0 and Q8_0 to write weight files as its quantizer does, and
// Q8_0 / Q8_1 / Q8_K to turn an f32 activation row into a dot's right-hand side as its x86
// builds do.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/quant.h"

namespace lf {
namespace {

// ggml's nearest_int: adding 1.5·2^23 leaves round-half-even(v) in the low mantissa bits.
// Valid for |v| <= 2^22 - 1, far beyond the ±127 it is used for.
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007FFFFF) - 0x00400000;
}

// max|x| over a block, in ggml's MAX(a, b) = a > b ? a : b order.
float abs_max(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
  return amax;
}

// The signed value of largest magnitude; the first one wins a tie.
float signed_abs_max(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

}  // namespace

// x [n] -> y [n/32]
void quantize_row_q4_0_ref(const float* x, block_q4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_0; ++b, x += QK4_0) {
    const float d = signed_abs_max(x, QK4_0) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      // x·id lies in [-8, 8], so truncating x·id + 8.5 rounds half up; x·id = 8 would give 16.
      const auto lo = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x[j] * id + 8.5f)));
      const auto hi = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x[j + QK4_0 / 2] * id + 8.5f)));
      y[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

// x [n] -> y [n/32]
void quantize_row_q8_0_ref(const float* x, block_q8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
    const float d = abs_max(x, QK8_0) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) y[b].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

// llama.cpp's x86 Q8_0 / Q8_1 activation quantizer (quantize_row_q8_0 / _q8_1 for AVX and AVX2,
// which every x86 build of it runs): q = x·(127/amax) rounded half to even, where the generic
// code takes x·(1/d) rounded half away from zero. For finite x, |x·id| <= 127·(1 + 2^-22), so
// only a product that is not a number (amax so small that 127/amax is infinite) is out of
// range: cvtps2dq converts it to INT_MIN, which the packs saturate to -128.
int8_t quantize_x86(float v) {
  if (!(std::fabs(v) <= 127.5f)) return -128;
  return static_cast<int8_t>(nearest_int(v));
}

// x [n] -> y [n/32]
void quantize_row_q8_0_x86(const float* x, block_q8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
    const float amax = abs_max(x, QK8_0);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = fp32_to_fp16(amax / 127.0f);
    for (int j = 0; j < QK8_0; ++j) y[b].qs[j] = quantize_x86(x[j] * id);
  }
}

// x [n] -> y [n/32]
void quantize_row_q8_1_x86(const float* x, block_q8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / QK8_1; ++b, x += QK8_1) {
    const float amax = abs_max(x, QK8_1);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      y[b].qs[j] = quantize_x86(x[j] * id);
      sum += y[b].qs[j];
    }
    y[b].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

// x [n] -> y [n/256]
void quantize_row_q8_K_ref(const float* x, block_q8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    const float max = signed_abs_max(x, QK_K);
    if (max == 0.0f) {
      // llama.cpp leaves bsums unwritten here; zeros are what they would sum to.
      std::memset(&y[b], 0, sizeof y[b]);
      continue;
    }
    // -127 rather than -128 so that q never leaves [-127, 127] (llama.cpp, for IQ2_XXS).
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; ++j) y[b].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int g = 0; g < QK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[b].qs[16 * g + l];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = 1 / iscale;
  }
}

}  // namespace lf
