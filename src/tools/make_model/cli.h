// Command line of make_model: a preset plus per-value overrides, validated as a whole.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "model/model_config.h"
#include "assistant_file.h"
#include "audio_tower_file.h"
#include "mmproj_file.h"
#include "settings.h"

namespace lf::make_model {

struct CliArgs {
  ModelConfig model = default_model();  // complete, layers included, once parse_cli succeeds
  MakeSettings settings;
  std::string out_path;
  // The header alone, the file sized as the whole model with its data unwritten (a sparse file
  // of zeros): for what reads only headers (`layerfold plan`) at a real model's size.
  bool header_only = false;
  // Writes the drafter (gemma4-assistant) of the model the rest of the line describes, instead
  // of that model.
  bool assistant = false;
  AssistantShape assistant_shape;
  // --assistant-for / --mmproj-for: the target's GGUF, whose header gives model and the vocabulary
  // (make_model reads it; parse_cli leaves model as the default then).
  std::string target_file;
  // Writes the vision projector (mmproj, gemma4v) of the model the rest of the line describes.
  bool mmproj = false;
  VisionShape vision_shape;
  AudioShape audio_shape;  // --audio: the projector carries the audio encoder (gemma4a) too
  bool list_presets = false;
  bool help = false;
};

// args excludes the program name. Errors are Code::invalid_argument naming the option.
Status parse_cli(const std::vector<std::string>& args, CliArgs* out);

std::string usage_text();

}  // namespace lf::make_model
