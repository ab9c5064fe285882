#include "ops/ops.h"
#include "layout/feature_major.h"
#include "kernels/gemm.h"
#include "quant/quant.h"

namespace lf {

// X [n_tok, n_in] -> Xc [n_tok, row bytes of vec_dot_type(W.type)]
Status convert_activations(const WeightView& W, const float* X, int n_tok, std::vector<uint8_t>* Xc) {
  const uint64_t row = activation_row_bytes(W.type, W.n_in);
  Xc->resize(static_cast<size_t>(row * static_cast<uint64_t>(n_tok)));
  for (int t = 0; t < n_tok; ++t) {
    LF_RETURN_IF_ERROR(convert_activation_row(W.type, X + static_cast<int64_t>(t) * W.n_in, Xc->data() + row * t, W.n_in));
  }
  return Status();
}

// W [n_out, n_in] · Xc [n_tok, n_in] (rows x_row bytes apart) -> Y [n_tok, n_out], rows [r0, r1)
void matmul_rows_strided(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                         int64_t r1) {
  if (W.layout == WeightLayout::feature_major) return gemm_feature_major(W, Xc, x_row, n_tok, Y, r0, r1);
  if (has_gemm_kernel(W.type)) {
    if (vec_dot_type(W.type) == GgmlType::Q8_K) return gemm_q8_K_strided(W, Xc, x_row, n_tok, Y, r0, r1);
    return gemm_q8_0_strided(W, Xc, x_row, n_tok, Y, r0, r1);
  }
  if (is_float_weight(W.type)) return gemm_float_strided(W, Xc, x_row, n_tok, Y, r0, r1);
  for (int t = 0; t < n_tok; ++t) {
    const uint8_t* x = Xc + x_row * static_cast<uint64_t>(t);
    float* y = Y + static_cast<int64_t>(t) * W.n_out;
    for (int64_t r = r0; r < r1; ++r) y[r] = vec_dot_ref(W.type, W.row(r), x, W.n_in);
  }
}

// W [n_out, n_in] · Xc [n_tok, n_in] -> Y [n_tok, n_out], rows [r0, r1), input columns [k0, k1)
void matmul_rows(const WeightView& W, const uint8_t* Xc, int n_tok, float* Y, int64_t r0, int64_t r1,
                 int64_t k0, int64_t k1) {
  if (k1 < 0) k1 = W.n_in;
  matmul_rows_strided(W.columns(k0, k1), Xc + activation_row_bytes(W.type, k0), activation_row_bytes(W.type, W.n_in),
                      n_tok, Y, r0, r1);
}

// W [n_out, n_in] · X [n_tok, n_in] -> Y [n_tok, n_out]
Status matmul(const WeightView& W, const float* X, int n_tok, float* Y) {
  std::vector<uint8_t> Xc;
  LF_RETURN_IF_ERROR(convert_activations(W, X, n_tok, &Xc));
  matmul_rows(W, Xc.data(), n_tok, Y, 0, W.n_out);
  return Status();
}

}  // namespace lf
