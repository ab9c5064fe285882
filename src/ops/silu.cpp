#include <cmath>

#include "kernels/attention.h"
#include "kernels/exp_ggml.h"
#include "ops/ops.h"

namespace lf {

float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

// x [n] -> y [n]
void silu(const float* x, int n, float* y) {
  int i = 0;
  for (; i + kExpLanes - 1 < n; i += kExpLanes) {
    float e[kExpLanes];
    for (int l = 0; l < kExpLanes; ++l) e[l] = 0.0f - x[i + l];
    sum_exp_lanes_simd(e, 0.0f);  // expf_ggml(e - 0) each: e itself, -0 included
    for (int l = 0; l < kExpLanes; ++l) y[i + l] = x[i + l] / (1.0f + e[l]);
  }
  for (; i < n; ++i) y[i] = x[i] / (1.0f + exp_f32(-x[i]));
}

}  // namespace lf
