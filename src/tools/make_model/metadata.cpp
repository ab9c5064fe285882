#include "metadata.h"

#include <vector>

#include "moe_weights.h"

namespace lf::make_model {
namespace {

// The vocabulary's own template (or the one given), else Gemma-4-style turns whose markers are
// the vocabulary's own control tokens, so the rendered prompt tokenizes into them rather than
// into text.
std::string chat_template(const Vocab& v) {
  if (!v.chat_template.empty()) return v.chat_template;
  return "{{ bos_token }}{% for message in messages %}"
         "{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
         "{{ '" + v.turn_open + "' + role + '\\n' + message['content'] + '" + v.turn_close + "\\n' }}"
         "{% endfor %}"
         "{% if add_generation_prompt %}{{ '" + v.turn_open + "model\\n' }}{% endif %}";
}

// One FFN width for every layer unless they differ, as the converter writes.
bool ffn_widths_vary(const ModelConfig& m) {
  for (const LayerConfig& l : m.layers) {
    if (l.n_ff != m.layers[0].n_ff) return true;
  }
  return false;
}

}  // namespace

void write_arch_metadata(const ModelConfig& m, const MakeSettings& s, GgufWriter& w, const std::string& arch) {
  const LayerKinds& k = s.layers;
  const bool g4 = m.arch == Arch::gemma4;
  const std::string name = !arch.empty() ? arch : g4 ? "gemma4" : "gemma3";
  const std::string a = name + ".";
  const auto u32 = [](int v) { return static_cast<uint32_t>(v); };
  w.set_string("general.architecture", name);
  w.set_string("general.name", "layerfold synthetic " + name);
  w.set_u32(a + "context_length", u32(m.n_ctx_train));
  w.set_u32(a + "embedding_length", u32(m.n_embd));
  w.set_u32(a + "block_count", u32(m.n_layer));
  if (ffn_widths_vary(m)) {
    // One width per layer, as the converter writes E2B's double-wide shared-KV layers.
    std::vector<int32_t> n_ff;
    for (const LayerConfig& l : m.layers) n_ff.push_back(l.n_ff);
    w.set_array_i32(a + "feed_forward_length", n_ff);
  } else {
    w.set_u32(a + "feed_forward_length", u32(m.layers[0].n_ff));
  }
  w.set_u32(a + "attention.head_count", u32(k.n_head));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", m.norm_eps);
  w.set_u32(a + "attention.sliding_window", u32(m.n_swa));
  w.set_f32(a + "rope.freq_base", k.rope_base);
  w.set_f32(a + "rope.freq_base_swa", k.rope_base_swa);

  if (g4) {
    std::vector<int32_t> n_kv;
    std::vector<bool> swa;
    for (const LayerConfig& l : m.layers) {
      n_kv.push_back(l.n_head_kv);
      swa.push_back(l.sliding);
    }
    w.set_array_i32(a + "attention.head_count_kv", n_kv);
    // A scalar would be broadcast to every layer, not read as a period: always the array.
    w.set_array_bool(a + "attention.sliding_window_pattern", swa);
    w.set_u32(a + "attention.key_length", u32(k.head_dim_global));
    w.set_u32(a + "attention.value_length", u32(k.head_dim_global));
    w.set_u32(a + "attention.key_length_swa", u32(k.head_dim_swa));
    w.set_u32(a + "attention.value_length_swa", u32(k.head_dim_swa));
    // Global layers rotate the full head dim and let rope_freqs switch pairs off
    // (docs/gemma-architecture.md, "Proportional RoPE").
    w.set_u32(a + "rope.dimension_count", u32(k.head_dim_global));
    // llama.cpp defaults this to rope.dimension_count, not the sliding head dim: always write it.
    w.set_u32(a + "rope.dimension_count_swa", u32(k.head_dim_swa));
    w.set_u32(a + "embedding_length_per_layer_input", u32(m.n_embd_per_layer));
    w.set_u32(a + "attention.shared_kv_layers", u32(m.n_shared_kv));
    w.set_f32(a + "final_logit_softcapping", m.final_softcap);
    if (m.n_expert > 0) write_moe_metadata(m, w);
  } else {
    w.set_u32(a + "attention.head_count_kv", u32(k.n_head_kv_swa));
    w.set_u32(a + "attention.key_length", u32(k.head_dim_swa));
    w.set_u32(a + "attention.value_length", u32(k.head_dim_swa));
    w.set_u32(a + "rope.dimension_count", u32(k.head_dim_swa));
    // Written only when it differs from llama.cpp's default, as Google's converter does.
    if (k.swa_period != 6) w.set_u32(a + "attention.sliding_window_pattern", u32(k.swa_period));
    if (m.final_softcap > 0) w.set_f32(a + "final_logit_softcapping", m.final_softcap);
  }
}

void write_tokenizer_metadata(const ModelConfig& m, const Vocab& v, GgufWriter& w) {
  const bool g4 = m.arch == Arch::gemma4;
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
