// A tiny in-memory gemma4 model with E2B/E4B's features (docs/gemma-architecture.md, "E2B and
// E4B"): per-layer embeddings, shared-KV layers and per-layer FFN widths. Header-only, like
// fixture_model.h, whose Builder it uses.
//
// n_embd 64, 5 layers [S, S, G, S, G] (kSlidingPattern), 2 query heads, 1 KV head, head dim 32
// (sliding) / 64 (global), window 4, FFN widths {128, 96, 160, 256, 256} (the shared layers
// double wide), per-layer input 32, the last 2 layers shared-KV: layer 3 reads layer 1's cache,
// layer 4 layer 2's. Global layers without attn_v, rope_freqs {1 x8, 1e30 x24}, layer output
// scales away from 1, tied LM head, soft-cap 30.
#pragma once

#include <string>
#include <vector>

#include "fixture_model.h"

namespace lf::test {

constexpr int kELayers = 5;
constexpr int kEPerLayer = 32;

struct EFixtureOptions {
  WeightFormat format = WeightFormat::f32;
  std::string pattern = "SSGSG";              // one S or G per layer
  int n_shared_kv = 2;
  std::vector<std::string> omit_tensors;      // refusal tests
  bool shared_layers_keep_kv = false;         // shared layers carry attn_k/attn_v/attn_k_norm anyway
};

inline Status build_e_fixture(const EFixtureOptions& o, FixtureModel* out) {
  FixtureOptions base;
  detail::Builder b(base);
  const bool mixed = o.format == WeightFormat::mixed;
  const GgmlType t_attn = mixed ? GgmlType::Q8_0 : GgmlType::F32;
  const GgmlType t_ffn = mixed ? GgmlType::Q4_0 : GgmlType::F32;
  const int n_embd = kFixtureEmbd, n_head = 2, n_layer = kELayers, n_pl = kEPerLayer;
  const int n_ff[kELayers] = {128, 96, 160, 256, 256};
  auto sliding = [&](int il) { return o.pattern[il] == 'S'; };
  auto head_dim = [&](int il) { return sliding(il) ? 32 : 64; };
  auto omitted = [&](const std::string& name) {
    for (const std::string& n : o.omit_tensors) {
      if (n == name) return true;
    }
    return false;
  };

  b.w.set_string("general.architecture", "gemma4");
  b.u32("context_length", 128);
  b.u32("embedding_length", n_embd);
  b.u32("block_count", n_layer);
  b.w.set_array_i32("gemma4.feed_forward_length", {n_ff[0], n_ff[1], n_ff[2], n_ff[3], n_ff[4]});
  b.u32("attention.head_count", n_head);
  b.u32("attention.head_count_kv", 1);
  b.f32("attention.layer_norm_rms_epsilon", 1e-6f);
  b.u32("attention.sliding_window", kFixtureWindow);
  b.f32("rope.freq_base", 1e6f);
  b.f32("rope.freq_base_swa", 1e4f);
  b.u32("attention.key_length", 64);
  b.u32("attention.value_length", 64);
  b.u32("attention.key_length_swa", 32);
  b.u32("attention.value_length_swa", 32);
  b.u32("rope.dimension_count", 64);
  b.u32("rope.dimension_count_swa", 32);
  std::vector<bool> pattern;
  for (int il = 0; il < n_layer; ++il) pattern.push_back(sliding(il));
  b.w.set_array_bool("gemma4.attention.sliding_window_pattern", pattern);
  b.u32("embedding_length_per_layer_input", n_pl);
  b.u32("attention.shared_kv_layers", static_cast<uint32_t>(o.n_shared_kv));
  b.f32("final_logit_softcapping", 30.0f);
  std::vector<std::string> tokens;
  for (int i = 0; i < kFixtureVocab; ++i) tokens.push_back("tok" + std::to_string(i));
  b.w.set_array_string("tokenizer.ggml.tokens", tokens);

  auto matrix = [&](const std::string& name, int64_t n_in, int64_t n_out, GgmlType type) {
    if (!omitted(name)) b.matrix(name, n_in, n_out, type);
  };
  auto norm = [&](const std::string& name, int64_t n) {
    if (!omitted(name)) b.norm(name, n);
  };
  matrix("token_embd.weight", n_embd, kFixtureVocab, t_attn);
  norm("output_norm.weight", n_embd);
  std::vector<float> factors(32, 1e30f);
  for (int j = 0; j < 8; ++j) factors[j] = 1.0f;
  b.add("rope_freqs.weight", GgmlType::F32, {32}, factors);
  matrix("per_layer_token_embd.weight", int64_t{n_pl} * n_layer, kFixtureVocab, t_attn);
  matrix("per_layer_model_proj.weight", n_embd, int64_t{n_pl} * n_layer, t_attn);
  norm("per_layer_proj_norm.weight", n_pl);
  const float output_scale[kELayers] = {0.7f, 1.3f, 0.9f, 1.2f, 0.8f};
  for (int il = 0; il < n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const int D = head_dim(il), q_dim = D * n_head, kv_dim = D;
    const bool own_kv = il < n_layer - o.n_shared_kv || o.shared_layers_keep_kv;
    norm(p + "attn_norm.weight", n_embd);
    matrix(p + "attn_q.weight", n_embd, q_dim, t_attn);
    if (own_kv) matrix(p + "attn_k.weight", n_embd, kv_dim, t_attn);
    if (own_kv && sliding(il)) matrix(p + "attn_v.weight", n_embd, kv_dim, t_attn);
    matrix(p + "attn_output.weight", q_dim, n_embd, t_attn);
    norm(p + "attn_q_norm.weight", D);
    if (own_kv) norm(p + "attn_k_norm.weight", D);
    norm(p + "post_attention_norm.weight", n_embd);
    norm(p + "ffn_norm.weight", n_embd);
    matrix(p + "ffn_gate.weight", n_embd, n_ff[il], t_ffn);
    matrix(p + "ffn_up.weight", n_embd, n_ff[il], t_ffn);
    matrix(p + "ffn_down.weight", n_ff[il], n_embd, t_attn);
    norm(p + "post_ffw_norm.weight", n_embd);
    matrix(p + "inp_gate.weight", n_embd, n_pl, t_attn);
    matrix(p + "proj.weight", n_pl, n_embd, t_attn);
    norm(p + "post_norm.weight", n_embd);
    b.add(p + "layer_output_scale.weight", GgmlType::F32, {1}, {output_scale[il]});
  }
  return b.finish(out);
}

}  // namespace lf::test
