// What a forward call checks before it touches a session (forward.h's promises): the call as a
// whole, then each entry on its own, so a refused entry leaves its session as it was.
#pragma once

#include <span>

#include "base/status.h"
#include "model/forward.h"

namespace lf {

// The rows an entry gives out: its last one with last_only, else all of them.
inline int out_rows(const BatchEntry& e) { return e.last_only ? 1 : e.n; }

// The call as a whole: entries with rows, distinct sessions, buffers of the rows' sizes.
Status validate_batch(const Model& m, std::span<const BatchEntry> entries, std::span<const float> in,
                      std::span<float> out);

// An entry as forward() would take it alone: its session's range, position and room, the mode
// it asks for, its input rows `in` and its per-layer inputs and shipped K/V rows.
Status validate_entry(const Model& m, const BatchEntry& e, std::span<const float> in);

}  // namespace lf
