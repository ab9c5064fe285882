// Tensors of a synthetic model with deterministic pseudo-random contents (docs/gguf.md, "gemma4
// tensors" and "gemma3 tensors"; tensor_adder.h makes them).
#pragma once

#include <cstdint>

#include "gguf/gguf_writer.h"
#include "base/status.h"
#include "model_config.h"

namespace lf::make_model {

// output_norm gain used when cfg.output_norm_gain is 0 (see the reasoning at its definition).
float default_output_norm_gain(const ModelConfig& cfg);

Status add_weight_tensors(const ModelConfig& cfg, uint32_t n_vocab, GgufWriter& w);

}  // namespace lf::make_model
