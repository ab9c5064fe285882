// A synthetic gemma4-assistant drafter (docs/gemma-architecture.md, "The MTP drafter") for a
// target configuration: the real tensor names, keys and shapes, its attention shaped as the
// target layers it reads.
#pragma once

#include <string>

#include "base/status.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "settings.h"

namespace lf::make_model {

// What the command line sets of the drafter's own shape; 0 or empty: left to assistant_shape.
struct AssistantShape {
  int n_embd = 0;       // the drafter's own width (a multiple of 32 for quantized types)
  int n_ff = 0;
  int n_head = 0;       // query heads of every layer
  std::string pattern;  // one 'S' (reads the target's layer n-2) or 'G' (layer n-1) per layer
};

// The drafter's shape for target: Google's drafter for a target of that width (gemma-4-31B,
// 26B-A4B, E4B, E2B: docs/gemma-architecture.md, "The MTP drafter"), else a small one (width
// 32, FFN 64, SSG, the target's last layer's query heads), with what given sets put over it.
AssistantShape assistant_shape(const ModelConfig& target, const AssistantShape& given);

// Adds the keys and tensors of target's drafter (target complete, as the engine reads it back)
// of assistant_shape(target, given) to w; settings give the vocabulary, types and seed, as for
// the target.
Status add_assistant(const ModelConfig& target, const AssistantShape& given, const MakeSettings& settings, GgufWriter* w);

}  // namespace lf::make_model
