#include <cmath>

#include "ops/ops.h"

namespace lf {

// x [n] -> x [n]
void softmax(float* x, int n) {
  float max = -INFINITY;
  for (int i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = expf(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

// x [n] -> x [n]
void softcap(float* x, int n, float cap) {
  const float inv_cap = 1.0f / cap;
  for (int i = 0; i < n; ++i) x[i] = cap * tanhf(x[i] * inv_cap);
}

}  // namespace lf
