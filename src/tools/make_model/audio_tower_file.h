// A synthetic Gemma 4 audio encoder (llama.cpp's gemma4a; docs/audio.md) in a projector GGUF,
// beside its vision tower: the converter's keys, tensor names, types and shapes for Google's
// E2B / E4B audio tower, random weights.
#pragma once

#include "audio/audio_config.h"
#include "base/status.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "settings.h"

namespace lf::make_model {

struct AudioShape {
  bool enabled = false;  // --audio
  int n_layer = 0;       // > 0: this many conformer blocks instead of Google's 12
};

// Google's audio tower with the target's width as its projection's; only E-models (per-layer
// embeddings: E2B, E4B) have one, any other target is refused.
Status audio_config_for(const ModelConfig& target, const AudioShape& shape, AudioConfig* out);

// Adds the audio keys and tensors to w (whose general.* and vision keys add_mmproj wrote), the
// matrices in `type` as the converter's one outtype gives both towers; settings give the seed.
Status add_audio_tower(const ModelConfig& target, const AudioShape& shape, GgmlType type, const MakeSettings& settings,
                       GgufWriter* w);

}  // namespace lf::make_model
