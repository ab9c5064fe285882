// Random test rows shared by the quant tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace lf_test {

// x [n]: normal values whose magnitude changes per 32-element block among 1e-6, 1 and 1e4, so
// every block format meets tiny, ordinary and large scales.
inline std::vector<float> random_row(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 2);
  const float scales[3] = {1e-6f, 1.0f, 1e4f};
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t b = 0; b < n / 32; ++b) {
    const float scale = scales[pick(rng)];
    for (int64_t i = 0; i < 32; ++i) x[static_cast<size_t>(32 * b + i)] = normal(rng) * scale;
  }
  return x;
}

}  // namespace lf_test
