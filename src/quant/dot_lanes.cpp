// A quantized K/V cache's rows: unpacked, and dotted as llama.cpp's x86 builds dot them (quant.h).
#include <cstring>

#include "quant/quant.h"
#include "quant/unpack.h"

namespace lf {

void unpack_kv_blocks(GgmlType type, const void* row, int n, int8_t* q, float* scale) {
  for (int b = 0; b < n / QK8_0; ++b) {
    if (type == GgmlType::Q8_0) {
      const block_q8_0& block = static_cast<const block_q8_0*>(row)[b];
      std::memcpy(q + b * QK8_0, block.qs, QK8_0);
      scale[b] = fp16_to_fp32(block.d);
    } else {
      const block_q4_0& block = static_cast<const block_q4_0*>(row)[b];
      unpack_q4_0(block, q + b * QK4_0);
      scale[b] = fp16_to_fp32(block.d);
    }
  }
}

// Each lane's int32 is exact in f32 (|sum| <= 4·128·127), d_x·d_y (two f16) too, so the lane's
// _mm256_fmadd_ps is fma_f32. hsum_float_8 adds the upper 128 bits to the lower, then lanes
// {2, 3} to {0, 1}, then lane 1 to lane 0.
float vec_dot_q8_0_lanes(const int8_t* x, const float* x_scale, const block_q8_0* y, int64_t n) {
  float lane[kVecDotLanes] = {};
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    const float d = x_scale[b] * fp16_to_fp32(y[b].d);
    for (int l = 0; l < kVecDotLanes; ++l) {
      int32_t sum = 0;
      for (int i = 4 * l; i < 4 * l + 4; ++i) sum += x[b * QK8_0 + i] * y[b].qs[i];
      lane[l] = fma_f32(d, static_cast<float>(sum), lane[l]);
    }
  }
  for (int half = kVecDotLanes / 2; half >= 1; half /= 2) {
    for (int l = 0; l < half; ++l) lane[l] += lane[l + half];
  }
  return lane[0];
}

}  // namespace lf
