#include "weights.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "moe_weights.h"
#include "tensor_adder.h"

namespace lf::make_model {
namespace {

// The model-level tensors of per-layer embeddings (docs/gemma-architecture.md, "E2B and E4B"):
// per_layer_token_embd [n_pl·n_layer, n_vocab] is scaled by sqrt(n_pl) when read, so rows of std
// 1/sqrt(n_pl) give unit-RMS inputs like token_embd's; per_layer_model_proj [n_embd, n_pl·n_layer]
// is a linear map of the scaled token embedding; per_layer_proj_norm [n_pl] its RMSNorm weight.
Status add_per_layer_input_tensors(const ModelConfig& c, TensorAdder& t) {
  const int64_t n_pl = c.n_embd_per_layer;
  const int64_t width = n_pl * c.n_layer;
  LF_RETURN_IF_ERROR(t.matrix("per_layer_token_embd.weight", width, c.n_vocab, 1.0f / std::sqrt(static_cast<float>(n_pl))));
  LF_RETURN_IF_ERROR(t.linear("per_layer_model_proj.weight", c.n_embd, width));
  return t.norm("per_layer_proj_norm.weight", n_pl);
}

}  // namespace

// With a tied embedding E (rows of norm ~1) the logit of token t is E_t · (x̂ ⊙ g), where x̂ has
// norm sqrt(n_embd). An unrelated token then scores ~N(0, g²), while the last prompt token, whose
// embedding still dominates the residual stream, scores ~g·sqrt(n_embd)·cos. With g near 1 that is
// ~sqrt(n_embd) standard deviations and the distribution collapses onto the last token
// (docs/gguf.md, "Synthetic files in llama.cpp"). g = 4/sqrt(n_embd) caps that advantage at a few
// nats for every n_embd, leaving a flat but informative distribution whose ranking still depends on
// every layer.
float default_output_norm_gain(const ModelConfig& m) { return 4.0f / std::sqrt(static_cast<float>(m.n_embd)); }

Status add_weight_tensors(const ModelConfig& c, const MakeSettings& s, GgufWriter& w) {
  TensorAdder t(s, w);
  const int64_t n_embd = c.n_embd, n_vocab = c.n_vocab;
  const float gain = s.output_norm_gain > 0 ? s.output_norm_gain : default_output_norm_gain(c);

  // token_embd [n_embd, n_vocab]: Gemma multiplies the row by sqrt(n_embd), giving unit-RMS input.
  LF_RETURN_IF_ERROR(t.matrix("token_embd.weight", n_embd, n_vocab, 1.0f / std::sqrt(static_cast<float>(n_embd))));
  const auto global = std::find_if(c.layers.begin(), c.layers.end(), [](const LayerConfig& l) { return l.use_freq_factors; });
  if (global != c.layers.end()) {
    // rope_freqs [head_dim_global/2]: pairs past the rotated fraction get an angle divisor of
    // 1e30, i.e. no rotation (docs/gemma-architecture.md, "Proportional RoPE").
    const int64_t n_pairs = global->head_dim / 2;
    const int64_t rotated = static_cast<int64_t>(static_cast<float>(global->head_dim) * s.partial_rotary / 2);
    LF_RETURN_IF_ERROR(t.vector_f32("rope_freqs.weight", n_pairs,
                                    [rotated](const Stream&, uint64_t i) {
                                      return static_cast<int64_t>(i) < rotated ? 1.0f : 1e30f;
                                    }));
  }
  LF_RETURN_IF_ERROR(t.norm("output_norm.weight", n_embd, gain));
  if (!c.tied_output) LF_RETURN_IF_ERROR(t.linear("output.weight", n_embd, n_vocab));

  if (c.n_embd_per_layer > 0) LF_RETURN_IF_ERROR(add_per_layer_input_tensors(c, t));

  for (int il = 0; il < c.n_layer; ++il) {
    const LayerConfig& l = c.layers[static_cast<size_t>(il)];
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t d = l.head_dim;
    const int64_t q_width = l.q_dim();
    const int64_t kv_width = l.kv_dim();
    LF_RETURN_IF_ERROR(t.norm(p + "attn_norm.weight", n_embd));
    LF_RETURN_IF_ERROR(t.linear(p + "attn_q.weight", n_embd, q_width));
    // Shared-KV layers read an earlier layer's cache: no K, V or K norm of their own.
    if (!l.shares_kv) LF_RETURN_IF_ERROR(t.linear(p + "attn_k.weight", n_embd, kv_width));
    if (l.has_v) LF_RETURN_IF_ERROR(t.linear(p + "attn_v.weight", n_embd, kv_width));
    LF_RETURN_IF_ERROR(t.linear(p + "attn_output.weight", q_width, n_embd));
    // Gemma 4 has no 1/sqrt(D) attention scale: with q and k norm gains near 1 the scores of
    // random weights would be ~N(0, D), a softmax so sharp that rounding noise flips which key
    // wins. Gains of D^-1/4 on each side give scores of order 1, as in a trained model.
    const float qk_gain = c.arch == Arch::gemma4 ? 1.0f / std::pow(static_cast<float>(d), 0.25f) : 1.0f;
    LF_RETURN_IF_ERROR(t.norm(p + "attn_q_norm.weight", d, qk_gain));
    if (!l.shares_kv) LF_RETURN_IF_ERROR(t.norm(p + "attn_k_norm.weight", d, qk_gain));
    LF_RETURN_IF_ERROR(t.norm(p + "post_attention_norm.weight", n_embd));
    LF_RETURN_IF_ERROR(t.norm(p + "ffn_norm.weight", n_embd));
    const int64_t n_ff = l.n_ff;
    LF_RETURN_IF_ERROR(t.linear(p + "ffn_gate.weight", n_embd, n_ff));
    LF_RETURN_IF_ERROR(t.linear(p + "ffn_up.weight", n_embd, n_ff));
    LF_RETURN_IF_ERROR(t.linear(p + "ffn_down.weight", n_ff, n_embd));
    LF_RETURN_IF_ERROR(t.norm(p + "post_ffw_norm.weight", n_embd));
    if (c.n_embd_per_layer > 0) {
      // The gated per-layer branch: inp_gate [n_embd, n_pl], proj [n_pl, n_embd], post_norm.
      LF_RETURN_IF_ERROR(t.linear(p + "inp_gate.weight", n_embd, c.n_embd_per_layer));
      LF_RETURN_IF_ERROR(t.linear(p + "proj.weight", c.n_embd_per_layer, n_embd));
      LF_RETURN_IF_ERROR(t.norm(p + "post_norm.weight", n_embd));
    }
    if (l.moe) LF_RETURN_IF_ERROR(add_moe_layer_tensors(c, s, p, t));
    if (l.has_output_scale) {
      // Values away from 1.0 so an engine that ignores the scale is caught (docs/gguf.md,
      // "Synthetic files in llama.cpp").
      LF_RETURN_IF_ERROR(t.vector_f32(p + "layer_output_scale.weight", 1,
                                      [](const Stream& s, uint64_t i) { return 0.5f + s.uniform(i); }));
    }
  }
  return t.check_rules_used();
}

}  // namespace lf::make_model
