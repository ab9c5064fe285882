#include "model/per_layer_embd.h"

#include <cmath>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {

Status per_layer_inputs(const Model& m, const int32_t* tokens, int n, const float* x0, float* out) {
  const ModelConfig& c = m.config;
  if (c.n_embd_per_layer <= 0) return Status(Code::failed_precondition, "the model has no per-layer embeddings");
  if (!m.has_embedding || !m.per_layer_token_embd.present()) {
    return Status(Code::failed_precondition, "per-layer inputs are computed on the first node, which holds "
                                             "per_layer_token_embd and per_layer_model_proj");
  }
  if (n <= 0 || !tokens || !x0 || !out) return Status(Code::invalid_argument, "per_layer_inputs needs n > 0 and buffers");
  const int n_pl = c.n_embd_per_layer, n_layer = c.n_layer;
  const size_t n_pl_all = static_cast<size_t>(n_pl) * n_layer;
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab) {
      return Status(Code::invalid_argument, "token id " + std::to_string(tokens[i]) + " at position " +
                                                std::to_string(i) + " is outside [0, " + std::to_string(c.n_vocab) + ")");
    }
  }
  // [n, n_layer, n_pl], the order llama.cpp builds them in; transposed to layer-major at the end.
  std::vector<float> proj(static_cast<size_t>(n) * n_pl_all);
  LF_RETURN_IF_ERROR(matmul(m.per_layer_model_proj, x0, n, proj.data()));
  const float proj_scale = 1.0f / sqrtf(static_cast<float>(c.n_embd));
  const float token_scale = sqrtf(static_cast<float>(n_pl));
  const float input_scale = 1.0f / sqrtf(2.0f);
  std::vector<float> token_row(n_pl_all);
  for (int t = 0; t < n; ++t) {
    float* q = proj.data() + static_cast<size_t>(t) * n_pl_all;
    for (size_t i = 0; i < n_pl_all; ++i) q[i] *= proj_scale;
    rmsnorm_rows(q, m.per_layer_proj_norm.f32(), n_layer, n_pl, c.norm_eps, q);
    LF_RETURN_IF_ERROR(dequantize_row(m.per_layer_token_embd.type, m.per_layer_token_embd.row(tokens[t]),
                                      token_row.data(), static_cast<int64_t>(n_pl_all)));
    for (int l = 0; l < n_layer; ++l) {
      float* dst = out + (static_cast<size_t>(l) * n + t) * n_pl;
      const float* ql = q + static_cast<size_t>(l) * n_pl;
      const float* pl = token_row.data() + static_cast<size_t>(l) * n_pl;
      for (int j = 0; j < n_pl; ++j) dst[j] = (ql[j] + pl[j] * token_scale) * input_scale;
    }
  }
  return Status();
}

void add_per_layer_branch(const LayerCall& c, int64_t t, float* y) {
  const LayerWeights& w = c.w();
  const int E = c.E(), n_pl = c.c().n_embd_per_layer;
  const Segment& g = c.rows.of_act(t);
  const float* inp = g.s->per_layer_in.data() +
                     (static_cast<size_t>(c.il - c.m.range.begin) * g.n + static_cast<size_t>(c.rows.local(t))) * n_pl;
  std::vector<float> gate(static_cast<size_t>(n_pl)), branch(static_cast<size_t>(E));
  c.check(matmul(w.inp_gate, y, 1, gate.data()));
  for (int j = 0; j < n_pl; ++j) gate[j] = gelu_table(gate[j]) * inp[j];
  c.check(matmul(w.proj, gate.data(), 1, branch.data()));
  rmsnorm(branch.data(), w.post_norm.f32(), E, c.c().norm_eps, branch.data());
  for (int j = 0; j < E; ++j) y[j] += branch[j];
}

}  // namespace lf
