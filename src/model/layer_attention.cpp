// The layer's attention block on one worker: its norm and the conversions for Q/K/V, then per
// attention unit (docs/threads.md) the projections, per-head norms, RoPE, the KV cache and
// attention, and the residual after W_o.
#include <algorithm>

#include "kernels/attention.h"
#include "model/layer.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {
namespace {

const uint8_t* xc_k(const LayerCall& c) {
  return same_conversion(c.w().attn_k, c.w().attn_q) ? c.b.xc_q.data() : c.b.xc_k.data();
}
const uint8_t* xc_v(const LayerCall& c) {
  if (same_conversion(c.w().attn_v, c.w().attn_q)) return c.b.xc_q.data();
  return same_conversion(c.w().attn_v, c.w().attn_k) ? xc_k(c) : c.b.xc_v.data();
}

// The KV heads [kv0, kv1) of this worker's attention units.
struct KvHeads {
  int kv0 = 0, kv1 = 0;
  int count() const { return kv1 - kv0; }
};

// q [n_act, n_head, D], the query heads of kv: projection, per-head norm, RoPE; gemma3 folds
// the attention scale into Q here. The act rows' inputs are runs of consecutive x rows (one run
// unless some session's rows start past row0 or end in an exited row): one GEMM per run.
void queries(const LayerCall& c, KvHeads kv) {
  const LayerConfig& l = c.l();
  const int D = l.head_dim, group = l.n_head / l.n_head_kv, n_heads = kv.count() * group;
  const float* freq_factors = l.use_freq_factors ? c.m.rope_freqs.f32() : nullptr;
  const uint64_t xc_row = activation_row_bytes(c.w().attn_q.type, c.w().attn_q.n_in);
  const int64_t q0 = static_cast<int64_t>(kv.kv0) * group * D, q1 = static_cast<int64_t>(kv.kv1) * group * D;
  const std::vector<Segment>& segments = c.rows.segments;
  for (size_t i = 0; i < segments.size();) {
    const int64_t x_first = segments[i].x0 + segments[i].row0, a_first = segments[i].a0;
    int64_t x_end = x_first + segments[i].n_act();
    for (++i; i < segments.size() && segments[i].x0 + segments[i].row0 == x_end; ++i) x_end += segments[i].n_act();
    if (x_end == x_first) continue;
    matmul_rows(c.w().attn_q, c.b.xc_q.data() + xc_row * static_cast<uint64_t>(x_first), static_cast<int>(x_end - x_first),
                row(c.b.q, a_first, l.q_dim()), q0, q1);
  }
  for (int t = 0; t < c.n_act(); ++t) {
    float* qt = row(c.b.q, t, l.q_dim()) + q0;
    rmsnorm_rows(qt, c.w().attn_q_norm.f32(), n_heads, D, c.c().norm_eps, qt);
    rope_neox(qt, n_heads, D, l.n_rot, c.rows.act_pos(t), l.rope_base, l.rope_freq_scale, freq_factors);
    if (c.c().arch == Arch::gemma3) {
      for (int64_t i = 0; i < q1 - q0; ++i) qt[i] *= c.c().query_scale;
    }
  }
}

// k, v [n, n_head_kv, D], the KV heads kv of every row. Without attn_v, V is the K projection
// before its norm and RoPE; gemma4 RMS-normalizes V without a weight.
void keys_and_values(const LayerCall& c, KvHeads kv) {
  const LayerConfig& l = c.l();
  const int D = l.head_dim;
  const float* freq_factors = l.use_freq_factors ? c.m.rope_freqs.f32() : nullptr;
  const int64_t k0 = static_cast<int64_t>(kv.kv0) * D, k1 = static_cast<int64_t>(kv.kv1) * D;
  matmul_rows(c.w().attn_k, xc_k(c), c.n(), c.b.k.data(), k0, k1);
  if (l.has_v) matmul_rows(c.w().attn_v, xc_v(c), c.n(), c.b.v.data(), k0, k1);
  for (const Segment& g : c.rows.segments) {
    for (int i = 0; i < g.n; ++i) {
      float* kt = row(c.b.k, g.x0 + i, l.kv_dim()) + k0;
      float* vt = row(c.b.v, g.x0 + i, l.kv_dim()) + k0;
      if (!l.has_v) std::copy(kt, kt + (k1 - k0), vt);
      rmsnorm_rows(kt, c.w().attn_k_norm.f32(), kv.count(), D, c.c().norm_eps, kt);
      rope_neox(kt, kv.count(), D, l.n_rot, g.pos0 + i, l.rope_base, l.rope_freq_scale, freq_factors);
      if (c.c().arch == Arch::gemma4) rmsnorm_rows(vt, nullptr, kv.count(), D, c.c().norm_eps, vt);
    }
  }
}

// KV head h's query heads hq [n_rows, group, D] of session g, its rows from first, over its
// cache -> ho, exact or (approx.h) truncated; the truncated kernel adds to the head's statistics.
void attend(const LayerCall& c, const Segment& g, const float* hq, int n_rows, int first, int h, const KvView& kv,
            AttentionWorkspace* ws, float* ho) {
  const LayerConfig& l = c.l();
  const int group = l.n_head / l.n_head_kv;
  const int n_swa = l.sliding ? c.c().n_swa : 0;
  const ApproxOptions& approx = g.s->approx;
  if (approx.truncated_attention) {
    attention_truncated(hq, n_rows, g.pos0 + first, group, kv, n_swa, 1.0f, approx.truncation_threshold, ho, ws,
                        &g.s->last.attention_approx[c.il - c.m.range.begin][h]);
  } else {
    attention_tiled(hq, n_rows, g.pos0 + first, group, kv, n_swa, 1.0f, ho, ws);
  }
}

// Session g's rows: chunks of at most attn_chunk positions are stored and then attended, so a
// sliding ring never loses a key a query of the chunk still needs. The attention op reads one
// KV head at a time: its query heads are gathered into [n_rows, group, D] and scattered back
// into attn_out.
void cache_and_attend(const LayerCall& c, const Segment& g, KvHeads kv, AttentionWorkspace* workspace) {
  const LayerConfig& l = c.l();
  const int D = l.head_dim, group = l.n_head / l.n_head_kv;
  const size_t head_cols = static_cast<size_t>(group) * D;
  std::vector<float>& hq = c.b.heads_q[c.worker];
  std::vector<float>& ho = c.b.heads_out[c.worker];
  hq.resize(std::max(hq.size(), static_cast<size_t>(g.n_q()) * head_cols));
  ho.resize(hq.size());
  for (int h = kv.kv0; h < kv.kv1; ++h) g.s->last.attention_approx[c.il - c.m.range.begin][h] = ApproxStats();
  KvCache& cache = g.s->kv;
  // A shared-KV layer attends over the cache its source layer filled earlier in this call.
  const int kv_layer = l.kv_layer;
  // With a quantized cache, llama.cpp rotates Q and K (and V, then the output back) by a
  // Hadamard matrix before they meet (kv_rotation): the rotation spreads outliers over a block
  // so that they quantize better. A rotation is its own inverse.
  const int k_rot = cache.rotation(kv_layer).k, v_rot = cache.rotation(kv_layer).v;
  std::vector<float> k_row(D), v_row(D);
  for (int c0 = 0; c0 < g.n; c0 += cache.attn_chunk()) {
    const int c1 = std::min(g.n, c0 + cache.attn_chunk());
    for (int t = c0; t < c1 && !l.shares_kv; ++t) {
      for (int h = kv.kv0; h < kv.kv1; ++h) {
        const float* k = row(c.b.k, g.x0 + t, l.kv_dim()) + h * D;
        const float* v = row(c.b.v, g.x0 + t, l.kv_dim()) + h * D;
        k_row.assign(k, k + D);
        v_row.assign(v, v + D);
        if (k_rot > 0) hadamard_rotate(k_row.data(), D, k_rot);
        if (v_rot > 0) hadamard_rotate(v_row.data(), D, v_rot);
        cache.store(c.il, h, g.pos0 + t, k_row.data(), v_row.data());
      }
    }
    const int first = std::max(c0, g.row0), last = std::min(c1, g.row0 + g.n_act());
    if (first >= last) continue;
    const int n_rows = last - first;
    const int a_first = g.a0 + (first - g.row0);
    for (int h = kv.kv0; h < kv.kv1; ++h) {
      const size_t col = static_cast<size_t>(h) * head_cols;
      for (int i = 0; i < n_rows; ++i) {
        const float* src = row(c.b.q, a_first + i, l.q_dim()) + col;
        std::copy(src, src + head_cols, hq.data() + i * head_cols);
      }
      if (k_rot > 0) hadamard_rotate(hq.data(), n_rows * static_cast<int>(head_cols), k_rot);
      attend(c, g, hq.data(), n_rows, first, h, cache.view(kv_layer, h, g.pos0 + c1), workspace, ho.data());
      if (v_rot > 0) hadamard_rotate(ho.data(), n_rows * static_cast<int>(head_cols), v_rot);
      for (int i = 0; i < n_rows; ++i) {
        const float* src = ho.data() + i * head_cols;
        std::copy(src, src + head_cols, row(c.b.attn_out, a_first + i, l.q_dim()) + col);
      }
    }
  }
}

}  // namespace

void project_queries(const LayerCall& c, int kv0, int kv1) { queries(c, KvHeads{kv0, kv1}); }

// Every row's pre-attention norm (K and V of every position go to the cache), this worker's
// rows, converted for the Q/K/V projections.
void attention_input(const LayerCall& c) {
  const LayerWeights& w = c.w();
  const Share rows = c.my_share(c.n());
  for (int64_t t = rows.begin; t < rows.end; ++t) {
    rmsnorm(row(c.x, t, c.E()), w.attn_norm.f32(), c.E(), c.c().norm_eps, row(c.b.attn_norm, t, c.E()));
  }
  c.check(convert_rows(w.attn_q, c.b.attn_norm.data(), rows, c.b.xc_q.data()));
  if (c.l().shares_kv) return;
  if (!same_conversion(w.attn_k, w.attn_q)) c.check(convert_rows(w.attn_k, c.b.attn_norm.data(), rows, c.b.xc_k.data()));
  if (c.l().has_v && !same_conversion(w.attn_v, w.attn_q) && !same_conversion(w.attn_v, w.attn_k)) {
    c.check(convert_rows(w.attn_v, c.b.attn_norm.data(), rows, c.b.xc_v.data()));
  }
}

std::pair<int, int> attend_units(const LayerCall& c) {
  const Share units = c.my_share(c.plan().attn.n_units);
  if (units.begin == units.end) return {0, 0};
  const KvHeads kv{static_cast<int>(units.begin) * c.plan().kv_per_unit, static_cast<int>(units.end) * c.plan().kv_per_unit};
  queries(c, kv);
  if (!c.l().shares_kv) keys_and_values(c, kv);
  AttentionWorkspace workspace;
  for (const Segment& g : c.rows.segments) cache_and_attend(c, g, kv, &workspace);
  return {kv.kv0, kv.kv1};
}

// This worker's attention units -> their columns of attn_out [n_act, n_head · D], converted for
// attn_output (whole once project_rows has passed its first barrier).
void attention_heads(const LayerCall& c) {
  const auto [kv0, kv1] = attend_units(c);
  if (kv0 == kv1) return;
  const KvHeads kv{kv0, kv1};
  const int64_t cols_per_kv = static_cast<int64_t>(c.l().n_head / c.l().n_head_kv) * c.l().head_dim;
  c.check(convert_columns(c.w().attn_output, c.b.attn_out.data(), c.n_act(), kv.kv0 * cols_per_kv, kv.kv1 * cols_per_kv,
                          c.b.xc_o.data()));
}

// Token t: x1 = post_attention_norm(proj) + x, then the FFN norm, converted for gate and up.
void attention_residual(const LayerCall& c, int64_t t) {
  const LayerWeights& w = c.w();
  const int E = c.E();
  float* x1 = row(c.b.x1, t, E);
  const float* x = row(c.x, c.rows.act_x(t), E);
  rmsnorm(row(c.b.proj, t, E), w.post_attention_norm.f32(), E, c.c().norm_eps, x1);
  for (int j = 0; j < E; ++j) x1[j] += x[j];
  rmsnorm(x1, w.ffn_norm.f32(), E, c.c().norm_eps, row(c.b.ffn_in, t, E));
  c.check(convert_rows(w.ffn_gate, c.b.ffn_in.data(), Share{t, t + 1}, c.b.xc_gate.data()));
  if (!same_conversion(w.ffn_up, w.ffn_gate)) c.check(convert_rows(w.ffn_up, c.b.ffn_in.data(), Share{t, t + 1}, c.b.xc_up.data()));
}

}  // namespace lf
