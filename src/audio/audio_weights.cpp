#include "audio/audio_weights.h"

#include <string>

#include "quant/quant.h"

namespace lf {
namespace {

using R = TensorRole;

std::string blk(int il, const std::string& name) { return "a.blk." + std::to_string(il) + "." + name; }

}  // namespace

std::vector<TensorSpec> audio_tensors(const AudioConfig& c) {
  ProjectorSpecs s;
  const int E = c.n_embd, F = c.n_ff;
  for (int i = 0; i < 2; ++i) {
    const std::string p = "a.conv1d." + std::to_string(i) + ".";
    const int in = i == 0 ? 1 : c.conv_channels[0], out = c.conv_channels[i];
    s.add(p + "weight", 3, 3, R::matmul);
    s.list.back().ne2 = in;
    s.list.back().ne3 = out;
    s.add(p + "norm.weight", out, 1, R::f32_vector, false);
  }
  s.linear("a.input_projection", c.n_embd_sub(), E);
  s.add("a.input_projection.bias", E, 1, R::f32_vector, false);
  for (int il = 0; il < c.n_layer; ++il) {
    const auto vector = [&](const char* name, bool required) { s.add(blk(il, name) + ".weight", E, 1, R::f32_vector, required); };
    vector("ffn_norm", true);
    s.linear(blk(il, "ffn_up"), E, F);
    s.linear(blk(il, "ffn_down"), F, E);
    vector("ffn_post_norm", false);
    vector("attn_pre_norm", false);
    vector("ln1", false);
    s.linear(blk(il, "attn_q"), E, E);
    s.linear(blk(il, "attn_k"), E, E);
    s.linear(blk(il, "attn_v"), E, E);
    s.add(blk(il, "per_dim_scale.weight"), c.head_dim, 1, R::f32_vector, false);
    s.add(blk(il, "per_dim_k_scale.weight"), c.head_dim, 1, R::f32_vector, false);
    s.linear(blk(il, "attn_k_rel"), E, E, false);
    s.linear(blk(il, "attn_out"), E, E);
    s.add(blk(il, "attn_out.bias"), E, 1, R::f32_vector, false);
    vector("attn_post_norm", false);
    vector("conv_norm", false);
    s.linear(blk(il, "conv_pw1"), E, 2 * E);
    s.add(blk(il, "conv_dw.weight"), c.conv_kernel, E, R::f32_vector);
    s.add(blk(il, "conv_dw.bias"), E, 1, R::f32_vector, false);
    vector("norm_conv", false);
    s.linear(blk(il, "conv_pw2"), E, E);
    vector("ffn_norm_1", true);
    s.linear(blk(il, "ffn_up_1"), E, F);
    s.linear(blk(il, "ffn_down_1"), F, E);
    vector("ffn_post_norm_1", false);
    vector("ln2", false);
  }
  const int E_out = c.n_embd_out;
  s.linear("a.pre_encode.out", E, E_out, E_out != E);
  s.add("a.pre_encode.out.bias", E_out, 1, R::f32_vector, false);
  s.add("mm.a.soft_emb_norm.weight", E_out, 1, R::f32_vector, false);
  s.linear("mm.a.input_projection", E_out, c.n_embd_text);
  return s.list;
}

Status audio_weights(const GgufFile& file, const AudioConfig& c, const uint8_t* data, uint64_t size, AudioWeights* out) {
  LF_RETURN_IF_ERROR(check_tensor_specs(file, audio_tensors(c), kAudioArch));
  AudioWeights w;
  const ProjectorViews v(file, data, size);
  const int E = c.n_embd, F = c.n_ff;
  for (int i = 0; i < 2; ++i) {
    const std::string p = "a.conv1d." + std::to_string(i) + ".";
    const int in = i == 0 ? 1 : c.conv_channels[0];
    LF_RETURN_IF_ERROR(v.matrix(p + "weight", 9 * in, c.conv_channels[i], &w.conv[i]));
    if (w.conv[i].type == GgmlType::F32) {
      const int64_t n = w.conv[i].n_in * w.conv[i].n_out;
      const auto* f = reinterpret_cast<const float*>(w.conv[i].data);
      w.conv_f16[i].resize(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) w.conv_f16[i][j] = fp32_to_fp16(f[j]);
      w.conv[i].type = GgmlType::F16;
      w.conv[i].data = reinterpret_cast<const uint8_t*>(w.conv_f16[i].data());
      w.conv[i].row_bytes = static_cast<uint64_t>(w.conv[i].n_in) * 2;
    } else if (w.conv[i].type != GgmlType::F16) {
      TypeTraits traits{};
      type_traits(static_cast<uint32_t>(w.conv[i].type), &traits);
      return Status(Code::unsupported, "tensor '" + p + "weight' has type " + traits.name + "; a convolution's kernel is F32 or F16");
    }
    LF_RETURN_IF_ERROR(v.floats(p + "norm.weight", &w.conv_norm[i]));
  }
  LF_RETURN_IF_ERROR(v.clamped("a.input_projection", c.n_embd_sub(), E, &w.input_projection));
  LF_RETURN_IF_ERROR(v.floats("a.input_projection.bias", &w.input_projection_b));
  w.layers.resize(static_cast<size_t>(c.n_layer));
  const int taps = c.conv_kernel;
  w.conv_taps.resize(static_cast<size_t>(c.n_layer) * taps * E);
  for (int il = 0; il < c.n_layer; ++il) {
    AudioLayerWeights& l = w.layers[static_cast<size_t>(il)];
    const auto vector = [&](const char* name, const float** to) { return v.floats(blk(il, name) + ".weight", to); };
    LF_RETURN_IF_ERROR(vector("ffn_norm", &l.ffn_norm));
    LF_RETURN_IF_ERROR(v.clamped(blk(il, "ffn_up"), E, F, &l.ffn_up));
    LF_RETURN_IF_ERROR(v.clamped(blk(il, "ffn_down"), F, E, &l.ffn_down));
    LF_RETURN_IF_ERROR(vector("ffn_post_norm", &l.ffn_post_norm));
    LF_RETURN_IF_ERROR(vector("attn_pre_norm", &l.attn_pre_norm));
    LF_RETURN_IF_ERROR(vector("ln1", &l.ln1));
    LF_RETURN_IF_ERROR(v.clamped(blk(il, "attn_q"), E, E, &l.attn_q));
    LF_RETURN_IF_ERROR(v.clamped(blk(il, "attn_k"), E, E, &l.attn_k));
    LF_RETURN_IF_ERROR(v.clamped(blk(il, "attn_v"), E, E, &l.attn_v));
    LF_RETURN_IF_ERROR(vector("per_dim_scale", &l.per_dim_scale));
    LF_RETURN_IF_ERROR(vector("per_dim_k_scale", &l.per_dim_k_scale));
    LF_RETURN_IF_ERROR(v.matrix(blk(il, "attn_k_rel.weight"), E, E, &l.attn_k_rel));
    LF_RETURN_IF_ERROR(v.clamped(blk(il, "attn_out"), E, E, &l.attn_out));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "attn_out.bias"), &l.attn_out_b));
    LF_RETURN_IF_ERROR(vector("attn_post_norm", &l.attn_post_norm));
    LF_RETURN_IF_ERROR(vector("conv_norm", &l.conv_in_norm));
    LF_RETURN_IF_ERROR(v.clamped(blk(il, "conv_pw1"), E, 2 * E, &l.conv_pw1));
    const float* by_channel = nullptr;  // [n_embd, conv_kernel]
    LF_RETURN_IF_ERROR(v.floats(blk(il, "conv_dw.weight"), &by_channel));
    float* by_tap = &w.conv_taps[static_cast<size_t>(il) * taps * E];
    for (int e = 0; e < E; ++e) {
      for (int j = 0; j < taps; ++j) by_tap[j * E + e] = by_channel[e * taps + j];
    }
    l.conv_taps = by_tap;
    LF_RETURN_IF_ERROR(v.floats(blk(il, "conv_dw.bias"), &l.conv_dw_b));
    LF_RETURN_IF_ERROR(vector("norm_conv", &l.conv_out_norm));
    LF_RETURN_IF_ERROR(v.clamped(blk(il, "conv_pw2"), E, E, &l.conv_pw2));
    LF_RETURN_IF_ERROR(vector("ffn_norm_1", &l.ffn_norm_1));
    LF_RETURN_IF_ERROR(v.clamped(blk(il, "ffn_up_1"), E, F, &l.ffn_up_1));
    LF_RETURN_IF_ERROR(v.clamped(blk(il, "ffn_down_1"), F, E, &l.ffn_down_1));
    LF_RETURN_IF_ERROR(vector("ffn_post_norm_1", &l.ffn_post_norm_1));
    LF_RETURN_IF_ERROR(vector("ln2", &l.ln2));
  }
  LF_RETURN_IF_ERROR(v.clamped("a.pre_encode.out", E, c.n_embd_out, &w.out_projection));
  LF_RETURN_IF_ERROR(v.floats("a.pre_encode.out.bias", &w.out_projection_b));
  LF_RETURN_IF_ERROR(v.floats("mm.a.soft_emb_norm.weight", &w.soft_emb_norm));
  LF_RETURN_IF_ERROR(v.clamped("mm.a.input_projection", c.n_embd_out, c.n_embd_text, &w.mm_input_projection));
  *out = std::move(w);
  return Status();
}

}  // namespace lf
