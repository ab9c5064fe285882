#include <cmath>

#include "ops/ops.h"

namespace lf {

// x [n] -> y [n]
void layernorm(const float* x, const float* w, int n, float eps, float* y) {
  double total = 0.0;
  for (int i = 0; i < n; ++i) total += x[i];
  const float mean = static_cast<float>(total) / static_cast<float>(n);
  // ggml_vec_cvar_f32 on AVX-512: each 16 squares summed as _mm512_reduce_add_ps adds them
  // (lanes l + 8, then + 4, + 2, + 1), the sixteens and then the tail's squares in double.
  double squares = 0.0;
  int i = 0;
  for (; i + 15 < n; i += 16) {
    float lanes[16];
    for (int l = 0; l < 16; ++l) {
      y[i + l] = x[i + l] - mean;
      lanes[l] = y[i + l] * y[i + l];
    }
    for (int width = 8; width >= 1; width /= 2) {
      for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    }
    squares += lanes[0];
  }
  for (; i < n; ++i) {
    y[i] = x[i] - mean;
    squares += y[i] * y[i];
  }
  const auto variance = static_cast<float>(squares / n);
  const float scale = 1.0f / std::sqrt(variance + eps);
  for (int j = 0; j < n; ++j) y[j] *= scale;
  if (w) for (int j = 0; j < n; ++j) y[j] *= w[j];
}

}  // namespace lf
