#include "metadata.h"

#include <vector>

#include "moe_weights.h"

namespace lf::make_model {
namespace {

// Gemma-4-style turns; the markers are the vocabulary's own control tokens, so the rendered
// prompt tokenizes into them rather than into text.
std::string chat_template(const Vocab& v) {
  return "{{ bos_token }}{% for message in messages %}"
         "{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
         "{{ '" + v.turn_open + "' + role + '\\n' + message['content'] + '" + v.turn_close + "\\n' }}"
         "{% endfor %}"
         "{% if add_generation_prompt %}{{ '" + v.turn_open + "model\\n' }}{% endif %}";
}

}  // namespace

void write_arch_metadata(const ModelConfig& c, GgufWriter& w) {
  const bool g4 = c.arch == Arch::gemma4;
  const std::string a = g4 ? "gemma4." : "gemma3.";
  w.set_string("general.architecture", g4 ? "gemma4" : "gemma3");
  w.set_string("general.name", "layerfold synthetic " + std::string(g4 ? "gemma4" : "gemma3"));
  w.set_u32(a + "context_length", c.ctx);
  w.set_u32(a + "embedding_length", c.n_embd);
  w.set_u32(a + "block_count", c.n_layer);
  if (c.ffn_widths_vary()) {
    // One width per layer, as the converter writes E2B's double-wide shared-KV layers.
    std::vector<int32_t> n_ff(c.n_layer);
    for (uint32_t il = 0; il < c.n_layer; ++il) n_ff[il] = static_cast<int32_t>(c.ffn_length(il));
    w.set_array_i32(a + "feed_forward_length", n_ff);
  } else {
    w.set_u32(a + "feed_forward_length", c.ffn_length(0));
  }
  w.set_u32(a + "attention.head_count", c.n_head);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", c.eps);
  w.set_u32(a + "attention.sliding_window", c.sliding_window);
  w.set_f32(a + "rope.freq_base", c.rope_base);
  w.set_f32(a + "rope.freq_base_swa", c.rope_base_swa);

  if (g4) {
    std::vector<int32_t> n_kv(c.n_layer);
    std::vector<bool> swa(c.n_layer);
    for (uint32_t il = 0; il < c.n_layer; ++il) {
      n_kv[il] = static_cast<int32_t>(c.n_head_kv(il));
      swa[il] = c.is_swa(il);
    }
    w.set_array_i32(a + "attention.head_count_kv", n_kv);
    // A scalar would be broadcast to every layer, not read as a period: always the array.
    w.set_array_bool(a + "attention.sliding_window_pattern", swa);
    w.set_u32(a + "attention.key_length", c.head_dim_global);
    w.set_u32(a + "attention.value_length", c.head_dim_global);
    w.set_u32(a + "attention.key_length_swa", c.head_dim_swa);
    w.set_u32(a + "attention.value_length_swa", c.head_dim_swa);
    // Global layers rotate the full head dim and let rope_freqs switch pairs off
    // (docs/gemma-architecture.md, "Proportional RoPE").
    w.set_u32(a + "rope.dimension_count", c.head_dim_global);
    // llama.cpp defaults this to rope.dimension_count, not the sliding head dim: always write it.
    w.set_u32(a + "rope.dimension_count_swa", c.head_dim_swa);
    w.set_u32(a + "embedding_length_per_layer_input", c.n_embd_per_layer);
    w.set_u32(a + "attention.shared_kv_layers", c.n_shared_kv);
    w.set_f32(a + "final_logit_softcapping", c.softcap);
    if (c.is_moe()) write_moe_metadata(c, w);
  } else {
    w.set_u32(a + "attention.head_count_kv", c.n_head_kv_swa);
    w.set_u32(a + "attention.key_length", c.head_dim_swa);
    w.set_u32(a + "attention.value_length", c.head_dim_swa);
    w.set_u32(a + "rope.dimension_count", c.head_dim_swa);
    // Written only when it differs from llama.cpp's default, as Google's converter does.
    if (c.swa_period != 6) w.set_u32(a + "attention.sliding_window_pattern", c.swa_period);
    if (c.softcap > 0) w.set_f32(a + "final_logit_softcapping", c.softcap);
  }
}

void write_tokenizer_metadata(const ModelConfig& c, const Vocab& v, GgufWriter& w) {
  const bool g4 = c.arch == Arch::gemma4;
  const std::string t = "tokenizer.ggml.";
  w.set_string(t + "model", g4 ? "gemma4" : "llama");
  w.set_array_string(t + "tokens", v.tokens);
  w.set_array_i32(t + "token_type", v.types);
  if (g4) {
    w.set_array_string(t + "merges", v.merges);
  } else {
    w.set_string(t + "pre", "default");
    w.set_array_f32(t + "scores", v.scores);
    // SPM's default prefix space would shift every id compared with llama.cpp's Gemma files.
    w.set_bool(t + "add_space_prefix", false);
  }
  w.set_u32(t + "bos_token_id", v.bos);
  w.set_u32(t + "eos_token_id", v.eos);
  w.set_u32(t + "unknown_token_id", v.unk);
  w.set_u32(t + "padding_token_id", v.pad);
  if (v.eot >= 0) w.set_u32(t + "eot_token_id", static_cast<uint32_t>(v.eot));
  if (g4 && v.mask >= 0) w.set_u32(t + "mask_token_id", static_cast<uint32_t>(v.mask));
  w.set_bool(t + "add_bos_token", true);
  w.set_bool(t + "add_eos_token", false);
  w.set_string("tokenizer.chat_template", chat_template(v));
}

}  // namespace lf::make_model
