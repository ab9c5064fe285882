// Per-layer embeddings of Gemma 4 E2B/E4B as llama.cpp computes them (docs/gemma-architecture.md,
// "E2B and E4B"): every layer gets an input of n_pl = n_embd_per_layer values per token, made once
// from the token ids and the scaled token embedding, and adds a gated branch of it to the
// residual stream after its FFN.
//
// Where the inputs come from in a pipeline (docs/forward-pass.md, "Per-layer inputs and shared
// KV in a pipeline"): the first node computes every layer's, and they travel with the hidden
// states; a node hands the next one only the layers still to come. They are laid out
// layer-major, [n_layer, n, n_pl], so the slice of layers [a, b) is one contiguous run of
// (b - a)·n·n_pl floats.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "model/layer.h"
#include "model/model.h"

namespace lf {

// tokens [n] and their embeddings x0 [n, n_embd] as embed() scales them -> out [n_layer, n, n_pl]:
//   P = per_layer_token_embd[token] · sqrt(n_pl)
//   Q = RMSNorm_l((per_layer_model_proj · x0) · 1/sqrt(n_embd)) ⊙ per_layer_proj_norm
//   inp_l = (Q_l + P_l) · 1/sqrt(2)
// with the RMSNorm over each layer's n_pl values. Needs the first node (has_embedding) of a model
// with per-layer embeddings.
Status per_layer_inputs(const Model& model, const int32_t* tokens, int n, const float* x0, float* out);

// Rows of per_layer_token_embd the host read for a call, when the first node does not hold the
// table (ModelLoadOptions::per_layer_rows_from_host). Row id's bytes are one contiguous range of
// the file's tensor, [offset + id · row_bytes, + row_bytes), in the tensor's type: n_pl_all
// values, a whole number of the type's blocks (docs/gguf.md, "Rows of a tensor").
struct PerLayerRows {
  const int32_t* ids = nullptr;   // [n_rows], distinct token ids
  int n_rows = 0;
  const uint8_t* data = nullptr;  // [n_rows, row_bytes]: row i is ids[i]'s
  uint64_t row_bytes = 0;         // must be the tensor's row size
};

// per_layer_inputs with P made from rows supplied for the tokens instead of the table: the same
// arithmetic, so the same bytes. Every token needs its row among rows.ids; rows of the wrong
// size, ids outside the vocabulary or given twice, and non-finite values are refused by name.
Status per_layer_inputs_from_rows(const Model& model, const int32_t* tokens, int n, const float* x0,
                                  const PerLayerRows& rows, float* out);

// The per_layer_inputs_from_rows call's own buffers beyond per_layer_inputs' for n tokens.
inline uint64_t per_layer_rows_lookup_bytes(int n) {
  return static_cast<uint64_t>(n) * (sizeof(const uint8_t*) + 2 * sizeof(int32_t));
}

// Floats of the per-layer inputs a node of layers [begin, end) needs for n tokens (0 without them).
inline uint64_t per_layer_input_floats(const ModelConfig& c, int begin, int end, int n) {
  return static_cast<uint64_t>(end - begin) * static_cast<uint64_t>(n) * static_cast<uint64_t>(c.n_embd_per_layer);
}

// Token t of a layer call, y [n_embd] its residual stream after the FFN residual:
//   y += RMSNorm(proj · (gelu(inp_gate · y) ⊙ inp_l)) ⊙ post_norm
// with inp_l the session's per-layer input of that layer and token.
void add_per_layer_branch(const LayerCall& c, int64_t t, float* y);

}  // namespace lf
