#include <cmath>

#include "ops/ops.h"

namespace lf {

// ggml's CPU backend runs a mul_mat hinted GGML_HINT_SRC0_IS_HADAMARD as this fast transform
// (ggml_compute_forward_fwht_f32): the scale first, then the butterflies of width 1, 2, 4, ...
// Its SIMD passes do the same pairs (u + v, and u - v as an FMA with -1, exact), so the order
// is one in every build.
void hadamard_rotate(float* x, int n, int block) {
  const float scale = 1.0f / sqrtf(static_cast<float>(block));
  for (int b0 = 0; b0 < n; b0 += block) {
    float* r = x + b0;
    for (int j = 0; j < block; ++j) r[j] *= scale;
    for (int len = 1; len < block; len <<= 1) {
      for (int i = 0; i < block; i += 2 * len) {
        for (int j = i; j < i + len; ++j) {
          const float u = r[j], v = r[j + len];
          r[j] = u + v;
          r[j + len] = u - v;
        }
      }
    }
  }
}

}  // namespace lf
