// acc += a·b lane by lane with one rounding, in vectors: simd::fused_madd gives fma_f32's bits in
// every build (in double where the builds have no fused f32 step, a flagged lane through
// fma_f32 itself); and acc += w·v with two, as plain f32 code rounds it.
#include "kernels/gemm.h"
#include "kernels/simd.h"
#include "quant/quant.h"

namespace lf {

void madd_floats(float* acc, const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    simd::store(acc + i, simd::fused_madd(simd::load_f32x4(a + i), simd::load_f32x4(b + i), simd::load_f32x4(acc + i)));
  }
  for (; i < n; ++i) acc[i] = fma_f32(a[i], b[i], acc[i]);
}

void add_scaled_floats(float* acc, const float* v, float w, int64_t n) {
  const simd::F32x4 weight = simd::splat(w);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    simd::store(acc + i, simd::add(simd::load_f32x4(acc + i), simd::mul(weight, simd::load_f32x4(v + i))));
  }
  for (; i < n; ++i) acc[i] = acc[i] + w * v[i];
}

}  // namespace lf
