// The decoder: a node's layers in order over one forward call's rows (docs/forward-pass.md).
#pragma once

#include <span>
#include <vector>

#include "model/forward.h"
#include "model/scratch.h"

namespace lf {

// Runs layers [m.range.begin, m.range.end) on the rows in scratch.x (every run's rows laid end to
// end, in run order), on one worker of the model's pool: the pool calls it once per worker and
// the workers meet at each layer's barriers. Worker 0 also fills each run's session.last
// layer_ms and row_updates, scratch.exit and scratch.layers_ms.
// top_k: the call runs the top-K gate FFN (approx.h) on its dense layers.
void run_layers(const Model& m, std::span<const BatchEntry> runs, bool top_k, Scratch& scratch, int worker);

// The residual stream alternates between scratch.x and scratch.x_next: the node's i-th layer
// reads residual(scratch, i) and writes residual(scratch, i + 1), so residual(scratch, n_layers)
// is the call's output (its input when the node has no layers).
std::vector<float>& residual(Scratch& scratch, int i);

}  // namespace lf
