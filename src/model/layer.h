// One decoder layer (docs/forward-pass.md, "Gemma 4 layer" and "Gemma 3 layer") as run by one
// worker of the pool: every worker runs the same steps and they meet at barriers. Each step
// works on this worker's share (rows, KV heads or units) of the call's Scratch.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "model/batch_rows.h"
#include "model/model.h"
#include "model/scratch.h"
#include "model/session.h"

namespace lf {

// Layer il of one forward call, seen by one worker: the rows of one or more sessions
// (model/batch_rows.h). x [rows.n, n_embd] in -> x_next [rows.n_out, n_embd] out.
struct LayerCall {
  const Model& m;
  Scratch& b;
  ThreadPool& pool;
  const std::vector<float>& x;
  std::vector<float>& x_next;
  int worker, il;
  const BatchRows& rows;

  const ModelConfig& c() const { return m.config; }
  const LayerConfig& l() const { return m.config.layers[il]; }
  const LayerWeights& w() const { return m.layer(il); }
  const LayerShards& plan() const { return m.shard(il); }
  int n_workers() const { return pool.size(); }
  int E() const { return m.config.n_embd; }
  int n() const { return rows.n; }
  int n_act() const { return rows.n_act; }
  // The session act row t belongs to.
  const Session& session(int64_t t) const { return *rows.of_act(t).s; }

  void sync() const { pool.barrier(); }
  Share my_share(int64_t count) const { return share(count, worker, n_workers()); }
  // Keeps this worker's first failure for the call to report.
  void check(const Status& status) const {
    if (!status.ok() && b.errors[worker].ok()) b.errors[worker] = status;
  }
  // The row spaces of model/batch_rows.h, for naming intermediates.
  enum class Space { x, act, out };
  // Names an intermediate [rows of space, n_cols] for the debug hook of each session that has
  // one, its own rows only; worker 0 right after a barrier, while the buffer is complete and no
  // step writes it.
  void tap(const char* name, const float* data, Space space, int n_cols) const {
    if (worker != 0) return;
    for (const Segment& g : rows.segments) {
      if (!g.s->debug_hook) continue;
      const int first = space == Space::x ? g.x0 : space == Space::act ? g.a0 : g.o0;
      const int count = space == Space::x ? g.n : space == Space::act ? g.n_act() : g.n_q();
      g.s->debug_hook(name, il, data + static_cast<size_t>(first) * n_cols, count, n_cols);
    }
  }
};

inline float* row(std::vector<float>& x, int64_t t, int width) { return x.data() + t * width; }
inline const float* row(const std::vector<float>& x, int64_t t, int width) { return x.data() + t * width; }

// The FFN of a layer, a variant chosen per call and layer: this worker's FFN units from ffn_in
// (converted for gate and up) -> their features of act, converted for ffn_down. ffn_down and
// the residual are the layer's.
using FfnVariant = void (*)(const LayerCall& c);
void dense_ffn(const LayerCall& c);  // GeGLU over every feature (model/ffn_dense.cpp)
void top_k_ffn(const LayerCall& c);  // the top-K gate FFN of approx.h (model/ffn_top_k.cpp)
// A MoE layer's FFN: the shared MLP's units as dense_ffn, and the routed experts' branch into
// Scratch::moe.out (model/ffn_moe.cpp). Its residual is moe_residual.
void moe_ffn(const LayerCall& c);
// The features [f0, f1) of this worker's FFN units (empty when it has none).
std::pair<int64_t, int64_t> my_features(const LayerCall& c);
// dense_ffn without the conversion: this worker's features [f0, f1) of act = gelu(gate) · up.
std::pair<int64_t, int64_t> geglu_features(const LayerCall& c);

// Activations converted to a weight's vec_dot type (model/layer_activations.cpp).
// X rows [rows) [W.n_in] -> those rows of Xc.
Status convert_rows(const WeightView& W, const float* X, Share rows, uint8_t* Xc);
// X rows [0, n_rows), columns [k0, k1) on block boundaries -> the same columns of the Xc rows:
// the bytes convert_rows makes there, since every activation type converts block by block.
Status convert_columns(const WeightView& W, const float* X, int n_rows, int64_t k0, int64_t k1, uint8_t* Xc);
// Whether b's conversion is a's (attn_q/k/v, gate/up share one when their types agree).
bool same_conversion(const WeightView& a, const WeightView& b);
// ffn_in converted for ffn_up: the gate's conversion when they share one.
const uint8_t* xc_up(const LayerCall& c);
// act [n_q, n_ff] columns [f0, f1) -> their bytes of xc_down, read whole by project_rows.
void convert_act(const LayerCall& c, int64_t f0, int64_t f1);

// The layer's steps, in order (model/layer.cpp runs them).
void attention_input(const LayerCall& c);     // attn_norm of every row, converted for Q/K/V
void attention_heads(const LayerCall& c);     // this worker's heads: Q/K/V, norms, RoPE, cache, attention
// attention_heads without the conversion for attn_output: this worker's KV heads [kv0, kv1)
// and their query heads' columns of attn_out.
std::pair<int, int> attend_units(const LayerCall& c);
void attention_residual(const LayerCall& c, int64_t t);  // x1 = post_attention_norm(W_o ·) + x; ffn_in
void ffn_residual(const LayerCall& c, int64_t t);        // x_next = post_ffw_norm(W_down ·) + x1, scaled
// A MoE layer's: x_next = post_ffw_norm(post_ffw_norm_1(W_down ·) + experts) + x1, scaled.
void moe_residual(const LayerCall& c, int64_t t);
// proj [n_act, n_embd] = W · Xc, workers sharing the output rows, then finish_row on each row
// (model/layer_projection.cpp).
void project_rows(const LayerCall& c, const WeightView& W, const uint8_t* Xc,
                  void (*finish_row)(const LayerCall& c, int64_t t));
// This worker's share of W's output rows, in the row strips' grain: Y [n_act, W.n_out] = W · Xc
// there.
void project_my_rows(const LayerCall& c, const WeightView& W, const uint8_t* Xc, float* Y);

// y [n] *= gemma4's layer_output_scale, where the layer has one.
void apply_output_scale(const WeightView& layer_output_scale, int n, float* y);

// q [n_act, n_head, D], query heads [h0, h1): projection, per-head norm, RoPE at each row's
// position (model/layer_attention.cpp).
void project_queries(const LayerCall& c, int h0, int h1);

// Runs layer il on this worker; ends on a barrier.
void run_layer(const LayerCall& c, FfnVariant ffn);

}  // namespace lf
