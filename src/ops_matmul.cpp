#include "layerfold/ops.h"
#include "layerfold/kernels.h"
#include "layerfold/quant.h"

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

// W [n_out, n_in] · Xc [n_tok, n_in] -> Y [n_tok, n_out], rows [r0, r1), input columns [k0, k1)
void matmul_rows(const WeightView& W, const uint8_t* Xc, int n_tok, float* Y, int64_t r0, int64_t r1,
                 int64_t k0, int64_t k1) {
  if (k1 < 0) k1 = W.n_in;
  if (has_gemm_kernel(W.type)) return gemm_q8_0_activations(W, Xc, n_tok, Y, r0, r1, k0, k1);
  TypeTraits traits{};
  type_traits(static_cast<uint32_t>(W.type), &traits);
  const uint64_t x_row = activation_row_bytes(W.type, W.n_in);
  const uint64_t x_skip = activation_row_bytes(W.type, k0);
  const uint64_t w_skip = row_bytes(traits, static_cast<uint64_t>(k0));
  for (int t = 0; t < n_tok; ++t) {
    const uint8_t* x = Xc + x_row * t + x_skip;
    float* y = Y + static_cast<int64_t>(t) * W.n_out;
    for (int64_t r = r0; r < r1; ++r) y[r] = vec_dot_ref(W.type, W.row(r) + w_skip, x, k1 - k0);
  }
}

// W [n_out, n_in] · X [n_tok, n_in] -> Y [n_tok, n_out]
Status matmul(const WeightView& W, const float* X, int n_tok, float* Y) {
  std::vector<uint8_t> Xc;
  LF_RETURN_IF_ERROR(convert_activations(W, X, n_tok, &Xc));
  matmul_rows(W, Xc.data(), n_tok, Y, 0, W.n_out);
  return Status();
}

}  // namespace lf
