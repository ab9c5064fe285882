// Gemma 4's MTP drafter (the gemma4-assistant architecture, docs/gemma-architecture.md, "The MTP
// drafter") loaded beside the node that holds its target's head: a few query-only layers over the
// TARGET's KV cache, fed the target's token embedding and last hidden state, giving draft logits
// and the hidden state of its next draft step, as llama.cpp's src/models/gemma4-assistant.cpp.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "model/session.h"

namespace lf {

struct Drafter {
  // The drafter's own layers [0, n_layer) as a Model with its head (output = its token_embd,
  // no soft-cap); each layer's kv_layer is the target layer whose cache it reads.
  Model model;
  int n_embd_backbone = 0;    // B: the target's width
  WeightView target_embd;     // [n_vocab, B] the target's token embedding (its tied head)
  WeightView target_norm;     // [B] the target's output_norm, which its hidden state takes before drafting
  float target_norm_eps = 0;
  WeightView pre_projection;  // [n_embd, 2·B]: [target embedding; target hidden] -> the drafter's width
  WeightView post_projection; // [B, n_embd]: the normed output -> the next step's hidden state
};

// Reads a gemma4-assistant file beside a loaded target node, which must hold the head tied to
// the token embedding and the KV caches the drafter reads (the target's last sliding and last
// global layer, through its shared-KV mapping). Refused by name: a missing or mis-shaped tensor
// or key; a drafter for another target (its width, vocabulary, sliding window, or a layer whose
// head dim or KV head count differs from the target layer it reads). The target's bytes must
// outlive the drafter; the drafter's pool has n_threads workers. With relayout_in_place the
// drafter's located bytes are writable and its own, and its matrices are laid out where this
// build's kernel reads them so (ModelLoadOptions::relayout_in_place), its bytes unchanged.
Status load_drafter(const GgufFile& file, const TensorLocator& locate, const Model& target, int n_threads, Drafter* out,
                    bool relayout_in_place = false);

// One draft step at position target_session.n_past(): token (the last token, not yet in the
// target's cache), h [B] (the target's output-normed hidden state of the row before it, or the
// previous step's h_next) -> logits [n_vocab], h_next [B]. Every step of a draft runs at that
// same position (llama.cpp's shared-KV drafting); the target's cache is read, never written. The
// bytes do not depend on the drafter's thread count. Refused with the outputs' contents
// unspecified: a token outside the vocabulary, a non-finite h, a session with no position yet or
// without the layers the drafter reads, non-finite logits or h_next (the draft should stop).
// Not while the target session runs a forward.
Status draft_step(const Drafter& drafter, const Session& target_session, int32_t token, const float* h,
                  float* logits, float* h_next);

// n_draft greedy draft steps at position pos, as llama.cpp's draft-mtp picks them: token (the
// token at pos) and hidden [B] (the target's hidden state at pos - 1 BEFORE its output norm: a
// node's forward output, which this normalizes) -> ids [n_draft], each the argmax of a step's
// logits (the lowest id among equals), fed to the next step with its h_next. pos lies in
// [1, n_past] and no deeper than the session could be cut back to (KvCache::shortest_cut): keys at
// pos and after are never read, so a verified step whose last drafted rows were rejected drafts
// from its last kept row before the session is cut. Refused as draft_step, and when a step's
// state turns non-finite (the ids then unspecified).
Status draft_greedy(const Drafter& drafter, const Session& target_session, int pos, int32_t token, const float* hidden,
                    int n_draft, int32_t* ids);

}  // namespace lf
