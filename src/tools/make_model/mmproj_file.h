// A synthetic Gemma 4 vision projector ("mmproj", llama.cpp's gemma4v; docs/vision.md) for a
// target configuration: the converter's keys, tensor names, types and shapes, random weights.
#pragma once

#include <string>

#include "base/status.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "settings.h"
#include "vision/vision_config.h"

namespace lf::make_model {

struct VisionShape {
  // "auto": the tower of the target's family (Google's configs: E2B and E4B a 768-wide tower of
  // 16 layers, clipped linears, no standardization; 26B-A4B and 31B 1152 wide, 27 layers,
  // standardized); "e2b" or "31b" that tower whatever the target; "tiny" the same structure
  // (clipped linears and standardization both) at test size.
  std::string tower = "auto";
  int n_layer = 0;  // > 0: this many layers instead of the tower's
  GgmlType type = GgmlType::F16;  // the matrices' type (published projectors are F16 or BF16)
};

// The tower `shape` names for target, with the target's width as its projection's.
Status vision_config_for(const ModelConfig& target, const VisionShape& shape, VisionConfig* out);

// Adds the projector's keys and tensors to w; settings give the seed.
Status add_mmproj(const ModelConfig& target, const VisionShape& shape, const MakeSettings& settings, GgufWriter* w);

}  // namespace lf::make_model
