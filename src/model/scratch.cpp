#include "model/scratch.h"

#include <algorithm>
#include <utility>

#include "quant/quant.h"

namespace lf {

ScratchShape scratch_shape(const ModelConfig& c, LayerRange range, std::span<const LayerScratchShape> layers, int n,
                           bool top_k_ffn) {
  ScratchShape s;
  s.rows = static_cast<size_t>(n);
  s.n_embd = static_cast<size_t>(c.n_embd);
  s.top_k_ffn = top_k_ffn;
  for (int il = range.begin; il < range.end; ++il) {
    const LayerConfig& l = c.layers[il];
    const LayerScratchShape& shape = layers[il - range.begin];
    s.q_dim = std::max(s.q_dim, static_cast<size_t>(l.q_dim()));
    s.kv_dim = std::max(s.kv_dim, static_cast<size_t>(l.kv_dim()));
    s.n_ff = std::max(s.n_ff, static_cast<size_t>(l.n_ff));
    s.moe.widen(shape.moe);
    for (size_t i = 0; i < shape.matmul_n_in.size(); ++i) {
      if (shape.matmul_n_in[i] == 0) continue;
      const uint64_t bytes = activation_row_bytes(shape.matmul_type[i], shape.matmul_n_in[i]) * s.rows;
      s.converted[i] = std::max(s.converted[i], static_cast<size_t>(bytes));
    }
  }
  return s;
}

ScratchShape scratch_shape(const Model& m, int n, bool top_k_ffn) {
  std::vector<LayerScratchShape> layers;
  for (int il = m.range.begin; il < m.range.end; ++il) {
    LayerScratchShape& s = layers.emplace_back();
    const std::array<const WeightView*, 7> matmuls = m.layer(il).matmuls();
    for (size_t i = 0; i < matmuls.size(); ++i) {
      s.matmul_type[i] = matmuls[i]->type;
      s.matmul_n_in[i] = matmuls[i]->present() ? matmuls[i]->n_in : 0;
    }
    const LayerWeights& w = m.layer(il);
    const WeightView& exps = m.config.fused_gate_up ? w.ffn_gate_up_exps : w.ffn_gate_exps;
    const WeightView& up = m.config.fused_gate_up ? w.ffn_gate_up_exps : w.ffn_up_exps;
    s.moe = moe_layer_shape(m.config, il, w.ffn_gate_inp.type, exps.type, up.type, w.ffn_down_exps.type);
  }
  return scratch_shape(m.config, m.range, layers, n, top_k_ffn);
}

uint64_t ScratchShape::bytes(int n_workers) const {
  const uint64_t floats = rows * (6 * n_embd + 2 * q_dim + 2 * kv_dim + 3 * n_ff);
  uint64_t total = floats * sizeof(float) + moe.bytes(rows, n_embd);
  for (size_t c : converted) total += c;
  if (top_k_ffn) total += rows * n_ff;
  // Per worker, at most: one KV head's queries and outputs for every row, and select_top_k's keys.
  const uint64_t per_worker = 2 * rows * q_dim * sizeof(float) + (top_k_ffn ? n_ff * sizeof(uint64_t) : 0) +
                              sizeof(Status) + sizeof(ApproxStats);
  return total + per_worker * static_cast<uint64_t>(n_workers);
}

void Scratch::reshape(const ScratchShape& s, int n_workers) {
  const auto fit = [](auto& buffer, size_t n) {
    if (buffer.size() < n) buffer.resize(n);
  };
  const size_t rows = s.rows, E = s.n_embd;
  for (std::vector<float>* b : {&x, &x_next, &attn_norm, &x1, &ffn_in, &proj}) fit(*b, rows * E);
  for (std::vector<float>* b : {&q, &attn_out}) fit(*b, rows * s.q_dim);
  for (std::vector<float>* b : {&k, &v}) fit(*b, rows * s.kv_dim);
  for (std::vector<float>* b : {&gate, &up, &act}) fit(*b, rows * s.n_ff);
  if (s.top_k_ffn) fit(keep, rows * s.n_ff);
  moe.resize(s.moe, rows, E);
  const std::array<std::vector<uint8_t>*, 7> converted = {&xc_q, &xc_k, &xc_v, &xc_o, &xc_gate, &xc_up, &xc_down};
  for (size_t i = 0; i < converted.size(); ++i) fit(*converted[i], s.converted[i]);
  const size_t workers = static_cast<size_t>(n_workers);
  heads_q.resize(workers);
  heads_out.resize(workers);
  errors.assign(workers, Status());
  top_k_keys.resize(workers);
  exit.clear();
  attention_ms = ffn_ms = layers_ms = 0;
  rows_ = std::max(rows_, rows);
}

std::unique_ptr<Scratch> ScratchSpare::take(size_t rows) {
  if (rows < kMinRows) return std::make_unique<Scratch>();
  std::unique_ptr<Scratch> kept(kept_.exchange(nullptr));
  if (kept && kept->rows() >= rows && kept->rows() < 2 * rows) return kept;
  give_back(std::move(kept));
  return std::make_unique<Scratch>();
}

void ScratchSpare::give_back(std::unique_ptr<Scratch> scratch) {
  while (scratch && scratch->rows() >= kMinRows) {
    // The kept one taken out first, so that no other call frees it while the two are compared.
    std::unique_ptr<Scratch> kept(kept_.exchange(nullptr));
    if (kept && kept->rows() > scratch->rows()) std::swap(kept, scratch);
    Scratch* none = nullptr;
    if (kept_.compare_exchange_strong(none, scratch.get())) {
      scratch.release();
      return;
    }
    // another call's buffers went in meanwhile: the larger of those and these is kept
  }
}

}  // namespace lf
