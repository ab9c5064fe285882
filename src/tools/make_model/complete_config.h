// make_model's options checked as a whole, and what they imply filled in: the layer pattern,
// gemma3's period, the soft-cap, the layers of the engine's ModelConfig.
#pragma once

#include "base/status.h"
#include "model/model_config.h"
#include "settings.h"

namespace lf::make_model {

// Errors are Code::invalid_argument naming the option.
Status complete_config(ModelConfig* model, MakeSettings* settings);

}  // namespace lf::make_model
