// Buffers of one forward call, sized once for the largest layer of the node's range and shared
// by the workers; each phase writes disjoint parts (rows, columns or units) of them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "approx/approx.h"
#include "base/status.h"
#include "gguf/ggml_type.h"
#include "model/model.h"
#include "model/moe_scratch.h"

namespace lf {

// What a layer's scratch depends on, as load_model makes it: the type and width of each matrix
// it multiplies by (LayerWeights::matmuls order; n_in 0: absent).
struct LayerScratchShape {
  std::array<GgmlType, 7> matmul_type{};
  std::array<int64_t, 7> matmul_n_in{};
  MoeLayerShape moe;  // a MoE layer's expert buffers; zero when dense
};

// The sizes of the buffers of a forward of n rows over a range of layers.
struct ScratchShape {
  size_t rows = 0, n_embd = 0, q_dim = 0, kv_dim = 0, n_ff = 0;
  std::array<size_t, 7> converted{};  // bytes of the activations converted for each matmul slot
  bool top_k_ffn = false;
  MoeLayerShape moe;

  // Bytes the buffers take with n_workers workers (the host's memory estimate).
  uint64_t bytes(int n_workers) const;
};
ScratchShape scratch_shape(const ModelConfig& c, LayerRange range, std::span<const LayerScratchShape> layers, int n,
                           bool top_k_ffn);
// The same for a loaded model's range.
ScratchShape scratch_shape(const Model& m, int n, bool top_k_ffn);

struct Scratch {
  Scratch() = default;
  Scratch(const ScratchShape& shape, int n_workers) { reshape(shape, n_workers); }
  // Readies the buffers for a call of `shape` on n_workers workers. They only grow: a call writes
  // each part of a buffer before reading it (the node's layers already take turns in them within
  // one call), so an earlier call's bytes never reach a result, and a buffer as large as the
  // largest call is neither allocated nor zeroed again. What a call adds up starts at zero.
  void reshape(const ScratchShape& shape, int n_workers);
  size_t rows() const { return rows_; }  // the most rows reshape has readied the buffers for

  std::vector<float> x, x_next;              // [n, n_embd] residual stream into / out of a layer
  std::vector<float> attn_norm;              // [n, n_embd]
  std::vector<float> q, attn_out;            // [n_q, n_head · D]
  std::vector<float> k, v;                   // [n, n_head_kv · D]
  std::vector<float> x1, ffn_in;             // [n_q, n_embd] after the attention residual; its FFN norm
  std::vector<float> gate, up, act;          // [n_q, n_ff]
  std::vector<float> proj;                   // [n_q, n_embd] a closing projection: W_o, then W_down
  std::vector<uint8_t> xc_q, xc_k, xc_v;     // attn_norm [n, n_embd] converted for attn_q / attn_k / attn_v
  std::vector<uint8_t> xc_o;                 // attn_out converted for attn_output
  std::vector<uint8_t> xc_gate, xc_up;       // ffn_in converted for ffn_gate / ffn_up
  std::vector<uint8_t> xc_down;              // act converted for ffn_down
  std::vector<std::vector<float>> heads_q;   // [workers][n_q, heads per KV head, D] queries of one KV head
  std::vector<std::vector<float>> heads_out; // [workers] the same heads' attention output
  std::vector<Status> errors;                // [workers] first failure of each worker
  std::vector<uint8_t> keep;                 // [n_q, n_ff] top-K FFN: 1 where a feature is kept
  std::vector<std::vector<uint64_t>> top_k_keys;  // [workers] select_top_k's scratch
  // [workers][sessions of the call] the top-K FFN's statistics of the worker's rows
  std::vector<std::vector<ApproxStats>> ffn_stats;
  MoeScratch moe;                            // the mixture-of-experts FFN's buffers (MoE layers only)
  std::vector<ExitState> exit;               // [sessions] worker 0's early-exit state of each last row
  double attention_ms = 0, ffn_ms = 0;       // worker 0's view, summed over layers
  double layers_ms = 0;                      // worker 0's time in run_layers

 private:
  size_t rows_ = 0;
};

// A model's Scratch between its forward calls of many rows, so that the next such call does not
// allocate and zero its buffers again: 35 ms of a 128-row call on 31B widths (70 MB), all of it
// on the caller's thread while the workers wait. Holds the largest call's buffers, which the
// memory budget counts anyway (node_needs' scratch at the node's most tokens per call). Calls of
// fewer rows (decode, short prompts) get fresh buffers, cheap to zero (0.3 ms for one row, 2 ms
// for 8): kept ones gained nothing there, an 8-row prompt's layers ran 4–5% slower in them
// (docs/benchmarks.md, "Speed III: the call's buffers kept, and a dynamic split tried"). Calls
// that overlap (a second one is refused) each get their own.
class ScratchSpare {
 public:
  ScratchSpare() = default;
  ~ScratchSpare() { delete kept_.load(); }
  ScratchSpare(const ScratchSpare&) = delete;
  ScratchSpare& operator=(const ScratchSpare&) = delete;

  static constexpr size_t kMinRows = 32;

  // For a call of at least kMinRows rows, the kept Scratch where it holds `rows` rows but not
  // twice as many; else a new one.
  std::unique_ptr<Scratch> take(size_t rows);
  // Keeps the larger of it (if it holds kMinRows rows) and the kept one, freeing the other.
  void give_back(std::unique_ptr<Scratch> scratch);

 private:
  std::atomic<Scratch*> kept_{nullptr};  // atomic: the wasm32-wasi build has no mutex
};

}  // namespace lf
