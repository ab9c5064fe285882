// The activations of the layer's matmuls, converted to each weight's vec_dot type.
#include "model/layer.h"
#include "quant/quant.h"

namespace lf {

Status convert_rows(const WeightView& W, const float* X, Share rows, uint8_t* Xc) {
  const uint64_t row_bytes = activation_row_bytes(W.type, W.n_in);
  for (int64_t t = rows.begin; t < rows.end; ++t) {
    LF_RETURN_IF_ERROR(convert_activation_row(W.type, X + t * W.n_in, Xc + row_bytes * static_cast<uint64_t>(t), W.n_in));
  }
  return Status();
}

bool same_conversion(const WeightView& a, const WeightView& b) { return a.type == b.type && a.n_in == b.n_in; }

Status convert_columns(const WeightView& W, const float* X, int n_rows, int64_t k0, int64_t k1, uint8_t* Xc) {
  const uint64_t row_bytes = activation_row_bytes(W.type, W.n_in), skip = activation_row_bytes(W.type, k0);
  for (int t = 0; t < n_rows && k0 < k1; ++t) {
    LF_RETURN_IF_ERROR(convert_activation_row(W.type, X + t * W.n_in + k0, Xc + row_bytes * static_cast<uint64_t>(t) + skip, k1 - k0));
  }
  return Status();
}

const uint8_t* xc_up(const LayerCall& c) {
  return same_conversion(c.w().ffn_up, c.w().ffn_gate) ? c.b.xc_gate.data() : c.b.xc_up.data();
}

void convert_act(const LayerCall& c, int64_t f0, int64_t f1) {
  c.check(convert_columns(c.w().ffn_down, c.b.act.data(), c.n_act(), f0, f1, c.b.xc_down.data()));
}

}  // namespace lf
