// Per-session state: for every layer of a node, its K and V rows in f16 (llama.cpp's default
// cache type, spec §3.5 item 1), and the number of positions already processed.
//
// Global layers keep every position up to max_ctx. Sliding layers keep a ring of
// n_swa + attn_chunk - 1 slots: the engine writes at most attn_chunk new positions before it
// runs their queries, so the oldest key any of those queries needs is still in the ring.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "layerfold/approx.h"
#include "layerfold/model.h"
#include "layerfold/ops.h"
#include "layerfold/status.h"

namespace lf {

struct SessionOptions {
  int max_ctx = 0;      // positions a session may hold; 0: the model's n_ctx_train
  int attn_chunk = 64;  // queries attended per step (sizes the sliding rings)
};

// Called by the engine with named intermediates ("attn_norm", "q_normed", "ffn_out", ...):
// x [n_rows, n_cols] of layer il (il = -1 outside the layers). Empty by default.
using DebugHook = std::function<void(const char* name, int il, const float* x, int n_rows, int n_cols)>;

class Session {
 public:
  // Allocates the whole cache up front (bytes() tells how much).
  static Status create(const Model& model, const SessionOptions& options, Session* out);

  int n_past() const { return n_past_; }
  int max_ctx() const { return max_ctx_; }
  int attn_chunk() const { return attn_chunk_; }
  LayerRange range() const { return range_; }
  uint64_t bytes() const;

  // k, v [head_dim] of KV head kv_head of layer il at position pos -> f16 slot pos % capacity.
  // Each head has its own slots, so workers owning different heads never share a cache line.
  void store(int il, int kv_head, int pos, const float* k, const float* v);
  // KV head kv_head of layer il as the attention op reads it (a view of one KV head), once
  // positions < end_pos have been stored.
  KvView view(int il, int kv_head, int end_pos) const;

  // Only the engine moves n_past, after a whole forward call succeeded.
  void set_n_past(int n_past) { n_past_ = n_past; }
  void reset() { n_past_ = 0; }

  // Approximate modes of the next forward calls (approx.h); default: the exact engine. Not to
  // be changed while a forward runs.
  ApproxOptions approx;
  // What they did in the last forward, summed over its layers and heads in a fixed order.
  ApproxStats approx_stats() const;
  // The share of KV head kv_head of layer il: written only by the worker that owns the head.
  ApproxStats& approx_head_stats(int il, int kv_head) { return layers_[il - range_.begin].approx[kv_head]; }

  // Early exit (approx.h) of the last row: the state the previous node left it in, read by the
  // next forward and reset once that forward ran; and the state this node's last forward left,
  // to hand to the next node.
  ExitState exit_in;
  ExitState exit_out;
  // [range.end - range.begin]: the last row's relative update in each layer of the last forward
  // (-1 where the row had exited before the layer).
  std::vector<float> row_updates;
  // The top-K FFN's share of approx_stats(), set by the engine after each forward.
  ApproxStats ffn_approx;

  DebugHook debug_hook;
  std::vector<double> layer_ms;  // [range.end - range.begin]: wall time of each layer in the last forward
  // Where the last forward's time went (docs/threads.md), summed over its layers, as seen by worker 0.
  struct Phases {
    double attention_ms = 0;  // attention norm .. attention residual, incl. W_o partials and their reduction
    double ffn_ms = 0;        // gate/up, GeGLU, W_down partials, reduction, residual
    double serial_ms = 0;     // outside the workers: validation, copies, handing out and collecting the job
  } phases;

 private:
  struct LayerKv {
    int capacity = 0;
    int n_head_kv = 0, head_dim = 0;
    std::vector<uint16_t> k, v;  // [n_head_kv, capacity, head_dim]
    std::vector<ApproxStats> approx;  // [n_head_kv] the last forward's, per KV head
  };
  LayerRange range_;
  int max_ctx_ = 0;
  int attn_chunk_ = 0;
  int n_past_ = 0;
  std::vector<LayerKv> layers_;  // [range.end - range.begin]
};

}  // namespace lf
