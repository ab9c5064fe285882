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

// Query heads [h0, h1).
struct QueryHeads {
  int h0 = 0, h1 = 0;
  int count() const { return h1 - h0; }
};

// q [n_act, n_head, D], the query heads qh: projection, per-head norm, RoPE; gemma3 folds the
// attention scale into Q here. The act rows' inputs are runs of consecutive x rows (one run
// unless some session's rows start past row0 or end in an exited row): one GEMM per run.
void queries(const LayerCall& c, QueryHeads qh) {
  const LayerConfig& l = c.l();
  const int D = l.head_dim;
  const float* freq_factors = l.use_freq_factors ? c.m.rope_freqs.f32() : nullptr;
  const uint64_t xc_row = activation_row_bytes(c.w().attn_q.type, c.w().attn_q.n_in);
  const int64_t q0 = static_cast<int64_t>(qh.h0) * D, q1 = static_cast<int64_t>(qh.h1) * D;
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
    rmsnorm_rows(qt, c.w().attn_q_norm.f32(), qh.count(), D, c.c().norm_eps, qt);
    rope_neox(qt, qh.count(), D, l.n_rot, c.rows.act_pos(t), l.rope_base, l.rope_freq_scale, freq_factors);
    if (c.c().arch == Arch::gemma3) {
      for (int64_t i = 0; i < q1 - q0; ++i) qt[i] *= c.c().query_scale;
    }
  }
}

// The query heads that read KV heads kv.
QueryHeads heads_of(const LayerCall& c, KvHeads kv) {
  const int group = c.l().n_head / c.l().n_head_kv;
  return {kv.kv0 * group, kv.kv1 * group};
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

// n_heads query heads hq [n_rows, n_heads, D] of KV head h, session g, its rows from first, over
// its cache -> ho, exact or (approx.h) truncated; the truncated kernel adds to the head's
// statistics. A media span is always a call of its own, as llama.cpp decodes an image: with an
// f16 cache it takes llama.cpp's tiled path where llama.cpp does (64 rows and more), which a
// text call never does, so that a text prompt's bytes do not depend on how it is cut into calls.
void attend(const LayerCall& c, const Segment& g, const float* hq, int n_rows, int n_heads, int first, int h,
            const KvView& kv, AttentionWorkspace* ws, float* ho) {
  const LayerConfig& l = c.l();
  const KeyMask mask = !l.sliding ? KeyMask() : g.span ? KeyMask(c.c().n_swa, g.pos0, g.pos0 + g.n) : KeyMask(c.c().n_swa);
  const ApproxOptions& approx = g.s->approx;
  const bool f16 = kv.k_type == GgmlType::F16 && kv.v_type == GgmlType::F16;
  if (g.span && f16 && takes_f32_tiles(g.n, l.head_dim) && !approx.truncated_attention) {
    attention_f32_tiles(hq, n_rows, g.pos0 + first, n_heads, kv, mask, 1.0f, ho, ws);
  } else if (approx.truncated_attention) {
    attention_truncated(hq, n_rows, g.pos0 + first, n_heads, kv, mask, 1.0f, approx.truncation_threshold, ho, ws,
                        &g.s->last.attention_approx[c.il - c.m.range.begin][h]);
  } else {
    attention_tiled(hq, n_rows, g.pos0 + first, n_heads, kv, mask, 1.0f, ho, ws);
  }
}

// Session g's rows [c0, c1) of KV heads kv into the cache (a shared-KV layer stores none: it
// attends over the cache its source layer filled earlier in this call). With a quantized
// cache, llama.cpp rotates Q and K (and V, then the output back) by a Hadamard matrix before
// they meet (kv_rotation): the rotation spreads outliers over a block so that they quantize
// better. A rotation is its own inverse.
void store_chunk(const LayerCall& c, const Segment& g, KvHeads kv, int c0, int c1) {
  const LayerConfig& l = c.l();
  if (l.shares_kv) return;
  const int D = l.head_dim;
  KvCache& cache = g.s->kv;
  const int k_rot = cache.rotation(l.kv_layer).k, v_rot = cache.rotation(l.kv_layer).v;
  std::vector<float> k_row(D), v_row(D);
  for (int t = c0; t < c1; ++t) {
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
}

// Session g's act rows among [c0, c1), query heads qh, over the cache as it stands -> their
// columns of attn_out. The attention op reads one KV head at a time: its query heads of qh are
// gathered into [n_rows, heads, D] and scattered back.
void attend_chunk(const LayerCall& c, const Segment& g, QueryHeads qh, int c0, int c1, AttentionWorkspace* workspace) {
  const LayerConfig& l = c.l();
  const int first = std::max(c0, g.row0), last = std::min(c1, g.row0 + g.n_act());
  if (first >= last || qh.count() == 0) return;
  const int D = l.head_dim, group = l.n_head / l.n_head_kv, n_rows = last - first;
  const int a_first = g.a0 + (first - g.row0);
  std::vector<float>& hq = c.b.heads_q[c.worker];
  std::vector<float>& ho = c.b.heads_out[c.worker];
  hq.resize(std::max(hq.size(), static_cast<size_t>(g.n_q()) * group * D));
  ho.resize(hq.size());
  const KvCache& cache = g.s->kv;
  const int k_rot = cache.rotation(l.kv_layer).k, v_rot = cache.rotation(l.kv_layer).v;
  for (int h = qh.h0 / group; h * group < qh.h1; ++h) {
    const int h0 = std::max(qh.h0, h * group), h1 = std::min(qh.h1, (h + 1) * group);
    const size_t cols = static_cast<size_t>(h1 - h0) * D, col = static_cast<size_t>(h0) * D;
    for (int i = 0; i < n_rows; ++i) {
      const float* src = row(c.b.q, a_first + i, l.q_dim()) + col;
      std::copy(src, src + cols, hq.data() + i * cols);
    }
    if (k_rot > 0) hadamard_rotate(hq.data(), n_rows * static_cast<int>(cols), k_rot);
    attend(c, g, hq.data(), n_rows, h1 - h0, first, h, cache.view(l.kv_layer, h, g.pos0 + c1), workspace, ho.data());
    if (v_rot > 0) hadamard_rotate(ho.data(), n_rows * static_cast<int>(cols), v_rot);
    for (int i = 0; i < n_rows; ++i) {
      const float* src = ho.data() + i * cols;
      std::copy(src, src + cols, row(c.b.attn_out, a_first + i, l.q_dim()) + col);
    }
  }
}

// The positions of session g's rows stored before their queries attend: at most attn_chunk, so
// that a sliding ring never loses a key a query of the chunk still needs; a media span whole,
// since each of its rows sees the keys of all of them (validate_entry keeps it within attn_chunk).
int attention_chunk(const Segment& g) { return g.span ? g.n : g.s->kv.attn_chunk(); }

// Session g's rows, chunk by chunk (attention_chunk): stored, then attended.
void cache_and_attend(const LayerCall& c, const Segment& g, KvHeads kv, AttentionWorkspace* workspace) {
  for (int h = kv.kv0; h < kv.kv1; ++h) g.s->last.attention_approx[c.il - c.m.range.begin][h] = ApproxStats();
  const int chunk = attention_chunk(g);
  for (int c0 = 0; c0 < g.n; c0 += chunk) {
    const int c1 = std::min(g.n, c0 + chunk);
    store_chunk(c, g, kv, c0, c1);
    attend_chunk(c, g, heads_of(c, kv), c0, c1, workspace);
  }
}

// Where a layer has fewer attention units than there are workers (one KV head in each of
// E2B's layers), the units' workers would attend alone while the others wait. Then every
// worker takes a share of the query heads, in parts whose columns fill whole blocks of
// attn_output, and computes and stores the K/V of the KV heads whose first query head is its
// own; each chunk's rows are stored, the workers meet, and each attends its query heads. Each
// (row, head)'s attention is the same arithmetic whichever worker runs it. Truncated
// attention keeps statistics per KV head, so a call with it keeps to units.
bool splits_query_heads(const LayerCall& c) {
  if (c.plan().attn.n_units >= c.n_workers() || c.plan().query_parts == 0) return false;
  for (const Segment& g : c.rows.segments) {
    if (g.s->approx.truncated_attention) return false;
  }
  return true;
}

QueryHeads attend_query_parts(const LayerCall& c) {
  const LayerConfig& l = c.l();
  const int group = l.n_head / l.n_head_kv, heads_per_part = l.n_head / c.plan().query_parts;
  const Share parts = c.my_share(c.plan().query_parts);
  const QueryHeads qh{static_cast<int>(parts.begin) * heads_per_part, static_cast<int>(parts.end) * heads_per_part};
  const KvHeads kv{(qh.h0 + group - 1) / group, (qh.h1 + group - 1) / group};
  if (qh.count() > 0) queries(c, qh);
  if (!l.shares_kv && kv.count() > 0) keys_and_values(c, kv);
  int n_chunks = 0;
  for (const Segment& g : c.rows.segments) {
    for (int h = kv.kv0; h < kv.kv1; ++h) g.s->last.attention_approx[c.il - c.m.range.begin][h] = ApproxStats();
    n_chunks = std::max(n_chunks, (g.n + attention_chunk(g) - 1) / attention_chunk(g));
  }
  AttentionWorkspace workspace;
  for (int k = 0; k < n_chunks; ++k) {
    // Before a chunk is stored, every worker is done with the last one: its rows may overwrite
    // ring slots the last chunk's queries read.
    if (k > 0 && !l.shares_kv) c.sync();
    for (const Segment& g : c.rows.segments) {
      const int chunk = attention_chunk(g), c0 = k * chunk;
      if (c0 < g.n) store_chunk(c, g, kv, c0, std::min(g.n, c0 + chunk));
    }
    if (!l.shares_kv) c.sync();
    for (const Segment& g : c.rows.segments) {
      const int chunk = attention_chunk(g), c0 = k * chunk;
      if (c0 < g.n) attend_chunk(c, g, qh, c0, std::min(g.n, c0 + chunk), &workspace);
    }
  }
  return qh;
}

}  // namespace

void project_queries(const LayerCall& c, int h0, int h1) { queries(c, QueryHeads{h0, h1}); }

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
  queries(c, heads_of(c, kv));
  if (!c.l().shares_kv) keys_and_values(c, kv);
  AttentionWorkspace workspace;
  for (const Segment& g : c.rows.segments) cache_and_attend(c, g, kv, &workspace);
  return {kv.kv0, kv.kv1};
}

// This worker's attention units, or its query heads (splits_query_heads) -> their columns of
// attn_out [n_act, n_head · D], converted for attn_output (whole once project_rows has passed
// its first barrier).
void attention_heads(const LayerCall& c) {
  QueryHeads qh;
  if (splits_query_heads(c)) {
    qh = attend_query_parts(c);
  } else {
    const auto [kv0, kv1] = attend_units(c);
    qh = heads_of(c, KvHeads{kv0, kv1});
  }
  if (qh.count() == 0) return;
  const int64_t D = c.l().head_dim;
  c.check(convert_columns(c.w().attn_output, c.b.attn_out.data(), c.n_act(), qh.h0 * D, qh.h1 * D, c.b.xc_o.data()));
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
