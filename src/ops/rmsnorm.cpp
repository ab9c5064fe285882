#include <cmath>

#include "ops/ops.h"

namespace lf {

// x [n] -> y [n]
void rmsnorm(const float* x, const float* w, int n, float eps, float* y) {
  // ggml widens each f32 square to double before summing, then rounds the mean back to f32.
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / sqrtf(mean + eps);
  for (int i = 0; i < n; ++i) {
    const float normed = x[i] * scale;
    y[i] = w ? normed * w[i] : normed;
  }
}

// x [n_rows, n] -> y [n_rows, n]
void rmsnorm_rows(const float* x, const float* w, int n_rows, int n, float eps, float* y) {
  for (int r = 0; r < n_rows; ++r) rmsnorm(x + static_cast<int64_t>(r) * n, w, n, eps, y + static_cast<int64_t>(r) * n);
}

}  // namespace lf
