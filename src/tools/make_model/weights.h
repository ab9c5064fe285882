// Tensors of a synthetic model with deterministic pseudo-random contents (docs/gguf.md, "gemma4
// tensors" and "gemma3 tensors"; tensor_adder.h makes them).
#pragma once

#include "base/status.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "settings.h"

namespace lf::make_model {

// output_norm gain used when settings.output_norm_gain is 0 (see the reasoning at its definition).
float default_output_norm_gain(const ModelConfig& model);

Status add_weight_tensors(const ModelConfig& model, const MakeSettings& settings, GgufWriter& w);

}  // namespace lf::make_model
