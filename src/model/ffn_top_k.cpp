// The top-K gate FFN (approx.h, docs/approximate.md): per token only the features of largest
// |gelu(gate)| keep their up projection and their share of ffn_down, unless the dropped share of
// the gate's mass is above the threshold, when the token runs dense.
#include <algorithm>

#include "model/layer.h"
#include "ops/ops.h"

namespace lf {
namespace {

// This worker's units' rows of gate -> act [n_q, n_ff] = gelu(gate).
void gate(const LayerCall& c, int64_t f0, int64_t f1) {
  const int n_ff = c.l().n_ff;
  matmul_rows(c.w().ffn_gate, c.b.xc_gate.data(), c.n_act(), c.b.gate.data(), f0, f1);
  for (int t = 0; t < c.n_act(); ++t) {
    const float* g = row(c.b.gate, t, n_ff);
    float* a = row(c.b.act, t, n_ff);
    for (int64_t f = f0; f < f1; ++f) a[f] = gelu_table(g[f]);
  }
}

// This worker's tokens: keep [t, n_ff] marks the top_k features of largest |gelu(gate)|, or
// every feature when the dropped share of Σ|gelu(gate)| exceeds the threshold (or is NaN).
// A row of a session without the mode keeps every feature (the dense FFN's bytes) and is not
// counted.
void select_features(const LayerCall& c) {
  const Share rows = c.my_share(c.n_act());
  const int n_ff = c.l().n_ff;
  for (int64_t t = rows.begin; t < rows.end; ++t) {
    uint8_t* keep = c.b.keep.data() + t * n_ff;
    const ApproxOptions& approx = c.session(t).approx;
    if (!approx.top_k_ffn_on()) {
      std::fill(keep, keep + n_ff, uint8_t{1});
      continue;
    }
    const int top_k = approx.ffn_keep(c.il, n_ff);
    ApproxStats& stats = c.b.ffn_stats[c.worker][static_cast<size_t>(c.rows.act_segment[t])];
    const double dropped = select_top_k(row(c.b.act, t, n_ff), n_ff, top_k, &c.b.top_k_keys[c.worker], keep);
    const bool fall_back = !(dropped <= approx.ffn_top_k_threshold);
    if (fall_back) std::fill(keep, keep + n_ff, uint8_t{1});
    stats.ffn_rows += 1;
    stats.ffn_fallback_rows += fall_back;
    stats.ffn_features_total += n_ff;
    stats.ffn_features_kept += fall_back ? n_ff : top_k;
    if (!fall_back) stats.max_dropped_gate_mass = std::max(stats.max_dropped_gate_mass, dropped);
  }
}

// This worker's units: rows of up for the features some token keeps, in runs, then
// act = gelu(gate) · up where kept, 0 elsewhere (so ffn_down skips those features' columns).
// A kept feature's act is GeGLU's bytes: the same row products and the same f32 product.
void up_kept(const LayerCall& c, int64_t f0, int64_t f1) {
  const int n_ff = c.l().n_ff, n_act = c.n_act();
  auto kept_by_any = [&](int64_t f) {
    for (int t = 0; t < n_act; ++t) {
      if (c.b.keep[static_cast<size_t>(t) * n_ff + f]) return true;
    }
    return false;
  };
  for (int64_t f = f0; f < f1;) {
    if (!kept_by_any(f)) {
      ++f;
      continue;
    }
    int64_t end = f + 1;
    while (end < f1 && kept_by_any(end)) ++end;
    matmul_rows(c.w().ffn_up, xc_up(c), n_act, c.b.up.data(), f, end);
    f = end;
  }
  for (int t = 0; t < n_act; ++t) {
    const uint8_t* keep = c.b.keep.data() + static_cast<size_t>(t) * n_ff;
    const float* up = row(c.b.up, t, n_ff);
    float* a = row(c.b.act, t, n_ff);
    for (int64_t f = f0; f < f1; ++f) a[f] = keep[f] ? a[f] * up[f] : 0.0f;
  }
}

}  // namespace

void top_k_ffn(const LayerCall& c) {
  const auto [f0, f1] = my_features(c);
  gate(c, f0, f1);
  c.sync();
  select_features(c);
  c.sync();
  up_kept(c, f0, f1);
  convert_act(c, f0, f1);
}

}  // namespace lf
