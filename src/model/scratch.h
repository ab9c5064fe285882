// Buffers of one forward call, sized once for the largest layer of the node's range and shared
// by the workers; each phase writes disjoint parts (rows, columns or units) of them.
#pragma once

#include <array>
#include <cstdint>
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
  Scratch(const ScratchShape& shape, int n_workers);

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
};

}  // namespace lf
