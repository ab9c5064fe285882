// The dense GeGLU FFN: act = gelu(gate) · up over every feature of this worker's units.
#include "model/layer.h"
#include "ops/ops.h"

namespace lf {

void dense_ffn(const LayerCall& c) {
  const auto [f0, f1] = geglu_features(c);
  if (f0 < f1) convert_act(c, f0, f1);
}

std::pair<int64_t, int64_t> geglu_features(const LayerCall& c) {
  const auto [f0, f1] = my_features(c);
  if (f0 == f1) return {f0, f1};
  const int n_ff = c.l().n_ff;
  matmul_rows(c.w().ffn_gate, c.b.xc_gate.data(), c.n_act(), c.b.gate.data(), f0, f1);
  matmul_rows(c.w().ffn_up, xc_up(c), c.n_act(), c.b.up.data(), f0, f1);
  for (int t = 0; t < c.n_act(); ++t) {
    geglu(row(c.b.gate, t, n_ff) + f0, row(c.b.up, t, n_ff) + f0, static_cast<int>(f1 - f0), row(c.b.act, t, n_ff) + f0);
  }
  return {f0, f1};
}

std::pair<int64_t, int64_t> my_features(const LayerCall& c) {
  const ColumnUnits& ffn = c.plan().ffn;
  const Share units = c.my_share(ffn.n_units);
  if (units.begin == units.end) return {0, 0};
  return {ffn.begin(static_cast<int>(units.begin)), ffn.end(static_cast<int>(units.end) - 1)};
}

}  // namespace lf
