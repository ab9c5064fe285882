// What make_model writes beyond the model's configuration (lf::ModelConfig, the engine's): the
// layers' shapes as the command line spells them, by kind, and how the file's contents are made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/ggml_type.h"
#include "model/model_config.h"

namespace lf::make_model {

// synthetic: made here; gemma: a Hugging Face tokenizer.json; gguf: the tokenizer keys of a GGUF
// (llama.cpp's models/ggml-vocab-gemma-4.gguf: the real Gemma 4 vocabulary and chat template).
enum class VocabKind { synthetic, gemma, gguf };

// --tensor-type PATTERN=TYPE (tensor_types.h has the matching rule).
struct TensorTypeRule {
  std::string pattern;
  GgmlType type;
  bool must_match = true;  // a preset's rules may find nothing once its shape is overridden
};

// The layers' shapes by kind (sliding or global), which build_layers spreads over
// ModelConfig::layers. gemma3 has one head dim and one KV head count: the _swa values.
struct LayerKinds {
  int n_head = 4;
  int n_head_kv_swa = 2;
  int n_head_kv_global = 1;
  int head_dim_swa = 32;
  int head_dim_global = 64;
  int n_ff = 128;
  std::vector<int> n_ff_layers;     // explicit per-layer FFN widths; empty = n_ff (doubled below)
  bool double_wide_shared = false;  // shared-KV layers get 2·n_ff (E2B's use_double_wide_mlp)
  std::string swa_pattern;          // one 'S' or 'G' per layer; empty = derived from swa_period
  int swa_period = 6;               // default layout: il % P < P-1 is sliding (gemma4: last layer global)
  float rope_base = 1e6f;           // global layers
  float rope_base_swa = 1e4f;
  bool global_v = false;            // gemma4 global layers carry attn_v (else V = K, as in 31B)
  bool layer_output_scale = true;   // gemma4 only
};

struct MakeSettings {
  LayerKinds layers;
  float partial_rotary = 0.25f;   // gemma4 global layers: fraction of the head dim rotated
  float output_norm_gain = 0;     // 0 = the default chosen in weights.cpp
  float softcap = -1;             // < 0 = architecture default (gemma4 30, gemma3 none)
  bool down_exps_scale = true;    // ffn_down_exps.scale, one factor per expert
  VocabKind vocab = VocabKind::synthetic;
  std::string tokenizer_json;     // the Gemma vocabulary read with VocabKind::gemma; the caller's to give
  std::string vocab_gguf;         // the GGUF read with VocabKind::gguf
  std::string chat_template;      // a file whose text is written as tokenizer.chat_template; empty = the
                                  // vocabulary's own (VocabKind::gguf) or a minimal turn template
  GgmlType type = GgmlType::Q4_0; // matrices incl. token_embd/output and experts, unless a rule says otherwise
  std::vector<TensorTypeRule> tensor_types;  // in command-line order; the last match wins
  uint64_t seed = 1;
};

// The model every preset starts from: gemma4, 2 layers of width 64, 1024 tokens, a context of
// 4096, fused expert gate/up when it has experts.
ModelConfig default_model();

// The per-layer pattern of a period (layer il sliding iff il % P < P-1) and, for gemma4, a global
// last layer as in every real Gemma 4 model: default_swa_pattern(gemma4, 7, 5) -> "SSSSGSG".
std::string default_swa_pattern(Arch arch, int n_layer, int swa_period);

// gemma3 writes its sliding-window layout as a period P (layer il is sliding iff il % P < P-1);
// the period that reproduces pattern, or 0 if the pattern is not of that form.
int gemma3_swa_period(const std::string& pattern);

// Fills model->layers from the kinds (their swa_pattern complete) and model's arch, layer
// count, shared-KV layers and experts, as the engine reads them back from the file written.
void build_layers(const LayerKinds& kinds, ModelConfig* model);

}  // namespace lf::make_model
