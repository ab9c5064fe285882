#include "vision/vision_weights.h"

namespace lf {
namespace {

using R = TensorRole;

std::string blk(int il, const std::string& name, const char* suffix = "weight") {
  return "v.blk." + std::to_string(il) + "." + name + "." + suffix;
}

}  // namespace

std::vector<TensorSpec> vision_tensors(const VisionConfig& c) {
  ProjectorSpecs s;
  s.add("v.patch_embd.weight", c.patch_size, c.patch_size, R::matmul);
  s.list.back().ne2 = 3;
  s.list.back().ne3 = c.n_embd;
  s.add("v.position_embd.weight", c.n_embd, c.pos_size, R::f32_vector);
  s.list.back().ne2 = 2;
  for (int il = 0; il < c.n_layer; ++il) {
    s.add(blk(il, "ln1"), c.n_embd, 1, R::f32_vector);
    s.linear("v.blk." + std::to_string(il) + ".attn_q", c.n_embd, c.q_dim());
    s.linear("v.blk." + std::to_string(il) + ".attn_k", c.n_embd, c.q_dim());
    s.linear("v.blk." + std::to_string(il) + ".attn_v", c.n_embd, c.q_dim());
    s.add(blk(il, "attn_q_norm"), c.head_dim, 1, R::f32_vector);
    s.add(blk(il, "attn_k_norm"), c.head_dim, 1, R::f32_vector);
    s.linear("v.blk." + std::to_string(il) + ".attn_out", c.q_dim(), c.n_embd);
    s.add(blk(il, "attn_post_norm"), c.n_embd, 1, R::f32_vector);
    s.add(blk(il, "ln2"), c.n_embd, 1, R::f32_vector);
    s.linear("v.blk." + std::to_string(il) + ".ffn_gate", c.n_embd, c.n_ff);
    s.linear("v.blk." + std::to_string(il) + ".ffn_up", c.n_embd, c.n_ff);
    s.linear("v.blk." + std::to_string(il) + ".ffn_down", c.n_ff, c.n_embd);
    s.add(blk(il, "ffn_post_norm"), c.n_embd, 1, R::f32_vector);
    s.add(blk(il, "out_scale"), 1, 1, R::f32_vector, false);
  }
  s.add("v.std_bias", c.n_embd, 1, R::f32_vector, false);
  s.add("v.std_scale", c.n_embd, 1, R::f32_vector, false);
  s.linear("mm.input_projection", c.n_embd, c.n_embd_text);
  return s.list;
}

Status vision_weights(const GgufFile& file, const VisionConfig& c, const uint8_t* data, uint64_t size,
                      VisionWeights* out) {
  LF_RETURN_IF_ERROR(check_tensor_specs(file, vision_tensors(c), kVisionArch));
  if ((file.tensor("v.std_bias") != nullptr) != (file.tensor("v.std_scale") != nullptr)) {
    return Status(Code::unsupported, "the projector has only one of 'v.std_bias' and 'v.std_scale'");
  }
  const ProjectorViews v(file, data, size);
  VisionWeights w;
  LF_RETURN_IF_ERROR(v.matrix("v.patch_embd.weight", c.patch_dim(), c.n_embd, &w.patch_embd));
  LF_RETURN_IF_ERROR(v.floats("v.position_embd.weight", &w.position_embd));
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int il = 0; il < c.n_layer; ++il) {
    VisionLayerWeights& l = w.layers[static_cast<size_t>(il)];
    const std::string p = "v.blk." + std::to_string(il) + ".";
    LF_RETURN_IF_ERROR(v.floats(blk(il, "ln1"), &l.ln1));
    LF_RETURN_IF_ERROR(v.clamped(p + "attn_q", c.n_embd, c.q_dim(), &l.attn_q));
    LF_RETURN_IF_ERROR(v.clamped(p + "attn_k", c.n_embd, c.q_dim(), &l.attn_k));
    LF_RETURN_IF_ERROR(v.clamped(p + "attn_v", c.n_embd, c.q_dim(), &l.attn_v));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "attn_q_norm"), &l.attn_q_norm));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "attn_k_norm"), &l.attn_k_norm));
    LF_RETURN_IF_ERROR(v.clamped(p + "attn_out", c.q_dim(), c.n_embd, &l.attn_out));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "attn_post_norm"), &l.attn_post_norm));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "ln2"), &l.ln2));
    LF_RETURN_IF_ERROR(v.clamped(p + "ffn_gate", c.n_embd, c.n_ff, &l.ffn_gate));
    LF_RETURN_IF_ERROR(v.clamped(p + "ffn_up", c.n_embd, c.n_ff, &l.ffn_up));
    LF_RETURN_IF_ERROR(v.clamped(p + "ffn_down", c.n_ff, c.n_embd, &l.ffn_down));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "ffn_post_norm"), &l.ffn_post_norm));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "out_scale"), &l.out_scale));
  }
  LF_RETURN_IF_ERROR(v.floats("v.std_bias", &w.std_bias));
  LF_RETURN_IF_ERROR(v.floats("v.std_scale", &w.std_scale));
  LF_RETURN_IF_ERROR(v.clamped("mm.input_projection", c.n_embd, c.n_embd_text, &w.input_projection));
  *out = std::move(w);
  return Status();
}

}  // namespace lf
