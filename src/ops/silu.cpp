#include <cmath>

#include "kernels/exp_ggml.h"
#include "ops/ops.h"

namespace lf {

float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

// x [n] -> y [n]
void silu(const float* x, int n, float* y) {
  int i = 0;
  for (; i + kExpLanes - 1 < n; i += kExpLanes) {
    for (int l = 0; l < kExpLanes; ++l) y[i + l] = x[i + l] / (1.0f + expf_ggml(0.0f - x[i + l]));
  }
  for (; i < n; ++i) y[i] = x[i] / (1.0f + exp_f32(-x[i]));
}

}  // namespace lf
