// One drafter layer (docs/gemma-architecture.md, "The MTP drafter") on one worker of the
// drafter's pool: the decoder layer's steps, with attention that computes only queries and
// reads the target's cache.
#pragma once

#include "model/kv_cache.h"
#include "model/layer.h"

namespace lf {

// Layer c.il of the drafter on the call's one row at position pos, attending over target_kv's
// layer kv_layer at positions < pos: x [1, n_embd] -> x_next. Ends on a barrier.
void run_drafter_layer(const LayerCall& c, const KvCache& target_kv, int pos);

}  // namespace lf
