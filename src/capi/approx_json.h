// The approximate modes' JSON at the C ABI (docs/approximate.md): a session's options and the
// early-exit state handed between nodes, read; what the last forward did, written.
#pragma once

#include <string>

#include "approx/approx.h"
#include "base/status.h"
#include "model/session.h"

namespace lf::capi {

// json {"truncated_attention": bool, ...} -> *options, whose other fields keep their defaults.
// Never throws: the parse is the non-throwing one and each value's type is checked before it
// is read. Errors name the key and what it must be.
Status parse_approx_options(const char* text, ApproxOptions* options);

// json {"exit_layer": int >= -1, "recent_updates": [numbers >= 0]} -> *state.
Status parse_exit_state(const char* text, ExitState* state);

// The last forward's truncated attention, top-K FFN and early exit, as lf_session_approx_stats
// answers them.
std::string approx_stats_json(const ForwardReport& last);

}  // namespace lf::capi
