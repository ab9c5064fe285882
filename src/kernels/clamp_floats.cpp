// clamp_floats (kernels/gemm.h): ggml_clamp's order of comparisons, MAX(MIN(x, hi), lo), whose
// lanes keep_less and keep_greater (kernels/simd.h) pick as its scalar form does, NaN included.
#include "kernels/gemm.h"
#include "kernels/simd.h"

namespace lf {

void clamp_floats(const float* x, int64_t n, float lo, float hi, float* y) {
  const simd::F32x4 vlo = simd::splat(lo), vhi = simd::splat(hi);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) simd::store(y + i, simd::keep_greater(simd::keep_less(simd::load_f32x4(x + i), vhi), vlo));
  for (; i < n; ++i) {
    const float a = x[i] < hi ? x[i] : hi;
    y[i] = a > lo ? a : lo;
  }
}

}  // namespace lf
