#include "kernels/exp_ggml.h"

#include <cmath>

#include "quant/quant.h"

namespace lf {

float scalef_ggml(float j, float n) {
  if (std::isnan(n)) return n;
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  return static_cast<float>(static_cast<double>(j) * std::ldexp(1.0, static_cast<int>(n)));
}

float expf_ggml(float x) {
  const float r = 0x1.8p23f;
  const float z = fma_f32(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = fma_f32(-n, 0x1.7f7d1cp-20f, fma_f32(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j = fma_f32(fma_f32(fma_f32(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fma_f32(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                          u, fma_f32(0x1.ffffecp-1f, b, 1.0f));
  return scalef_ggml(j, n);
}

float sum_exp_lanes(float* x, float max) {
  float lane[kExpLanes];
  for (int l = 0; l < kExpLanes; ++l) {
    x[l] = expf_ggml(x[l] - max);
    lane[l] = x[l];
  }
  for (int width = kExpLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  }
  return lane[0];
}

}  // namespace lf
