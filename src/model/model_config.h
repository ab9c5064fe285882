// Per-layer configuration of a dense Gemma 3 / Gemma 4 model, read from GGUF metadata and checked
// against the tensor table (docs/gemma-architecture.md, "Gemma 4 dense" and "Gemma 3";
// docs/gguf.md, "Metadata llama.cpp requires" and "Tensors"). Anything we cannot run exactly as
// llama.cpp does is refused here, at load, with a message naming what is unsupported.
#pragma once

#include <vector>

#include "gguf/gguf_reader.h"
#include "base/status.h"

namespace lf {

enum class Arch { gemma3, gemma4 };

struct LayerConfig {
  bool sliding = false;          // sliding-window attention (window ModelConfig::n_swa)
  int head_dim = 0;              // D: key_length(_swa); value length is the same
  int n_head = 0;
  int n_head_kv = 0;             // divides n_head; query head h reads KV head h / (n_head / n_head_kv)
  int n_rot = 0;                 // rotated dims per head (NEOX pairs (j, j + n_rot/2))
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // multiplies the angle (1 / rope.scaling.factor on global layers)
  bool use_freq_factors = false; // gemma4 global layers divide angles by rope_freqs
  bool has_v = true;             // false: V is the pre-norm K projection (gemma4 global layers)
  bool has_output_scale = false; // gemma4 blk.N.layer_output_scale present
  // The FFN's width, per layer: E2B's shared-KV layers are double wide; a MoE layer's shared MLP.
  int n_ff = 0;
  // The layer whose KV cache this one attends over: its own index, or for a gemma4 shared-KV
  // layer an earlier layer's (docs/gemma-architecture.md, "Shared-KV layers").
  int kv_layer = 0;
  bool shares_kv = false;        // computes only Q: no attn_k / attn_v / attn_k_norm of its own
  bool moe = false;              // gemma4 blk.N.ffn_gate_inp present: routed experts beside the shared MLP

  int q_dim() const { return head_dim * n_head; }     // width of Q and of the attention output
  int kv_dim() const { return head_dim * n_head_kv; } // width of K and V
};

struct ModelConfig {
  Arch arch = Arch::gemma4;
  int n_embd = 0;
  int n_layer = 0;
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_swa = 0;              // sliding window size; 0 when no layer slides
  float norm_eps = 1e-6f;
  float final_softcap = 0.0f; // 0: no final logit soft-cap
  float query_scale = 1.0f;   // gemma3 multiplies Q by this after RoPE; 1 in gemma4
  bool tied_output = true;    // no output.weight: the LM head is token_embd
  // gemma4 E2B/E4B (docs/gemma-architecture.md, "E2B and E4B"): width of each layer's
  // per-layer embedding input (0: none), and how many last layers share an earlier KV cache.
  int n_embd_per_layer = 0;
  int n_shared_kv = 0;
  // Mixture of experts (docs/gemma-architecture.md, "Mixture of experts"), the same for every
  // MoE layer; 0 when no layer has experts.
  int n_expert = 0;           // expert_count
  int n_expert_used = 0;      // expert_used_count: experts each token is routed to
  int n_ff_exp = 0;           // expert_feed_forward_length: one expert's width
  bool fused_gate_up = false; // ffn_gate_up_exps (gate rows, then up rows, per expert) instead of ffn_gate_exps + ffn_up_exps
  std::vector<LayerConfig> layers;  // [n_layer]
};

// Reads and validates the configuration. Errors (Code::unsupported or Code::malformed) name the
// missing key, the unsupported feature, or the tensor with its expected and actual shape.
Status load_model_config(const GgufFile& file, ModelConfig* out);

// The architecture name of Gemma 4's MTP drafters (docs/gemma-architecture.md, "The MTP drafter").
inline constexpr const char* kAssistantArch = "gemma4-assistant";

// A drafter's own configuration, read as gemma4 layers: every layer computes only Q (shares_kv;
// kv_layer is set when it is loaded beside a target, model/drafter.h), no final soft-cap, the LM
// head tied to its token_embd; *n_embd_backbone is its target's width (embedding_length_out).
// Errors name the key or tensor, as load_model_config's.
Status load_assistant_config(const GgufFile& file, ModelConfig* out, int* n_embd_backbone);

}  // namespace lf
