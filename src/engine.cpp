#include "layerfold/engine.h"

#include <algorithm>
#include <chrono>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "layerfold/attention_kernel.h"
#include "layerfold/ops.h"
#include "layerfold/quant.h"
#include "layerfold/thread_pool.h"

namespace lf {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Tokens per pass of the unit partial products: partial sums then need [units, 32, n_embd]
// floats whatever the prompt length, and 32 rows still reuse each weight row well.
constexpr int kTokenBlock = 32;

// Buffers of one forward call, sized once for the largest layer of the range and shared by the
// workers; each phase writes disjoint parts (rows, columns or units) of them.
struct Scratch {
  explicit Scratch(const Model& m, int n, int n_workers, bool top_k_ffn) {
    const ModelConfig& c = m.config;
    const size_t rows = static_cast<size_t>(n), E = static_cast<size_t>(c.n_embd);
    size_t q_dim = 0, kv_dim = 0, n_ff = 0, units = 1;
    for (int il = m.range.begin; il < m.range.end; ++il) {
      const LayerConfig& l = c.layers[il];
      q_dim = std::max(q_dim, static_cast<size_t>(l.q_dim()));
      kv_dim = std::max(kv_dim, static_cast<size_t>(l.kv_dim()));
      n_ff = std::max(n_ff, static_cast<size_t>(l.n_ff));
      units = std::max({units, static_cast<size_t>(m.shard(il).attn.n_units), static_cast<size_t>(m.shard(il).ffn.n_units)});
    }
    x.resize(rows * E);
    x_next.resize(rows * E);
    attn_norm.resize(rows * E);
    x1.resize(rows * E);
    ffn_in.resize(rows * E);
    proj.resize(rows * E);
    q.resize(rows * q_dim);
    attn_out.resize(rows * q_dim);
    k.resize(rows * kv_dim);
    v.resize(rows * kv_dim);
    gate.resize(rows * n_ff);
    up.resize(rows * n_ff);
    act.resize(rows * n_ff);
    if (top_k_ffn) keep.resize(rows * n_ff);
    token_block = std::min(n, kTokenBlock);
    partial.resize(units * static_cast<size_t>(token_block) * E);
    for (int il = m.range.begin; il < m.range.end; ++il) {
      const LayerWeights& w = m.layer(il);
      for (auto [xc, W] : {std::pair{&xc_q, &w.attn_q}, {&xc_k, &w.attn_k}, {&xc_v, &w.attn_v}, {&xc_o, &w.attn_output},
                           {&xc_gate, &w.ffn_gate}, {&xc_up, &w.ffn_up}, {&xc_down, &w.ffn_down}}) {
        if (W->present()) xc->resize(std::max(xc->size(), static_cast<size_t>(activation_row_bytes(W->type, W->n_in) * rows)));
      }
    }
    heads_q.resize(static_cast<size_t>(n_workers));
    heads_out.resize(static_cast<size_t>(n_workers));
    errors.resize(static_cast<size_t>(n_workers));
    top_k_keys.resize(static_cast<size_t>(n_workers));
    ffn_stats.resize(static_cast<size_t>(n_workers));
  }

  std::vector<float> x, x_next;              // [n, n_embd] residual stream into / out of a layer
  std::vector<float> attn_norm;              // [n, n_embd]
  std::vector<float> q, attn_out;            // [n_q, n_head · D]
  std::vector<float> k, v;                   // [n, n_head_kv · D]
  std::vector<float> x1, ffn_in;             // [n_q, n_embd] after the attention residual; its FFN norm
  std::vector<float> gate, up, act;          // [n_q, n_ff]
  std::vector<float> proj;                   // [n_q, n_embd] a reduced projection: W_o, then W_down
  int token_block = 0;                       // min(n, kTokenBlock)
  std::vector<float> partial;                // [units, token_block, n_embd] one partial product per unit
  std::vector<uint8_t> xc_q, xc_k, xc_v;     // attn_norm [n, n_embd] converted for attn_q / attn_k / attn_v
  std::vector<uint8_t> xc_o;                 // attn_out converted for attn_output
  std::vector<uint8_t> xc_gate, xc_up;       // ffn_in converted for ffn_gate / ffn_up
  std::vector<uint8_t> xc_down;              // act converted for ffn_down
  std::vector<std::vector<float>> heads_q;   // [workers][n_q, heads per KV head, D] queries of one KV head
  std::vector<std::vector<float>> heads_out; // [workers] the same heads' attention output
  std::vector<Status> errors;                // [workers] first failure of each worker
  std::vector<uint8_t> keep;                 // [n_q, n_ff] top-K FFN: 1 where a feature is kept
  std::vector<std::vector<uint64_t>> top_k_keys;  // [workers] select_top_k's scratch
  std::vector<ApproxStats> ffn_stats;        // [workers] the top-K FFN's statistics of the worker's rows
  ExitState exit;                            // worker 0's early-exit state of the last row
  double attention_ms = 0, ffn_ms = 0;       // worker 0's view, summed over layers
};

// X rows [t0, t1) [n_in] -> Xc rows in W's vec_dot type.
Status convert_rows(const WeightView& W, const float* X, Share rows, uint8_t* Xc) {
  const uint64_t row = activation_row_bytes(W.type, W.n_in);
  for (int64_t t = rows.begin; t < rows.end; ++t) {
    LF_RETURN_IF_ERROR(convert_activation_row(W.type, X + t * W.n_in, Xc + row * static_cast<uint64_t>(t), W.n_in));
  }
  return Status();
}

// X rows [0, n_rows) [W.n_in], columns [k0, k1) on block boundaries -> the same columns of the Xc
// rows: the bytes convert_rows makes there, since every activation type converts block by block.
Status convert_columns(const WeightView& W, const float* X, int n_rows, int64_t k0, int64_t k1, uint8_t* Xc) {
  const uint64_t row = activation_row_bytes(W.type, W.n_in), skip = activation_row_bytes(W.type, k0);
  for (int t = 0; t < n_rows && k0 < k1; ++t) {
    LF_RETURN_IF_ERROR(convert_activation_row(W.type, X + t * W.n_in + k0, Xc + row * static_cast<uint64_t>(t) + skip, k1 - k0));
  }
  return Status();
}

// The conversion already made for a weight of the same type (attn_q/k/v, gate/up share one).
bool same_conversion(const WeightView& a, const WeightView& b) { return a.type == b.type && a.n_in == b.n_in; }

// One transformer block (spec §3.2 / §3.3) as run by one worker of the pool: every worker calls
// run() and the phases meet at barriers. Rows before row0 only feed the KV cache.
class LayerPass {
 public:
  // x [n, n_embd] in -> x_next [n - row0, n_embd] out. An exited last row (early exit,
  // approx.h) only writes its K and V and leaves as x_next = layer_output_scale · x.
  LayerPass(const Model& m, Session& s, Scratch& b, ThreadPool& pool, int worker, int il, int pos0, int n, int row0,
            bool last_row_exited, const std::vector<float>& x, std::vector<float>& x_next)
      : m_(m), s_(s), b_(b), pool_(pool), x_(x), x_next_(x_next), c_(m.config), l_(m.config.layers[il]), w_(m.layer(il)),
        plan_(m.shard(il)), worker_(worker), n_workers_(pool.size()), il_(il), pos0_(pos0), n_(n), row0_(row0),
        n_q_(n - row0), n_act_(n_q_ - (last_row_exited ? 1 : 0)), E_(m.config.n_embd),
        top_k_(s.approx.top_k_ffn_on() ? s.approx.ffn_keep(il, l_.n_ff) : 0) {}

  void run() {
    const Clock::time_point t0 = Clock::now();
    attention_norm();
    sync();
    tap("attn_norm", b_.attn_norm.data(), n_, E_);
    attention_units();
    if (s_.debug_hook) {  // the taps need every worker's heads: a barrier only when debugging
      sync();
      tap("q_rope", b_.q.data(), n_act_, l_.q_dim());
      tap("k_rope", b_.k.data(), n_, l_.kv_dim());
      tap("v_normed", b_.v.data(), n_, l_.kv_dim());
      tap("attn_out", b_.attn_out.data(), n_act_, l_.q_dim());
    }
    project_in_units(w_.attn_output, b_.xc_o.data(), plan_.attn, &LayerPass::attention_residual);
    tap("attn_residual", b_.x1.data(), n_act_, E_);
    const Clock::time_point t1 = Clock::now();
    if (n_act_ < n_q_ && worker_ == n_workers_ - 1) exited_row_out();
    if (top_k_ > 0) {
      ffn_gate();
      sync();
      select_features();
      sync();
      ffn_up_kept();
    } else {
      ffn_units();
    }
    project_in_units(w_.ffn_down, b_.xc_down.data(), plan_.ffn, &LayerPass::ffn_residual);
    if (n_act_ == 0) sync();  // no token block ran: the layer still ends on a barrier
    tap("ffn_out", b_.proj.data(), n_act_, E_);
    tap("layer_out", x_next_.data(), n_q_, E_);
    if (worker_ == 0) {
      b_.attention_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
      b_.ffn_ms += ms_since(t1);
    }
  }

 private:
  void sync() { pool_.barrier(); }
  Share my_share(int64_t n) const { return share(n, worker_, n_workers_); }
  void check(const Status& s) {
    if (!s.ok() && b_.errors[worker_].ok()) b_.errors[worker_] = s;
  }
  // Names an intermediate for the session's debug hook; worker 0 right after a barrier, while
  // the buffer is complete and no phase writes it.
  void tap(const char* name, const float* x, int n_rows, int n_cols) const {
    if (worker_ == 0 && s_.debug_hook) s_.debug_hook(name, il_, x, n_rows, n_cols);
  }
  static float* row(std::vector<float>& x, int64_t t, int width) { return x.data() + t * width; }
  static const float* row(const std::vector<float>& x, int64_t t, int width) { return x.data() + t * width; }

  // Pre-attention norm of this worker's tokens (all rows: K and V of every position go to the
  // cache), converted for the Q/K/V projections.
  void attention_norm() {
    const Share rows = my_share(n_);
    for (int64_t t = rows.begin; t < rows.end; ++t) {
      rmsnorm(row(x_, t, E_), w_.attn_norm.f32(), E_, c_.norm_eps, row(b_.attn_norm, t, E_));
    }
    check(convert_rows(w_.attn_q, b_.attn_norm.data(), rows, b_.xc_q.data()));
    if (!same_conversion(w_.attn_k, w_.attn_q)) check(convert_rows(w_.attn_k, b_.attn_norm.data(), rows, b_.xc_k.data()));
    if (l_.has_v && !same_conversion(w_.attn_v, w_.attn_q) && !same_conversion(w_.attn_v, w_.attn_k)) {
      check(convert_rows(w_.attn_v, b_.attn_norm.data(), rows, b_.xc_v.data()));
    }
  }

  const uint8_t* xc_k() const { return same_conversion(w_.attn_k, w_.attn_q) ? b_.xc_q.data() : b_.xc_k.data(); }
  const uint8_t* xc_v() const {
    if (same_conversion(w_.attn_v, w_.attn_q)) return b_.xc_q.data();
    return same_conversion(w_.attn_v, w_.attn_k) ? xc_k() : b_.xc_v.data();
  }

  // This worker's attention units: Q/K/V rows of their heads, q/k norms, RoPE, the cache, and
  // attention for their query heads -> their columns of attn_out [n_q, n_head · D].
  void attention_units() {
    const int D = l_.head_dim, group = l_.n_head / l_.n_head_kv;
    const Share units = my_share(plan_.attn.n_units);
    if (units.begin == units.end) return;
    const int kv0 = static_cast<int>(units.begin) * plan_.kv_per_unit;
    const int kv1 = static_cast<int>(units.end) * plan_.kv_per_unit;
    const int n_kv = kv1 - kv0, n_heads = n_kv * group;
    const float eps = c_.norm_eps;
    const float* freq_factors = l_.use_freq_factors ? m_.rope_freqs.f32() : nullptr;
    const uint64_t xc_row_q = activation_row_bytes(w_.attn_q.type, w_.attn_q.n_in);

    // q [n_q, n_head, D], this worker's heads: per-head norm, RoPE; gemma3 folds the attention
    // scale into Q here.
    const int64_t q0 = static_cast<int64_t>(kv0) * group * D, q1 = static_cast<int64_t>(kv1) * group * D;
    matmul_rows(w_.attn_q, b_.xc_q.data() + xc_row_q * static_cast<uint64_t>(row0_), n_act_, b_.q.data(), q0, q1);
    for (int t = 0; t < n_act_; ++t) {
      float* qt = row(b_.q, t, l_.q_dim()) + q0;
      rmsnorm_rows(qt, w_.attn_q_norm.f32(), n_heads, D, eps, qt);
      rope_neox(qt, n_heads, D, l_.n_rot, pos0_ + row0_ + t, l_.rope_base, l_.rope_freq_scale, freq_factors);
      if (c_.arch == Arch::gemma3) {
        for (int64_t i = 0; i < q1 - q0; ++i) qt[i] *= c_.query_scale;
      }
    }

    // k, v [n, n_head_kv, D], this worker's KV heads. Without attn_v, V is the K projection
    // before its norm and RoPE.
    const int64_t k0 = static_cast<int64_t>(kv0) * D, k1 = static_cast<int64_t>(kv1) * D;
    matmul_rows(w_.attn_k, xc_k(), n_, b_.k.data(), k0, k1);
    if (l_.has_v) matmul_rows(w_.attn_v, xc_v(), n_, b_.v.data(), k0, k1);
    for (int t = 0; t < n_; ++t) {
      float* kt = row(b_.k, t, l_.kv_dim()) + k0;
      float* vt = row(b_.v, t, l_.kv_dim()) + k0;
      if (!l_.has_v) std::copy(kt, kt + (k1 - k0), vt);
      rmsnorm_rows(kt, w_.attn_k_norm.f32(), n_kv, D, eps, kt);
      rope_neox(kt, n_kv, D, l_.n_rot, pos0_ + t, l_.rope_base, l_.rope_freq_scale, freq_factors);
      if (c_.arch == Arch::gemma4) rmsnorm_rows(vt, nullptr, n_kv, D, eps, vt);
    }

    // Chunks of at most attn_chunk positions are stored and then attended, so a sliding ring
    // never loses a key a query of the chunk still needs. The attention op reads one KV head
    // at a time: its query heads are gathered into [n_q, group, D] and scattered back.
    std::vector<float>& hq = b_.heads_q[worker_];
    std::vector<float>& ho = b_.heads_out[worker_];
    hq.resize(static_cast<size_t>(n_q_) * group * D);
    ho.resize(hq.size());
    const int n_swa = l_.sliding ? c_.n_swa : 0;
    const size_t head_cols = static_cast<size_t>(group) * D;
    AttentionWorkspace workspace;
    // Each KV head's stats are this worker's alone; the session sums them when asked.
    const ApproxOptions& approx = s_.approx;
    for (int h = kv0; h < kv1; ++h) s_.approx_head_stats(il_, h) = ApproxStats();
    for (int c0 = 0; c0 < n_; c0 += s_.attn_chunk()) {
      const int c1 = std::min(n_, c0 + s_.attn_chunk());
      for (int t = c0; t < c1; ++t) {
        for (int h = kv0; h < kv1; ++h) {
          s_.store(il_, h, pos0_ + t, row(b_.k, t, l_.kv_dim()) + h * D, row(b_.v, t, l_.kv_dim()) + h * D);
        }
      }
      const int first = std::max(c0, row0_), last = std::min(c1, row0_ + n_act_);
      if (first >= last) continue;
      const int n_rows = last - first;
      for (int h = kv0; h < kv1; ++h) {
        const size_t col = static_cast<size_t>(h) * head_cols;
        for (int i = 0; i < n_rows; ++i) {
          const float* src = row(b_.q, first - row0_ + i, l_.q_dim()) + col;
          std::copy(src, src + head_cols, hq.data() + i * head_cols);
        }
        const KvView kv = s_.view(il_, h, pos0_ + c1);
        if (approx.truncated_attention) {
          attention_truncated(hq.data(), n_rows, pos0_ + first, group, kv, n_swa, 1.0f, approx.truncation_threshold,
                              ho.data(), &workspace, &s_.approx_head_stats(il_, h));
        } else {
          attention_tiled(hq.data(), n_rows, pos0_ + first, group, kv, n_swa, 1.0f, ho.data(), &workspace);
        }
        for (int i = 0; i < n_rows; ++i) {
          const float* src = ho.data() + i * head_cols;
          std::copy(src, src + head_cols, row(b_.attn_out, first - row0_ + i, l_.q_dim()) + col);
        }
      }
    }
    // Only this worker's units read these columns: converted here, without a barrier.
    check(convert_columns(w_.attn_output, b_.attn_out.data(), n_act_, q0, q1, b_.xc_o.data()));
  }

  // proj [n_q, n_embd] = Σ over units, in unit order, of W[:, unit columns] · Xc[:, unit columns],
  // then finish_row on each reduced row. The sum runs in the same order whichever worker made
  // each partial, so the bytes do not depend on the thread count. A unit's columns of W are one
  // contiguous region when W is unit-major (ModelLoadOptions::relayout_in_place), strided rows
  // otherwise: the same bytes either way. Each worker's Xc columns are its own units' (converted
  // by the phase before, without a barrier). Partials in blocks of kTokenBlock tokens; a block's
  // rows are shared out, each reduced and finished by one worker, so that the residual step
  // needs no barrier of its own.
  void project_in_units(const WeightView& W, const uint8_t* Xc, const ColumnUnits& units,
                        void (LayerPass::*finish_row)(int64_t t)) {
    const Share mine = my_share(units.n_units);
    const uint64_t xc_row = activation_row_bytes(W.type, W.n_in);
    const size_t slot = static_cast<size_t>(b_.token_block) * E_;
    for (int t0 = 0; t0 < n_act_; t0 += b_.token_block) {
      const int nb = std::min(b_.token_block, n_act_ - t0);
      for (int64_t u = mine.begin; u < mine.end; ++u) {
        const int64_t k0 = units.begin(static_cast<int>(u)), k1 = units.end(static_cast<int>(u));
        matmul_rows_strided(W.columns(k0, k1), Xc + xc_row * static_cast<uint64_t>(t0) + activation_row_bytes(W.type, k0),
                            xc_row, nb, b_.partial.data() + u * slot, 0, E_);
      }
      sync();
      const Share rows = my_share(nb);
      for (int64_t t = rows.begin; t < rows.end; ++t) {
        float* y = row(b_.proj, t0 + t, E_);
        const float* p0 = b_.partial.data() + static_cast<size_t>(t) * E_;
        std::copy(p0, p0 + E_, y);
        for (int u = 1; u < units.n_units; ++u) {
          const float* pu = p0 + u * slot;
          for (int j = 0; j < E_; ++j) y[j] += pu[j];
        }
        (this->*finish_row)(t0 + t);
      }
      sync();
    }
  }

  // Token t: x1 = post_attention_norm(proj) + x, then the FFN norm, converted for gate and up.
  void attention_residual(int64_t t) {
    float* x1 = row(b_.x1, t, E_);
    const float* x = row(x_, row0_ + t, E_);
    rmsnorm(row(b_.proj, t, E_), w_.post_attention_norm.f32(), E_, c_.norm_eps, x1);
    for (int j = 0; j < E_; ++j) x1[j] += x[j];
    rmsnorm(x1, w_.ffn_norm.f32(), E_, c_.norm_eps, row(b_.ffn_in, t, E_));
    check(convert_rows(w_.ffn_gate, b_.ffn_in.data(), Share{t, t + 1}, b_.xc_gate.data()));
    if (!same_conversion(w_.ffn_up, w_.ffn_gate)) check(convert_rows(w_.ffn_up, b_.ffn_in.data(), Share{t, t + 1}, b_.xc_up.data()));
  }

  // The features [f0, f1) of this worker's FFN units (empty when it has none).
  std::pair<int64_t, int64_t> my_features() const {
    const Share units = my_share(plan_.ffn.n_units);
    if (units.begin == units.end) return {0, 0};
    return {plan_.ffn.begin(static_cast<int>(units.begin)), plan_.ffn.end(static_cast<int>(units.end) - 1)};
  }
  const uint8_t* xc_up() const { return same_conversion(w_.ffn_up, w_.ffn_gate) ? b_.xc_gate.data() : b_.xc_up.data(); }

  // This worker's FFN units: their rows of gate and up, GeGLU -> their columns of act [n_q, n_ff].
  void ffn_units() {
    const auto [f0, f1] = my_features();
    if (f0 == f1) return;
    matmul_rows(w_.ffn_gate, b_.xc_gate.data(), n_act_, b_.gate.data(), f0, f1);
    matmul_rows(w_.ffn_up, xc_up(), n_act_, b_.up.data(), f0, f1);
    for (int t = 0; t < n_act_; ++t) {
      geglu(row(b_.gate, t, l_.n_ff) + f0, row(b_.up, t, l_.n_ff) + f0, static_cast<int>(f1 - f0), row(b_.act, t, l_.n_ff) + f0);
    }
    convert_act(f0, f1);
  }

  // This worker's features of act, converted for ffn_down: only its own units read them.
  void convert_act(int64_t f0, int64_t f1) {
    check(convert_columns(w_.ffn_down, b_.act.data(), n_act_, f0, f1, b_.xc_down.data()));
  }

  // Top-K FFN, first step: this worker's units' rows of gate -> act [n_q, n_ff] = gelu(gate).
  void ffn_gate() {
    const auto [f0, f1] = my_features();
    matmul_rows(w_.ffn_gate, b_.xc_gate.data(), n_act_, b_.gate.data(), f0, f1);
    for (int t = 0; t < n_act_; ++t) {
      const float* g = row(b_.gate, t, l_.n_ff);
      float* a = row(b_.act, t, l_.n_ff);
      for (int64_t f = f0; f < f1; ++f) a[f] = gelu_table(g[f]);
    }
  }

  // This worker's tokens: keep [t, n_ff] marks the top_k_ features of largest |gelu(gate)|, or
  // every feature when the dropped share of Σ|gelu(gate)| exceeds the threshold (or is NaN).
  void select_features() {
    const Share rows = my_share(n_act_);
    const int n_ff = l_.n_ff;
    ApproxStats& stats = b_.ffn_stats[worker_];
    for (int64_t t = rows.begin; t < rows.end; ++t) {
      uint8_t* keep = b_.keep.data() + t * n_ff;
      const double dropped = select_top_k(row(b_.act, t, n_ff), n_ff, top_k_, &b_.top_k_keys[worker_], keep);
      const bool fall_back = !(dropped <= s_.approx.ffn_top_k_threshold);
      if (fall_back) std::fill(keep, keep + n_ff, uint8_t{1});
      stats.ffn_rows += 1;
      stats.ffn_fallback_rows += fall_back;
      stats.ffn_features_total += n_ff;
      stats.ffn_features_kept += fall_back ? n_ff : top_k_;
      if (!fall_back) stats.max_dropped_gate_mass = std::max(stats.max_dropped_gate_mass, dropped);
    }
  }

  // This worker's units: rows of up for the features some token keeps, in runs, then
  // act = gelu(gate) · up where kept, 0 elsewhere (so ffn_down skips those features' columns).
  // A kept feature's act is GeGLU's bytes: the same row products and the same f32 product.
  void ffn_up_kept() {
    const auto [f0, f1] = my_features();
    const int n_ff = l_.n_ff;
    auto kept_by_any = [&](int64_t f) {
      for (int t = 0; t < n_act_; ++t) {
        if (b_.keep[static_cast<size_t>(t) * n_ff + f]) return true;
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
      matmul_rows(w_.ffn_up, xc_up(), n_act_, b_.up.data(), f, end);
      f = end;
    }
    for (int t = 0; t < n_act_; ++t) {
      const uint8_t* keep = b_.keep.data() + static_cast<size_t>(t) * n_ff;
      const float* up = row(b_.up, t, n_ff);
      float* a = row(b_.act, t, n_ff);
      for (int64_t f = f0; f < f1; ++f) a[f] = keep[f] ? a[f] * up[f] : 0.0f;
    }
    convert_act(f0, f1);
  }

  // Token t: x_next = post_ffw_norm(proj) + x1, then gemma4's layer_output_scale on the whole
  // residual stream.
  void ffn_residual(int64_t t) {
    float* y = row(x_next_, t, E_);
    const float* x1 = row(b_.x1, t, E_);
    rmsnorm(row(b_.proj, t, E_), w_.post_ffw_norm.f32(), E_, c_.norm_eps, y);
    for (int j = 0; j < E_; ++j) y[j] += x1[j];
    apply_output_scale(y);
  }

  // An exited last row skips straight to the scale: what the full layer gives when its
  // attention output and FFN add nothing.
  void exited_row_out() {
    const float* x = row(x_, n_ - 1, E_);
    float* y = row(x_next_, n_q_ - 1, E_);
    std::copy(x, x + E_, y);
    apply_output_scale(y);
  }

  void apply_output_scale(float* y) const {
    if (!w_.layer_output_scale.present()) return;
    const float scale = w_.layer_output_scale.f32()[0];
    for (int j = 0; j < E_; ++j) y[j] *= scale;
  }

  const Model& m_;
  Session& s_;
  Scratch& b_;
  ThreadPool& pool_;
  const std::vector<float>& x_;
  std::vector<float>& x_next_;
  const ModelConfig& c_;
  const LayerConfig& l_;
  const LayerWeights& w_;
  const LayerShards& plan_;
  const int worker_, n_workers_, il_, pos0_, n_, row0_, n_q_;
  const int n_act_;  // rows of n_q that run attention output and FFN: all but an exited last row
  const int E_;
  const int top_k_;  // features the top-K FFN keeps per row; 0: the dense FFN
};

// x [n] into a layer, y [n] out of it -> |y - s·x| / |s·x| in f64, s the layer's
// layer_output_scale (else 1): 0 exactly when the layer's attention output and FFN add nothing.
float relative_update(const float* x, const float* y, int n, const WeightView& layer_output_scale) {
  const float scale = layer_output_scale.present() ? layer_output_scale.f32()[0] : 1.0f;
  double change = 0, size = 0;
  for (int j = 0; j < n; ++j) {
    const float scaled = layer_output_scale.present() ? x[j] * scale : x[j];
    const double d = static_cast<double>(y[j]) - scaled;
    change += d * d;
    size += static_cast<double>(scaled) * scaled;
  }
  if (change == 0) return 0.0f;
  // A zero input row has an unbounded update: FLT_MAX keeps it a number in JSON.
  return static_cast<float>(std::min(std::sqrt(change / size), static_cast<double>(FLT_MAX)));
}

// The row's update through layer il joins its last updates; it exits once the last
// exit_window of them sum below exit_threshold.
void advance_exit(const ApproxOptions& o, int il, float update, ExitState* e) {
  std::vector<float>& recent = e->recent_updates;
  recent.push_back(update);
  const size_t window = static_cast<size_t>(std::clamp(o.exit_window, 1, kMaxExitWindow));
  if (recent.size() > window) recent.erase(recent.begin(), recent.end() - static_cast<std::ptrdiff_t>(window));
  if (!o.early_exit || recent.size() < window) return;
  double sum = 0;
  for (float r : recent) sum += r;
  if (sum < o.exit_threshold) e->exit_layer = il;
}

Status check_finite(std::span<const float> in, int n_embd) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (!std::isfinite(in[i])) {
      return Status(Code::invalid_argument, "input is not finite at position " + std::to_string(i / n_embd) +
                                                ", element " + std::to_string(i % n_embd));
    }
  }
  return Status();
}

Status validate_forward(const Model& m, const Session& s, int start_pos, std::span<const float> in, int n,
                        std::span<float> out, bool last_only) {
  const int n_embd = m.config.n_embd;
  if (s.range().begin != m.range.begin || s.range().end != m.range.end) {
    return Status(Code::invalid_argument, "session was created for another layer range");
  }
  if (n <= 0) return Status(Code::invalid_argument, "n must be positive, got " + std::to_string(n));
  const uint64_t in_needed = static_cast<uint64_t>(n) * static_cast<uint64_t>(n_embd);
  if (in.size() != in_needed) {
    return Status(Code::invalid_argument, "input has " + std::to_string(in.size()) + " floats, expected n * n_embd = " +
                                              std::to_string(in_needed));
  }
  const uint64_t out_needed = static_cast<uint64_t>(last_only ? 1 : n) * static_cast<uint64_t>(n_embd);
  if (out.size() != out_needed) {
    return Status(Code::invalid_argument, "output has room for " + std::to_string(out.size()) + " floats, expected " +
                                              std::to_string(out_needed));
  }
  if (start_pos != s.n_past()) {
    return Status(Code::failed_precondition, "start_pos " + std::to_string(start_pos) +
                                                 " does not match the session's n_past " + std::to_string(s.n_past()));
  }
  if (static_cast<int64_t>(start_pos) + n > s.max_ctx()) {
    return Status(Code::resource_exhausted, "context overflow: " + std::to_string(start_pos) + " + " +
                                                std::to_string(n) + " positions exceed max_ctx " + std::to_string(s.max_ctx()));
  }
  return check_finite(in, n_embd);
}

}  // namespace

Status embed(const Model& m, const int32_t* tokens, int n, float* out) {
  if (!m.has_embedding) return Status(Code::failed_precondition, "this node has no token embedding loaded");
  if (n <= 0 || !tokens || !out) return Status(Code::invalid_argument, "embed needs n > 0 tokens and an output");
  const int n_embd = m.config.n_embd;
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= m.config.n_vocab) {
      return Status(Code::invalid_argument, "token id " + std::to_string(tokens[i]) + " at position " +
                                                std::to_string(i) + " is outside [0, " + std::to_string(m.config.n_vocab) + ")");
    }
  }
  const float scale = sqrtf(static_cast<float>(n_embd));
  for (int i = 0; i < n; ++i) {
    float* row = out + static_cast<size_t>(i) * n_embd;
    LF_RETURN_IF_ERROR(dequantize_row(m.token_embd.type, m.token_embd.row(tokens[i]), row, n_embd));
    for (int j = 0; j < n_embd; ++j) row[j] *= scale;
  }
  return Status();
}

namespace {

// A validated forward call as the pool runs it: job on every worker, then finish once.
struct ForwardCall {
  ThreadPool::Job job;
  std::function<Status()> finish;  // collects errors, copies the output out, moves n_past
};

Status prepare_forward(const Model& m, Session& s, int start_pos, std::span<const float> in, int n,
                       std::span<float> out, bool last_only, ForwardCall* call) {
  const Clock::time_point t_call = Clock::now();
  if (!m.pool) return Status(Code::failed_precondition, "the model has no threads: load it with load_model");
  LF_RETURN_IF_ERROR(validate_forward(m, s, start_pos, in, n, out, last_only));
  ThreadPool* pool = m.pool.get();
  auto scratch = std::make_shared<Scratch>(m, n, pool->size(), s.approx.top_k_ffn_on());
  std::copy(in.begin(), in.end(), scratch->x.begin());
  auto job_ms = std::make_shared<double>(0.0);

  call->job = [&m, &s, pool, scratch, job_ms, start_pos, n, last_only](int worker) {
    const Clock::time_point t_job = Clock::now();
    Scratch& b = *scratch;
    // Only once the job runs: a call refused as busy leaves the session untouched.
    if (worker == 0) {
      s.layer_ms.assign(m.range.end - m.range.begin, 0.0);
      s.row_updates.assign(m.range.end - m.range.begin, -1.0f);
    }
    // Every worker follows the last row's early exit on its own copy, making the same decisions
    // from the same bytes, so no barrier is spent sharing them.
    ExitState exit = s.exit_in;
    for (int il = m.range.begin; il < m.range.end; ++il) {
      const Clock::time_point t0 = Clock::now();
      // The final layer carries only the last row past attention, as llama.cpp does for its
      // output rows.
      const int row0 = last_only && il == m.range.end - 1 ? n - 1 : 0;
      // The residual stream alternates between the two buffers; LayerPass ends on a barrier.
      const bool even = (il - m.range.begin) % 2 == 0;
      const std::vector<float>& x = even ? b.x : b.x_next;
      std::vector<float>& x_next = even ? b.x_next : b.x;
      const bool exited = exit.exited();
      LayerPass(m, s, b, *pool, worker, il, start_pos, n, row0, exited, x, x_next).run();
      if (!exited) {
        const int E = m.config.n_embd;
        const float update = relative_update(x.data() + static_cast<size_t>(n - 1) * E,
                                             x_next.data() + static_cast<size_t>(n - 1 - row0) * E, E,
                                             m.layer(il).layer_output_scale);
        advance_exit(s.approx, il, update, &exit);
        if (worker == 0) s.row_updates[il - m.range.begin] = update;
      }
      if (worker == 0) s.layer_ms[il - m.range.begin] = ms_since(t0);
    }
    if (worker == 0) {
      b.exit = std::move(exit);
      *job_ms = ms_since(t_job);
    }
  };
  call->finish = [&m, &s, scratch, job_ms, t_call, start_pos, n, out] {
    for (const Status& e : scratch->errors) {
      // After validation only an internal fault can fail; n_past then stays put so the caller
      // never sees positions counted that did not run.
      if (!e.ok()) return e;
    }
    // With last_only the final layer left its one row first; a node without layers passes its
    // input through, the last row of it.
    const bool odd = (m.range.end - m.range.begin) % 2 == 1;
    const std::vector<float>& x = odd ? scratch->x_next : scratch->x;
    const size_t skip = m.range.end > m.range.begin ? 0 : x.size() - out.size();
    std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(skip), out.size(), out.begin());
    s.set_n_past(start_pos + n);
    s.exit_out = std::move(scratch->exit);
    s.exit_in = ExitState();
    s.ffn_approx = ApproxStats();
    for (const ApproxStats& worker : scratch->ffn_stats) s.ffn_approx.merge(worker);
    s.phases = {scratch->attention_ms, scratch->ffn_ms, ms_since(t_call) - *job_ms};
    return Status();
  };
  return Status();
}

const char* const kBusy = "a forward is already running on this model's threads";

}  // namespace

Status forward_async(const Model& m, Session& s, int start_pos, std::span<const float> in, int n, std::span<float> out,
                     bool last_only, std::function<void(const Status&)> done) {
  ForwardCall call;
  LF_RETURN_IF_ERROR(prepare_forward(m, s, start_pos, in, n, out, last_only, &call));
  if (!m.pool->start(std::move(call.job), [finish = std::move(call.finish), done = std::move(done)] { done(finish()); })) {
    return Status(Code::failed_precondition, kBusy);
  }
  return Status();
}

Status forward(const Model& m, Session& s, int start_pos, std::span<const float> in, int n, std::span<float> out,
               bool last_only) {
  ForwardCall call;
  LF_RETURN_IF_ERROR(prepare_forward(m, s, start_pos, in, n, out, last_only, &call));
  if (!m.pool->run(std::move(call.job))) return Status(Code::failed_precondition, kBusy);
  return call.finish();
}

Status forward(const Model& m, Session& s, int start_pos, const float* in, int n, float* out, bool last_only) {
  if (n <= 0 || !in || !out) return Status(Code::invalid_argument, "forward needs n > 0 and input/output buffers");
  const size_t n_embd = static_cast<size_t>(m.config.n_embd);
  return forward(m, s, start_pos, std::span<const float>(in, n * n_embd), n,
                 std::span<float>(out, (last_only ? 1 : n) * n_embd), last_only);
}

Status head(const Model& m, const float* hidden, int n_rows, float* logits) {
  if (!m.has_head) return Status(Code::failed_precondition, "this node has no output head loaded");
  if (n_rows <= 0 || !hidden || !logits) return Status(Code::invalid_argument, "head needs n_rows > 0 and buffers");
  const ModelConfig& c = m.config;
  std::vector<float> out_norm(static_cast<size_t>(n_rows) * static_cast<size_t>(c.n_embd));
  rmsnorm_rows(hidden, m.output_norm.f32(), n_rows, c.n_embd, c.norm_eps, out_norm.data());
  LF_RETURN_IF_ERROR(matmul(m.output, out_norm.data(), n_rows, logits));
  if (c.final_softcap != 0.0f) {
    for (int r = 0; r < n_rows; ++r) softcap(logits + static_cast<size_t>(r) * c.n_vocab, c.n_vocab, c.final_softcap);
  }
  return Status();
}

}  // namespace lf
