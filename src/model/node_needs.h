// What a node of layers [begin, end) needs, known from the GGUF header before any tensor is
// read: which tensors it loads, and the bytes of its weights, of one session's KV cache and of a
// forward's scratch. The host sizes and refuses a node by these (an edge isolate has ~128 MiB),
// so they come from the code that allocates, never from a copy of its constants.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "model/scratch.h"

namespace lf {

struct NodeShape {
  LayerRange range;
  bool with_embedding = false;  // the first node: token_embd
  bool with_head = false;       // the last node: output_norm and the LM head
  int max_ctx = 0;              // positions of a session; 0: the model's n_ctx_train
  int max_tokens = 1;           // rows of one forward call
  // The first node of a model with per-layer embeddings reads per_layer_token_embd by rows
  // (ModelLoadOptions::per_layer_rows_from_host) instead of holding it.
  bool per_layer_rows = false;
  GgmlType k_type = GgmlType::F16;  // the KV cache's types (KvCacheOptions)
  GgmlType v_type = GgmlType::F16;
  int max_span = 0;                 // the longest media span a session takes (attn_chunk_for)
};

struct NodeNeeds {
  std::vector<std::string> tensors;   // in the file's order of expected tensors
  uint64_t tensor_bytes = 0;
  uint64_t kv_bytes_per_session = 0;  // KvCache at max_ctx
  uint64_t scratch_bytes = 0;         // one forward of max_tokens rows, shared by the workers
  uint64_t scratch_bytes_per_worker = 0;
  // While loading, the in-place relayout's buffer of one tensor (ModelLoadOptions), freed
  // before any session exists.
  uint64_t relayout_bytes = 0;
  // The first node of a model with per-layer embeddings: the bytes of one token's row of
  // per_layer_token_embd, what a host budgets a cache of rows by (0 on other nodes).
  uint64_t per_layer_row_bytes = 0;
  // Shared KV across nodes (kv_layers_mirrored, kv_layers_shipped): the source layers whose rows
  // the node is given (their mirror is in kv_bytes_per_session) and those whose rows it hands
  // out, with one position's bytes of each (K and V in the cache's types).
  struct KvLayer {
    int layer = 0;
    uint64_t bytes_per_token = 0;
  };
  std::vector<KvLayer> kv_rows_in, kv_rows_out;
};

// Tensor names a node loads: its layers', token_embd on the first node (and on the last when
// the head is tied to it) with the per-layer embedding tensors (per_layer_token_embd unless it
// is read by rows), rope_freqs where one of its layers uses them, the head on the last.
Status node_tensors(const GgufFile& file, const ModelConfig& config, const NodeShape& shape, std::vector<std::string>* out);

Status node_needs(const GgufFile& file, const NodeShape& shape, NodeNeeds* out);

// What load_model makes of layer il's tensors in `file`, configured as c, as far as a forward's
// scratch is concerned (refused where load_model's plan of the layer's shards is).
Status layer_scratch_shape(const GgufFile& file, const ModelConfig& c, int il, LayerScratchShape* out);

}  // namespace lf
