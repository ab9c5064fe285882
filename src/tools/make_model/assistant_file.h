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

struct AssistantShape {
  int n_embd = 32;             // the drafter's own width (a multiple of 32 for quantized types)
  int n_ff = 64;
  std::string pattern = "SSG"; // one 'S' (reads the target's layer n-2) or 'G' (layer n-1) per layer
};

// Adds the drafter's keys and tensors for target (complete, as the engine reads it back) to w;
// settings give the vocabulary, types and seed, as for the target.
Status add_assistant(const ModelConfig& target, const AssistantShape& shape, const MakeSettings& settings, GgufWriter* w);

}  // namespace lf::make_model
