// The mixture-of-experts parts of a synthetic gemma4 model (docs/gguf.md, "MoE tensors and
// keys"): the expert keys and each layer's router, expert and extra norm tensors.
#pragma once

#include <string>

#include "base/status.h"
#include "gguf/gguf_writer.h"
#include "settings.h"
#include "tensor_adder.h"

namespace lf::make_model {

// gemma4.expert_count, expert_used_count, expert_feed_forward_length.
void write_moe_metadata(const ModelConfig& model, GgufWriter& w);

// Layer prefix p ("blk.3.") -> its router, experts and the norms of the two FFN branches.
Status add_moe_layer_tensors(const ModelConfig& model, const MakeSettings& settings, const std::string& p,
                             TensorAdder& t);

}  // namespace lf::make_model
