// The Gemma 3 / Gemma 4 forward pass as llama.cpp's CPU backend computes it
// (docs/gemma-architecture.md, "Gemma 4 forward", "Gemma 3" and "CPU backend numerics"): embedding
// lookup, a node's layers over a session's KV cache, and the LM head. docs/forward-pass.md walks
// through the steps with the names used here.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "model/session.h"
#include "model/model.h"
#include "base/status.h"

namespace lf {

// tokens [n] -> out [n, n_embd] = token_embd[token] · sqrtf(n_embd). Needs model.has_embedding.
Status embed(const Model& model, const int32_t* tokens, int n, float* out);

// Runs layers [model.range.begin, model.range.end) on n new positions start_pos .. start_pos+n-1.
// in [n, n_embd] -> out [n, n_embd], or [1, n_embd] (the last position) with last_only: then the
// final layer carries only that row past attention, as llama.cpp does for its output rows.
// On error the session is left exactly as it was: everything is validated before the cache is
// touched (start_pos must equal session.n_past(), the input must be finite, the context must
// have room), and n_past only moves once every layer has run.
// Each layer is split across the model's pool (docs/threads.md); the output bytes are the same
// for every thread count. One forward runs on a model at a time: a call while another runs fails
// with failed_precondition.
Status forward(const Model& model, Session& session, int start_pos, std::span<const float> in, int n,
               std::span<float> out, bool last_only);
// Same, with in/out sized from n and last_only.
Status forward(const Model& model, Session& session, int start_pos, const float* in, int n, float* out,
               bool last_only);
// forward() without waiting: validates, hands the work to the model's pool and returns. done is
// then called once, on a pool thread, with the outcome; in, out and session must stay alive and
// untouched until then. An error returned here (validation, pool busy) means done is never called.
// In the wasm32-wasi build (no threads) the work and done run before this returns.
Status forward_async(const Model& model, Session& session, int start_pos, std::span<const float> in, int n,
                     std::span<float> out, bool last_only, std::function<void(const Status&)> done);

// hidden [n_rows, n_embd] -> logits [n_rows, n_vocab]: output_norm, the LM head (output.weight or
// the tied token_embd), then the final soft-cap if the model has one. Needs model.has_head.
Status head(const Model& model, const float* hidden, int n_rows, float* logits);

}  // namespace lf
