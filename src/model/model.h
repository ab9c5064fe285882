// A node's share of a model: the configuration plus typed views onto the weights of the layers
// it runs. The tensor bytes stay where the host put them (an mmap natively, wherever the JS host
// placed them in WASM); a Model never copies or owns them, so they must outlive it. With
// ModelLoadOptions::relayout_in_place it rewrites some of them in place.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "model/shard_plan.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "layout/weight_view.h"

namespace lf {

struct LayerRange {
  int begin = 0, end = 0;  // layers [begin, end)
};

// Shapes with D = head_dim, H = n_head, K = n_head_kv of the layer; W [n_out, n_in].
struct LayerWeights {
  WeightView attn_norm;           // [n_embd]
  WeightView attn_q;              // [D·H, n_embd]
  WeightView attn_k;              // [D·K, n_embd]
  WeightView attn_v;              // [D·K, n_embd]; absent in gemma4 global layers (V = K projection)
  WeightView attn_output;         // [n_embd, D·H]
  WeightView attn_q_norm;         // [D], shared by all heads
  WeightView attn_k_norm;         // [D]
  WeightView post_attention_norm; // [n_embd]
  WeightView ffn_norm;            // [n_embd]
  WeightView ffn_gate;            // [n_ff, n_embd]
  WeightView ffn_up;              // [n_ff, n_embd]
  WeightView ffn_down;            // [n_embd, n_ff]
  WeightView post_ffw_norm;       // [n_embd]
  WeightView layer_output_scale;  // [1]; gemma4 only, optional
  // The gated per-layer branch of E2B/E4B (docs/gemma-architecture.md, "E2B and E4B"), n_pl =
  // n_embd_per_layer; absent without per-layer embeddings.
  WeightView inp_gate;            // [n_pl, n_embd]
  WeightView proj;                // [n_embd, n_pl]
  WeightView post_norm;           // [n_embd]

  // Mixture of experts, in MoE layers only (docs/gemma-architecture.md, "Mixture of experts").
  // E = n_expert, F = n_ff_exp; an expert tensor is E matrices one after another, seen as one
  // view of E·n_out rows (expert_rows() picks one expert's); with relayout_in_place, where this
  // build's kernel reads its type so, each expert's matrix in row strips.
  WeightView ffn_gate_inp;         // [E, n_embd] the router
  WeightView ffn_gate_inp_scale;   // [n_embd] the router input's scale
  WeightView pre_ffw_norm_2;       // [n_embd] the experts' input norm
  WeightView post_ffw_norm_1;      // [n_embd] the shared MLP's output norm
  WeightView post_ffw_norm_2;      // [n_embd] the experts' output norm
  WeightView ffn_gate_up_exps;     // E × [2F, n_embd]: gate rows then up rows; or absent and
  WeightView ffn_gate_exps;        // E × [F, n_embd]
  WeightView ffn_up_exps;          // E × [F, n_embd]
  WeightView ffn_down_exps;        // E × [n_embd, F]
  WeightView ffn_down_exps_scale;  // [E]; optional, multiplies expert e's output

  // The matrices the layer multiplies by (attn_v may be absent)
  std::array<WeightView*, 7> matmuls() { return {&attn_q, &attn_k, &attn_v, &attn_output, &ffn_gate, &ffn_up, &ffn_down}; }
  std::array<const WeightView*, 7> matmuls() const {
    return {&attn_q, &attn_k, &attn_v, &attn_output, &ffn_gate, &ffn_up, &ffn_down};
  }
};

// Rows [e·n_out, (e+1)·n_out) of a stacked expert tensor W (the file's layout, or each
// matrix in row strips) -> expert e's matrix.
inline WeightView expert_rows(const WeightView& W, int e, int64_t n_out) {
  WeightView v = W;
  v.n_out = n_out;
  v.data = W.data + static_cast<uint64_t>(e) * static_cast<uint64_t>(n_out) * W.row_bytes;
  return v;
}

class ScratchSpare;  // model/scratch.h

struct Model {
  ModelConfig config;
  LayerRange range;
  bool has_embedding = false;       // first node: token_embd loaded, embed() allowed
  bool has_head = false;            // last node: output_norm + output loaded, head() allowed
  WeightView token_embd;            // [n_vocab, n_embd] (rows are token embeddings)
  WeightView output_norm;           // [n_embd]
  WeightView output;                // [n_vocab, n_embd]: output.weight, or token_embd when tied
  WeightView rope_freqs;            // [D_global / 2]; present when the range has a gemma4 global layer
  // The vocabulary rows [vocab_begin, vocab_end) that token_embd, output and per_layer_token_embd
  // hold: all of them on a node; a tensor-parallel member at a pipeline's end holds its slice,
  // embeds only its tokens and gives only their logits (model/member.h).
  int64_t vocab_begin = 0, vocab_end = 0;
  // The per-layer embedding inputs' tensors, on the first node with n_embd_per_layer > 0 (it
  // computes every layer's input, per_layer_embd.h); n_pl_all = n_embd_per_layer · n_layer.
  // With per_layer_rows_from_host the table is not in memory: per_layer_token_embd is its type
  // and row size only (data nullptr), and the host hands each call the rows of its tokens.
  bool per_layer_rows_from_host = false;
  WeightView per_layer_token_embd;  // [n_vocab, n_pl_all]
  WeightView per_layer_model_proj;  // [n_pl_all, n_embd]
  WeightView per_layer_proj_norm;   // [n_embd_per_layer]
  std::vector<LayerWeights> layers; // [range.end - range.begin]
  std::vector<LayerShards> shards;  // [range.end - range.begin]: the shard plan, made at load
  // The workers forward() runs on; started at load, shared by copies of this Model, which
  // therefore cannot run forwards at the same time (the second is refused).
  std::shared_ptr<ThreadPool> pool;
  // The buffers of its largest forward call of many rows, for the next such call (made with the
  // pool; none: each call allocates its own).
  std::shared_ptr<ScratchSpare> spare_scratch;

  const LayerWeights& layer(int il) const { return layers[il - range.begin]; }
  const LayerShards& shard(int il) const { return shards[il - range.begin]; }
};

// Where a tensor's bytes are, or nullptr when the host has not loaded it.
using TensorLocator = std::function<const uint8_t*(const GgufTensorInfo&)>;

struct ModelLoadOptions {
  LayerRange range;
  bool with_embedding = false;
  bool with_head = false;
  int n_threads = 1;  // workers of the model's pool (always 1 in the wasm32-wasi build)
  // The host's tensor bytes are writable and this Model's alone: where this build's kernel reads
  // them so (gemm_uses_row_strips: the relaxed-SIMD module's Q4_0), every matmul weight of a
  // layer is rewritten in place into row strips (src/layout/row_strips.h), each expert's matrix
  // of a MoE layer on its own.
  // The forward's bytes do not change. The tensors then no longer hold the file's layout: load
  // no second Model from the same bytes, and read them only through WeightView::columns() and
  // the kernels (reference_forward cannot run on such a Model). Needs one strip's bytes of extra
  // memory during the load (with ffn_down_feature_major, ffn_down's bytes).
  bool relayout_in_place = false;
  // With relayout_in_place: ffn_down goes feature-major instead (src/layout/feature_major.h)
  // where its type allows, so that the top-K gate FFN (approx.h) reads only the columns of the
  // features it keeps. The forward's bytes do not change.
  bool ffn_down_feature_major = false;
  // With with_embedding on a model with per-layer embeddings: per_layer_token_embd (E2B: 2.35 B
  // values) is not located, only its shape read; per_layer_inputs_from_rows takes the rows of
  // each call's tokens instead (docs/forward-pass.md, "The per-layer table by rows").
  bool per_layer_rows_from_host = false;
  // Model::vocab_begin / vocab_end; vocab_end -1: the whole vocabulary.
  int64_t vocab_begin = 0, vocab_end = -1;
};

// Reads the configuration (load_model_config) and locates every tensor the node needs.
// A needed tensor the locator returns nullptr for is an error naming it.
Status load_model(const GgufFile& file, const TensorLocator& locate, const ModelLoadOptions& options, Model* out);
// load_model with the configuration already read and checked against the file (a drafter's,
// model/drafter.h).
Status load_model_with_config(const GgufFile& file, const TensorLocator& locate, ModelConfig config,
                              const ModelLoadOptions& options, Model* out);
// A required tensor's view onto the host's bytes, refused by name when absent, not loaded or
// not finite.
Status locate_tensor(const GgufFile& file, const TensorLocator& locate, const std::string& name, WeightView* out);
// W, a matrix in the file's layout on bytes that are writable and W's own -> the layout this
// build's kernel reads its type in (row strips, as ModelLoadOptions::relayout_in_place lays out
// a layer's), one strip at a time; left as it is where the kernel reads the file's layout.
void relayout_for_kernel(WeightView* W);

// Replaces the model's pool by one of n_threads workers (1 .. kMaxThreads). The output of
// forward() is byte-identical for every count. Not while a forward runs on the model.
constexpr int kMaxThreads = 256;
Status set_threads(Model* model, int n_threads);

}  // namespace lf
