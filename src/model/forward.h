// The Gemma 3 / Gemma 4 forward pass as llama.cpp's CPU backend computes it
// (docs/gemma-architecture.md, "Gemma 4 forward", "Gemma 3" and "CPU backend numerics"): embedding
// lookup, a node's layers over a session's KV cache, and the LM head. docs/forward-pass.md walks
// through the steps with the names used here.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/session.h"
#include "model/model.h"
#include "base/status.h"

namespace lf {

// Why a call that needs the model's pool is refused while another job holds it.
inline constexpr const char* kPoolBusy = "a forward is already running on this model's threads";

// Refuses, naming it, a token outside the vocabulary rows the model holds (Model::vocab_begin).
Status check_vocab_tokens(const Model& model, const int32_t* tokens, int n);

// tokens [n] -> out [n, n_embd] = token_embd[token] · sqrtf(n_embd). Needs model.has_embedding;
// a member at a pipeline's start embeds the tokens of its vocabulary slice.
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

// One session's part of a batched forward call: n new positions start_pos .. start_pos+n-1,
// the last one only out of the node with last_only.
struct BatchEntry {
  Session* session = nullptr;
  int start_pos = 0;
  int n = 0;
  bool last_only = false;
};

// Several sessions' rows in one pass over the node's layers (docs/batching.md): the projections
// and the FFN as one GEMM over every row, attention per session over its own cache. in holds the
// entries' rows in entry order, out receives each entry's n rows (1 with last_only) in entry
// order. Each entry is validated and finished on its own, exactly as forward() would do it
// alone: (*statuses)[i] is entry i's outcome, and a refused entry leaves its session as it was
// (and its out rows untouched) while the others run. An entry's output bytes are those
// forward() gives its session alone, whatever else the batch holds and wherever it stands in it.
// A non-ok return refuses the call as a whole, before anything ran: no entries, an entry without
// rows, a session twice, buffers of another size than the rows, a forward already running.
Status forward_batch(const Model& model, std::span<const BatchEntry> entries, std::span<const float> in,
                     std::span<float> out, std::vector<Status>* statuses);
// forward_batch() without waiting, as forward_async(): done gets the entries' outcomes, on a
// pool thread (or before this returns when no entry passed validation, and in the wasm32-wasi
// build); in, out and the sessions must stay alive and untouched until then.
Status forward_batch_async(const Model& model, std::span<const BatchEntry> entries, std::span<const float> in,
                           std::span<float> out, std::function<void(std::vector<Status>)> done);

// hidden [n_rows, n_embd] -> logits [n_rows, n_vocab] (a member at a pipeline's end: its slice's,
// [n_rows, vocab_end - vocab_begin]): output_norm, the LM head (output.weight or
// the tied token_embd), then the final soft-cap if the model has one (model/head.cpp). Needs
// model.has_head. The head's rows are shared out over the model's pool (on the calling thread
// alone while a forward holds the pool); each logit is one dot product computed whole by one
// worker, so the bytes do not depend on the thread count.
Status head(const Model& model, const float* hidden, int n_rows, float* logits);
// head() without waiting, as forward_async(): validates, starts the work on the model's pool and
// returns; done then gets the outcome on a pool thread. hidden and logits must stay alive and
// untouched until then. An error returned here (validation, pool busy) means done is never called.
Status head_async(const Model& model, const float* hidden, int n_rows, float* logits,
                  std::function<void(const Status&)> done);

}  // namespace lf
