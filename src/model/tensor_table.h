// The tensors a model of a configuration holds, by name, shape and role (docs/gguf.md, "Tensors"),
// and the check of a file's tensor table against them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "model/model_config.h"

namespace lf {

// How a tensor is used decides which types we accept for it.
enum class TensorRole {
  matmul,     // 2-D weight applied as W·x (or gathered by rows for the embedding)
  f32_vector, // norms, rope_freqs, layer_output_scale: F32, read as floats
};

struct TensorSpec {
  std::string name;
  int64_t ne0 = 0, ne1 = 1;
  TensorRole role = TensorRole::matmul;
  bool required = true;
  int64_t ne2 = 1;  // experts of a 3-D expert tensor [ne0, ne1, n_expert]
  int64_t ne3 = 1;  // a 4-D tensor's last axis (the vision tower's patch kernels)
};

// Every tensor a model of this configuration may contain, with its expected shape.
std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

// Name of a per-layer tensor as the GGUF spells it: layer_tensor_name(3, "attn_q") ->
// "blk.3.attn_q.weight"; with a suffix, layer_tensor_name(3, "ffn_gate_inp", "scale") ->
// "blk.3.ffn_gate_inp.scale".
std::string layer_tensor_name(int il, const char* short_name, const char* suffix = "weight");

// Every tensor of the file is one of expected_tensors(config), of its shape and of a type its
// role accepts, and every required one is there; errors name the tensor.
Status check_tensors(const GgufFile& file, const ModelConfig& config);

// The tensors of a gemma4-assistant drafter (model/drafter.h) whose target is n_embd_backbone wide.
std::vector<TensorSpec> assistant_tensors(const ModelConfig& config, int n_embd_backbone);

// The name check_tensor_specs knows a Gemma 4 projector's vision tower by (vision/vision_weights.h):
// the projector type its file gives.
inline constexpr const char* kVisionArch = "gemma4v";
// ... and its audio encoder (audio/audio_weights.h).
inline constexpr const char* kAudioArch = "gemma4a";
// check_tensors against a list of specs; arch names the model in the error of an unexpected tensor.
Status check_tensor_specs(const GgufFile& file, const std::vector<TensorSpec>& specs, const std::string& arch);

}  // namespace lf
