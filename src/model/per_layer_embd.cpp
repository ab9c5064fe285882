#include "model/per_layer_embd.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "model/forward.h"
#include "ops/ops.h"
#include "quant/finite_check.h"
#include "quant/quant.h"

namespace lf {

namespace {

// What both ways of reading the table refuse, before anything is computed.
Status check_call(const Model& m, const int32_t* tokens, int n, const float* x0, float* out) {
  const ModelConfig& c = m.config;
  if (c.n_embd_per_layer <= 0) return Status(Code::failed_precondition, "the model has no per-layer embeddings");
  if (!m.has_embedding) {
    return Status(Code::failed_precondition, "per-layer inputs are computed on the first node, which holds "
                                             "per_layer_model_proj and reads per_layer_token_embd");
  }
  if (n <= 0 || !tokens || !x0 || !out) return Status(Code::invalid_argument, "per_layer_inputs needs n > 0 and buffers");
  return check_vocab_tokens(m, tokens, n);
}

// token_rows [n]: each token's row of per_layer_token_embd in its type -> out [n_layer, n, n_pl]
Status inputs_from_token_rows(const Model& m, int n, const float* x0, const std::vector<const uint8_t*>& token_rows,
                              float* out) {
  const ModelConfig& c = m.config;
  const int n_pl = c.n_embd_per_layer, n_layer = c.n_layer;
  const size_t n_pl_all = static_cast<size_t>(n_pl) * n_layer;
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
    LF_RETURN_IF_ERROR(dequantize_row(m.per_layer_token_embd.type, token_rows[t], token_row.data(),
                                      static_cast<int64_t>(n_pl_all)));
    for (int l = 0; l < n_layer; ++l) {
      float* dst = out + (static_cast<size_t>(l) * n + t) * n_pl;
      const float* ql = q + static_cast<size_t>(l) * n_pl;
      const float* pl = token_row.data() + static_cast<size_t>(l) * n_pl;
      for (int j = 0; j < n_pl; ++j) dst[j] = (ql[j] + pl[j] * token_scale) * input_scale;
    }
  }
  return Status();
}

// rows' bytes checked against the table's row size and vocabulary -> each token's row [n]
Status find_token_rows(const Model& m, const int32_t* tokens, int n, const PerLayerRows& rows,
                       std::vector<const uint8_t*>* out) {
  const WeightView& table = m.per_layer_token_embd;
  if (rows.row_bytes != table.row_bytes) {
    TypeTraits traits{};
    type_traits(static_cast<uint32_t>(table.type), &traits);
    return Status(Code::invalid_argument, "per_layer_token_embd rows of " + std::to_string(rows.row_bytes) +
                                              " bytes were given, but its rows are " + std::to_string(table.row_bytes) +
                                              " bytes (" + std::to_string(table.n_in) + " values of " + traits.name + ")");
  }
  if (rows.n_rows < 0 || (rows.n_rows > 0 && (!rows.ids || !rows.data))) {
    return Status(Code::invalid_argument, "per_layer_token_embd rows need n_rows >= 0, their ids and their bytes");
  }
  std::vector<std::pair<int32_t, int>> by_id(static_cast<size_t>(rows.n_rows));  // (id, row index), sorted
  for (int i = 0; i < rows.n_rows; ++i) {
    if (rows.ids[i] < 0 || rows.ids[i] >= m.config.n_vocab) {
      return Status(Code::invalid_argument, "per_layer_token_embd row " + std::to_string(i) + " is of token id " +
                                                std::to_string(rows.ids[i]) + ", outside [0, " +
                                                std::to_string(m.config.n_vocab) + ")");
    }
    by_id[i] = {rows.ids[i], i};
  }
  std::sort(by_id.begin(), by_id.end());
  for (size_t i = 1; i < by_id.size(); ++i) {
    if (by_id[i].first == by_id[i - 1].first) {
      return Status(Code::invalid_argument, "the per_layer_token_embd row of token id " + std::to_string(by_id[i].first) +
                                                " was given twice (rows " + std::to_string(by_id[i - 1].second) + " and " +
                                                std::to_string(by_id[i].second) + ")");
    }
  }
  // A row of NaN or inf would make every output NaN, as a table of them would (load_model).
  LF_RETURN_IF_ERROR(check_finite_tensor("per_layer_token_embd.weight (rows given)", table.type, rows.data, table.n_in,
                                         rows.n_rows));
  out->resize(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) {
    const auto it = std::lower_bound(by_id.begin(), by_id.end(), std::make_pair(tokens[t], 0));
    if (it == by_id.end() || it->first != tokens[t]) {
      return Status(Code::invalid_argument, "no per_layer_token_embd row was given for token id " +
                                                std::to_string(tokens[t]) + " at position " + std::to_string(t));
    }
    (*out)[t] = rows.data + static_cast<uint64_t>(it->second) * rows.row_bytes;
  }
  return Status();
}

}  // namespace

Status per_layer_inputs(const Model& m, const int32_t* tokens, int n, const float* x0, float* out) {
  LF_RETURN_IF_ERROR(check_call(m, tokens, n, x0, out));
  if (m.per_layer_rows_from_host) {
    return Status(Code::failed_precondition, "this node reads per_layer_token_embd by rows, it does not hold the "
                                             "table: call per_layer_inputs_from_rows with the rows of the tokens");
  }
  std::vector<const uint8_t*> token_rows(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) token_rows[t] = m.per_layer_token_embd.row(tokens[t] - m.vocab_begin);
  return inputs_from_token_rows(m, n, x0, token_rows, out);
}

Status per_layer_inputs_from_rows(const Model& m, const int32_t* tokens, int n, const float* x0,
                                  const PerLayerRows& rows, float* out) {
  LF_RETURN_IF_ERROR(check_call(m, tokens, n, x0, out));
  std::vector<const uint8_t*> token_rows;
  LF_RETURN_IF_ERROR(find_token_rows(m, tokens, n, rows, &token_rows));
  return inputs_from_token_rows(m, n, x0, token_rows, out);
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
