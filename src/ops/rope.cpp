#include <cmath>

#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {

// x [n_head, head_dim] -> x rotated in place
void rope_neox(float* x, int n_head, int head_dim, int n_rot, int pos, float freq_base, float freq_scale,
               const float* freq_factors) {
  const int half = n_rot / 2;
  // ggml builds one cos/sin cache per position, iterating theta by repeated multiplication
  // (not pow per pair) and dividing by the factor before scaling: bit-for-bit the same angles.
  const float theta_scale = powf(freq_base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  for (int j = 0; j < half; ++j) {
    const float ff = freq_factors ? freq_factors[j] : 1.0f;
    const float angle = freq_scale * (theta / ff);
    // Not libm's cosf / sinf: musl's (both WASM modules) differ from glibc's (llama.cpp's).
    const float c = cos_f32(angle);
    const float s = sin_f32(angle);
    theta *= theta_scale;
    for (int h = 0; h < n_head; ++h) {
      float* head = x + static_cast<int64_t>(h) * head_dim;
      const float x0 = head[j];
      const float x1 = head[j + half];
      // Fused as the compiler fuses ggml's x0·cos − x1·sin and x0·sin + x1·cos wherever the CPU
      // has FMA (x86-64-v3 and every ARM64 build): the first product joins the sum unrounded.
      head[j] = fma_f32(x0, c, -(x1 * s));
      head[j + half] = fma_f32(x0, s, x1 * c);
    }
  }
}

}  // namespace lf
