#include "moe_weights.h"

#include <cmath>

namespace lf::make_model {

void write_moe_metadata(const ModelConfig& m, GgufWriter& w) {
  w.set_u32("gemma4.expert_count", static_cast<uint32_t>(m.n_expert));
  w.set_u32("gemma4.expert_used_count", static_cast<uint32_t>(m.n_expert_used));
  w.set_u32("gemma4.expert_feed_forward_length", static_cast<uint32_t>(m.n_ff_exp));
}

Status add_moe_layer_tensors(const ModelConfig& c, const MakeSettings& s, const std::string& p, TensorAdder& t) {
  const int64_t n_embd = c.n_embd, n_ff = c.n_ff_exp, n_expert = c.n_expert;
  // The router's input is RMSNorm(x1) / sqrt(n_embd) ⊙ scale, a vector of norm ~1: a weight of
  // std 2 spreads the logits over a few nats, so routing depends on the token without being
  // near a tie (a flip at the top-k boundary from rounding noise would change the output).
  // llama-quantize keeps ffn_gate_inp F32.
  LF_RETURN_IF_ERROR(t.matrices_of_type(p + "ffn_gate_inp.weight", n_embd, n_expert, 1, 2.0f, GgmlType::F32));
  LF_RETURN_IF_ERROR(t.norm(p + "ffn_gate_inp.scale", n_embd));
  LF_RETURN_IF_ERROR(t.norm(p + "pre_ffw_norm_2.weight", n_embd));
  LF_RETURN_IF_ERROR(t.norm(p + "post_ffw_norm_1.weight", n_embd));
  LF_RETURN_IF_ERROR(t.norm(p + "post_ffw_norm_2.weight", n_embd));
  const float in_std = 1.0f / std::sqrt(static_cast<float>(n_embd));
  if (c.fused_gate_up) {
    // Each expert's gate rows, then its up rows.
    LF_RETURN_IF_ERROR(t.matrices(p + "ffn_gate_up_exps.weight", n_embd, 2 * n_ff, n_expert, in_std));
  } else {
    LF_RETURN_IF_ERROR(t.matrices(p + "ffn_gate_exps.weight", n_embd, n_ff, n_expert, in_std));
    LF_RETURN_IF_ERROR(t.matrices(p + "ffn_up_exps.weight", n_embd, n_ff, n_expert, in_std));
  }
  const float down_std = 1.0f / std::sqrt(static_cast<float>(n_ff));
  LF_RETURN_IF_ERROR(t.matrices(p + "ffn_down_exps.weight", n_ff, n_embd, n_expert, down_std));
  if (s.down_exps_scale) {
    // Away from 1 so an engine that ignores the scale is caught.
    LF_RETURN_IF_ERROR(t.vector_f32(p + "ffn_down_exps.scale", n_expert,
                                    [](const Stream& s, uint64_t i) { return 0.5f + s.uniform(i); }));
  }
  return Status();
}

}  // namespace lf::make_model
