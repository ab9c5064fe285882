// A conversation on a node: its KV cache and position, the options of its next forward calls,
// and the report of the last one.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "approx/approx.h"
#include "base/status.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace lf {

// Called by the engine with named intermediates ("attn_norm", "q_rope", "ffn_out", ...):
// x [n_rows, n_cols] of layer il. Empty by default.
using DebugHook = std::function<void(const char* name, int il, const float* x, int n_rows, int n_cols)>;

// What the last forward call did; written by the engine, read by the host between calls.
struct ForwardReport {
  std::vector<double> layer_ms;  // [range.end - range.begin]: wall time of each layer
  // Where the time went (docs/threads.md), summed over the layers, as seen by worker 0.
  double attention_ms = 0;  // attention norm .. attention residual, incl. W_o
  double ffn_ms = 0;        // the FFN, W_down, residual
  double serial_ms = 0;     // outside the workers: validation, copies, handing out and collecting the job
  // [range.end - range.begin]: the last row's relative update in each layer (-1 where the row
  // had exited before the layer; approx.h).
  std::vector<float> row_updates;
  ExitState exit_out;  // the last row's early-exit state, to hand to the next node
  // Truncated attention's statistics, [range.end - range.begin][n_head_kv]: each KV head's
  // written only by the worker that owns the head.
  std::vector<std::vector<ApproxStats>> attention_approx;
  ApproxStats ffn_approx;  // the top-K FFN's, summed over workers
  // The call's new K/V rows of each source layer whose cache a shared-KV layer after the node
  // reads (kv_layers_shipped), in layer order: for the nodes of those layers (Session::kv_rows_in).
  std::vector<KvRows> kv_rows_out;

  // Everything the approximate modes did, summed over layers and heads in a fixed order.
  ApproxStats approx_stats() const;
};

class Session {
 public:
  static Status create(const Model& model, const KvCacheOptions& options, Session* out);

  int n_past() const { return n_past_; }
  int max_ctx() const { return kv.max_ctx(); }
  LayerRange range() const { return kv.range(); }
  // The cache and the checkpoints kept.
  uint64_t bytes() const;
  // Only the engine moves n_past, after a whole forward call succeeded.
  void set_n_past(int n_past) { n_past_ = n_past; }
  void reset() {
    n_past_ = 0;
    checkpoints_.clear();
  }
  // Keeps a checkpoint at n_past (KvCheckpoint), at most max_count of them: the oldest is
  // dropped beyond. A later cut to any position from here on can then return here.
  Status checkpoint(int max_count);
  int n_checkpoints() const { return static_cast<int>(checkpoints_.size()); }
  // Cuts the session back to its first n_past positions, so the next forward continues from
  // there as if the rest had never been sent. When a sliding layer's ring no longer holds the
  // keys the next queries read (at most attn_chunk positions can be cut once a ring has
  // wrapped: KvCache::shortest_cut), the session returns to its latest checkpoint at or before
  // n_past instead, if `reached` is given: *reached is the length it then holds, and the caller
  // feeds positions [*reached, n_past) again. Refused (failed_precondition, the session
  // unchanged) when neither can be done. Checkpoints past the new length are dropped.
  Status truncate(int n_past, int* reached = nullptr);

  KvCache kv;

  // The next forward calls' approximate modes (approx.h; default: the exact engine) and the
  // early-exit state its last row arrives in from the previous node (consumed by that call).
  // Not to be changed while a forward runs.
  ApproxOptions approx;
  ExitState exit_in;
  // The next forward call's per-layer embedding inputs for the node's layers, [range layers, n,
  // n_embd_per_layer] (per_layer_embd.h); required when the model has them, consumed by a
  // successful call.
  std::vector<float> per_layer_in;
  // The next forward call's K/V rows of each source layer this node mirrors (KvCache::mirrored),
  // as the source's node handed them out (ForwardReport::kv_rows_out); required when the node
  // mirrors any, consumed by a successful call.
  std::vector<KvRows> kv_rows_in;
  // Whether the next forward call's rows are one media span (an image's soft tokens), which the
  // sliding layers attend both ways, as llama.cpp decodes an image with non-causal attention on
  // them (docs/vision.md, "An image in the decoder"); consumed by a successful call. At most
  // kv.attn_chunk() rows: all of them are in the rings before the first one attends.
  bool span_in = false;
  DebugHook debug_hook;

  ForwardReport last;

 private:
  int n_past_ = 0;
  std::vector<KvCheckpoint> checkpoints_;  // by position, ascending
};

}  // namespace lf
