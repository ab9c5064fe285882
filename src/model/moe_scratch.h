// The buffers of a mixture-of-experts FFN (model/ffn_moe.cpp) for one forward call, sized for
// the largest MoE layer of the node's range (docs/gemma-architecture.md, "Mixture of experts").
// A slot is one (token, chosen expert) pair; slots are grouped by expert, in token order inside
// an expert, so that each expert's tokens are one block of rows for its GEMMs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf/ggml_type.h"
#include "model/model_config.h"

namespace lf {

// What a MoE layer's buffers depend on; all 0 for a dense layer.
struct MoeLayerShape {
  int64_t n_expert = 0, n_used = 0, n_ff_exp = 0;
  // Bytes of one activation row converted for ffn_gate_inp, the gate/up experts and ffn_down_exps;
  // up_row for separate ffn_up_exps whose vec_dot type is not the gate's (0: up reads the gate's).
  uint64_t router_row = 0, exps_row = 0, up_row = 0, down_row = 0;

  // The larger of each field: a range's buffers serve every layer of it.
  void widen(const MoeLayerShape& other);
  // The buffers' bytes for a call of `rows` rows.
  uint64_t bytes(size_t rows, size_t n_embd) const;
};
// Layer il of c, its router, gate/up (or gate), up and down experts of these types (dense layer:
// all 0). With fused gate/up, `up` is the fused tensor's type.
MoeLayerShape moe_layer_shape(const ModelConfig& c, int il, GgmlType router, GgmlType exps, GgmlType up, GgmlType down);

// Separate gate and up experts whose types multiply different activation formats (Q4_K's Q8_K
// and Q8_0's own, say) each need the expert input converted their way.
bool up_needs_own_activations(GgmlType gate, GgmlType up);

struct MoeScratch {
  std::vector<float> router_in;      // [n_q, n_embd] RMSNorm(x1) · 1/sqrt(n_embd) ⊙ ffn_gate_inp.scale
  std::vector<uint8_t> xc_router;    // router_in converted for ffn_gate_inp
  std::vector<float> probs;          // [n_q, n_expert] softmax of the router logits
  std::vector<int32_t> chosen;       // [n_q, n_used] each token's experts, most probable first
  std::vector<float> weights;        // [n_q, n_used] their probabilities, renormalized
  std::vector<float> exp_in;         // [n_q, n_embd] RMSNorm(x1) ⊙ pre_ffw_norm_2
  std::vector<int32_t> first_slot;   // [n_expert + 1] expert e's slots are [first_slot[e], first_slot[e + 1])
  std::vector<int32_t> next_slot;    // [n_expert] the grouping's cursor per expert
  std::vector<int32_t> slot_token;   // [slots] the token of each slot
  std::vector<int32_t> slot_of;      // [n_q · n_used] the slot of token t's j-th choice, at t · n_used + j
  std::vector<uint8_t> xc_exp;       // [slots] exp_in rows converted for the gate/up experts
  std::vector<uint8_t> xc_exp_up;    // [slots] the same for ffn_up_exps, when up_needs_own_activations
  std::vector<float> gate_up;        // [slots, 2 · n_ff_exp]: gate and up of each slot
  std::vector<float> act;            // [slots, n_ff_exp] gelu(gate) · up
  std::vector<uint8_t> xc_act;       // [slots] act converted for ffn_down_exps
  std::vector<float> down;           // [slots, n_embd] each slot's expert output
  std::vector<float> out;            // [n_q, n_embd] the experts' branch, after post_ffw_norm_2

  void resize(const MoeLayerShape& shape, size_t rows, size_t n_embd);
};

}  // namespace lf
