// GEMM of F32 / F16 / BF16 weights with f32 activations (src/kernels/gemm.h), for the small float
// matmuls such as the MoE router (ffn_gate_inp, F32: 128 × 2816 per token).
//
// vec_dot_ref keeps each row's sum in one double, every product rounded to f32 first, added in
// element order: one dependent add per element, so a row at a time runs at the add's latency.
// Here kRows rows run side by side, each with its own double sum in the reference's order, which
// keeps the adds independent (the outputs are the reference's bits: nothing is reordered within
// a row).
#include <cassert>

#include "kernels/gemm.h"
#include "quant/quant.h"

namespace lf {
namespace {

constexpr int64_t kRows = 8;  // independent sums in flight: the double add's latency × its throughput

float f32_identity(float f) { return f; }

// rows [r0, r1) of W (elements of type T) · one activation row a -> y [r0, r1)
template <typename T, float (*ToF32)(T)>
void gemv_float(const WeightView& W, const float* a, float* y, int64_t r0, int64_t r1) {
  const int64_t n = W.n_in;
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) {
    const T* w[kRows];
    double sum[kRows];
    for (int64_t k = 0; k < kRows; ++k) {
      w[k] = static_cast<const T*>(static_cast<const void*>(W.row(r + k)));
      sum[k] = 0.0;
    }
    for (int64_t i = 0; i < n; ++i) {
      const float x = a[i];
      for (int64_t k = 0; k < kRows; ++k) sum[k] += static_cast<double>(ToF32(w[k][i]) * x);
    }
    for (int64_t k = 0; k < kRows; ++k) y[r + k] = static_cast<float>(sum[k]);
  }
  for (; r < r1; ++r) y[r] = vec_dot_ref(W.type, W.row(r), a, n);
}

template <typename T, float (*ToF32)(T)>
void gemm_float(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0, int64_t r1) {
  for (int t = 0; t < n_tok; ++t) {
    const auto* a = static_cast<const float*>(static_cast<const void*>(Xc + x_row * static_cast<uint64_t>(t)));
    gemv_float<T, ToF32>(W, a, Y + static_cast<int64_t>(t) * W.n_out, r0, r1);
  }
}

}  // namespace

bool is_float_weight(GgmlType weight_type) {
  return weight_type == GgmlType::F32 || weight_type == GgmlType::F16 || weight_type == GgmlType::BF16;
}

void gemm_float_strided(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                        int64_t r1) {
  assert(is_float_weight(W.type));
  switch (W.type) {
    case GgmlType::F32: return gemm_float<float, f32_identity>(W, Xc, x_row, n_tok, Y, r0, r1);
    case GgmlType::F16: return gemm_float<uint16_t, fp16_to_fp32>(W, Xc, x_row, n_tok, Y, r0, r1);
    default: return gemm_float<uint16_t, bf16_to_fp32>(W, Xc, x_row, n_tok, Y, r0, r1);
  }
}

}  // namespace lf
