#include "cli.h"

#include <cerrno>
#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <functional>

namespace lf::make_model {
namespace {

struct Preset {
  const char* name;
  const char* summary;
  void (*apply)(ModelConfig& cfg);
};

std::vector<TensorTypeRule> preset_rules(std::vector<TensorTypeRule> rules) {
  for (TensorTypeRule& r : rules) r.must_match = false;
  return rules;
}

void apply_26b_a4b_shape(ModelConfig& c) {
  c.n_embd = 2816;
  c.n_head = 16;
  c.n_head_kv_swa = 8;
  c.n_head_kv_global = 2;
  c.head_dim_swa = 256;
  c.head_dim_global = 512;
  c.n_ff = 2112;
  c.n_expert = 128;
  c.n_expert_used = 8;
  c.n_ff_exp = 704;
  c.sliding_window = 1024;
  c.n_vocab = 4096;
  c.ctx = 4096;
}

// Every ne0 of every matrix is a multiple of 32 so each preset also works with Q4_0/Q8_0.
const Preset kPresets[] = {
    {"tiny", "gemma4, 2 layers SG, n_embd 64, 4 heads, kv 2/1, head dims 32/64, n_ff 128, window 4, 1024 synthetic tokens, Q4_0",
     [](ModelConfig& c) {
       c.ctx = 512;
     }},
    {"tiny-gemma3", "gemma3, 3 layers SSG (period 3), n_embd 64, 4 heads, kv 2, head dim 32, n_ff 128, window 4, 1024 synthetic tokens, Q4_0",
     [](ModelConfig& c) {
       c.arch = Arch::gemma3;
       c.n_layer = 3;
       c.swa_period = 3;
       c.n_head_kv_global = c.n_head_kv_swa;
       c.head_dim_global = c.head_dim_swa;
       c.ctx = 512;
     }},
    {"small", "gemma4, 6 layers SSSSSG, n_embd 256, 8 heads, kv 4/1, head dims 64/128, n_ff 1024, window 16, 2048 synthetic tokens, Q4_0",
     [](ModelConfig& c) {
       c.n_layer = 6;
       c.n_embd = 256;
       c.n_head = 8;
       c.n_head_kv_swa = 4;
       c.n_head_kv_global = 1;
       c.head_dim_swa = 64;
       c.head_dim_global = 128;
       c.n_ff = 1024;
       c.sliding_window = 16;
       c.n_vocab = 2048;
       c.ctx = 1024;
     }},
    {"31b-shape", "gemma4 with gemma-4-31B layer shapes (n_embd 5376, 32 heads, kv 16/4, head dims 256/512, n_ff 21504, window 1024, no V on global layers), 2 layers SG (--n-layer 6 for SSSSSG), 4096 synthetic tokens, Q4_0",
     [](ModelConfig& c) {
       c.n_embd = 5376;
       c.n_head = 32;
       c.n_head_kv_swa = 16;
       c.n_head_kv_global = 4;
       c.head_dim_swa = 256;
       c.head_dim_global = 512;
       c.n_ff = 21504;
       c.sliding_window = 1024;
       c.n_vocab = 4096;
       c.ctx = 4096;
     }},
    // E2B (docs/gemma-architecture.md, "E2B and E4B"): 35 layers of period 5, the last 20
    // sharing KV, double-wide FFN on those. Seven layers keep the period and the sharing rule:
    // SSSSG with K/V, then S (reads layer 3) and G (reads layer 4).
    {"e2b-shape", "gemma4 with gemma-4-E2B layer shapes (n_embd 1536, 8 heads, kv 1, head dims 256/512, n_ff 6144, 12288 on shared-KV layers, window 512, per-layer input 256, no V on global layers), 7 layers SSSSGSG, the last 2 shared-KV, 2048 synthetic tokens, Q4_0",
     [](ModelConfig& c) {
       c.n_layer = 7;
       c.swa_period = 5;
       c.n_embd = 1536;
       c.n_head = 8;
       c.n_head_kv_swa = 1;
       c.n_head_kv_global = 1;
       c.head_dim_swa = 256;
       c.head_dim_global = 512;
       c.n_ff = 6144;
       c.double_wide_shared = true;
       c.sliding_window = 512;
       c.n_embd_per_layer = 256;
       c.n_shared_kv = 2;
       c.n_vocab = 2048;
       c.ctx = 1024;
     }},
    // E4B: 42 layers of period 6, the last 18 sharing KV, one FFN width. Eight layers: SSSSSG
    // with K/V, then S (reads layer 4) and G (reads layer 5).
    {"e4b-shape", "gemma4 with gemma-4-E4B layer shapes (n_embd 2560, 8 heads, kv 2, head dims 256/512, n_ff 10240, window 512, per-layer input 256, no V on global layers), 8 layers SSSSSGSG, the last 2 shared-KV, 2048 synthetic tokens, Q4_0",
     [](ModelConfig& c) {
       c.n_layer = 8;
       c.swa_period = 6;
       c.n_embd = 2560;
       c.n_head = 8;
       c.n_head_kv_swa = 2;
       c.n_head_kv_global = 2;
       c.head_dim_swa = 256;
       c.head_dim_global = 512;
       c.n_ff = 10240;
       c.sliding_window = 512;
       c.n_embd_per_layer = 256;
       c.n_shared_kv = 2;
       c.n_vocab = 2048;
       c.ctx = 1024;
     }},
    {"tiny-shared-kv1", "tiny with per-layer input 32, 4 layers SSGG, the last one shared-KV (reads layer 2), FFN widths 128,192,256,160",
     [](ModelConfig& c) {
       c.n_layer = 4;
       c.swa_pattern = "SSGG";
       c.n_embd_per_layer = 32;
       c.n_shared_kv = 1;
       c.n_ff_layers = {128, 192, 256, 160};
       c.ctx = 512;
     }},
    {"tiny-shared-kv2", "tiny with per-layer input 32, 5 layers SSGSG, the last two shared-KV (layer 3 reads 1, layer 4 reads 2), double-wide FFN (256) on them",
     [](ModelConfig& c) {
       c.n_layer = 5;
       c.swa_pattern = "SSGSG";
       c.n_embd_per_layer = 32;
       c.n_shared_kv = 2;
       c.double_wide_shared = true;
       c.ctx = 512;
     }},
    {"26b-a4b-shape", "gemma4 with gemma-4-26B-A4B layer shapes (n_embd 2816, 16 heads, kv 8/2, head dims 256/512, shared MLP 2112, 128 experts of width 704 with 8 used, fused gate/up, window 1024, no V on global layers), 2 layers SG (--n-layer 6 for SSSSSG), 4096 synthetic tokens, Q4_0",
     apply_26b_a4b_shape},
    // A dynamic-quant mix as published for this model: 4-5 bit experts, 6-8 bit attention and
    // shared MLP. Rows of 704 (ffn_down_exps) and 2112 (ffn_down) hold no 256-blocks, so those are
    // Q8_0, what llama-quantize falls back to when asked for Q6_K there.
    {"26b-a4b-mixed", "26b-a4b-shape's layers in a dynamic K-quant mix: experts' gate/up Q4_K (layer 0 Q5_K), ffn_down_exps Q8_0, attn_q/attn_k Q6_K, attn_v Q8_0, attn_output Q5_K, shared MLP Q8_0, token_embd Q6_K",
     [](ModelConfig& c) {
       apply_26b_a4b_shape(c);
       c.type = GgmlType::Q4_K;
       c.tensor_types = preset_rules({
         {"token_embd", GgmlType::Q6_K}, {"attn_q", GgmlType::Q6_K}, {"attn_k", GgmlType::Q6_K},
         {"attn_v", GgmlType::Q8_0}, {"attn_output", GgmlType::Q5_K}, {"ffn_gate", GgmlType::Q8_0},
         {"ffn_up", GgmlType::Q8_0}, {"ffn_down", GgmlType::Q8_0}, {"ffn_down_exps", GgmlType::Q8_0},
         {"blk.0.ffn_gate_up_exps", GgmlType::Q5_K}});
     }},
    // Widths of 256-multiples so every matrix can be a K-quant; 5 experts, 2 used, separate gate
    // and up in different types.
    {"moe-kquant", "gemma4, 3 layers SSG, n_embd 256, 4 heads, kv 2/1, head dims 64/128, shared MLP 768, 5 experts of width 512, 2 used, separate gate/up, per-expert down scale; experts' gate Q4_K, up Q5_K, down Q6_K, attention Q5_K, attn_output Q6_K, shared MLP Q8_0 with ffn_down Q4_K, token_embd Q6_K",
     [](ModelConfig& c) {
       c.n_layer = 3;
       c.swa_period = 3;
       c.n_embd = 256;
       c.head_dim_swa = 64;
       c.head_dim_global = 128;
       c.n_ff = 768;
       c.ctx = 512;
       c.n_expert = 5;
       c.n_expert_used = 2;
       c.n_ff_exp = 512;
       c.fused_gate_up = false;
       c.type = GgmlType::Q5_K;
       c.tensor_types = preset_rules({
         {"token_embd", GgmlType::Q6_K}, {"attn_output", GgmlType::Q6_K}, {"ffn_gate", GgmlType::Q8_0},
         {"ffn_up", GgmlType::Q8_0}, {"ffn_down", GgmlType::Q4_K}, {"ffn_gate_exps", GgmlType::Q4_K},
         {"ffn_up_exps", GgmlType::Q5_K}, {"ffn_down_exps", GgmlType::Q6_K}});
     }},
    {"tiny-kquant", "gemma4, 2 layers SG, n_embd 256, 4 heads, kv 2/1, head dims 64/128, n_ff 768, window 4, 1024 synthetic tokens, Q4_K_M-like: Q4_K, token_embd and attn_v Q6_K, ffn_down Q5_K, attn_output Q8_0",
     [](ModelConfig& c) {
       c.n_embd = 256;
       c.head_dim_swa = 64;
       c.head_dim_global = 128;
       c.n_ff = 768;
       c.ctx = 512;
       c.type = GgmlType::Q4_K;
       c.tensor_types = preset_rules({
         {"token_embd", GgmlType::Q6_K}, {"attn_v", GgmlType::Q6_K}, {"ffn_down", GgmlType::Q5_K},
         {"attn_output", GgmlType::Q8_0}});
     }},
    {"moe-tiny", "tiny with experts: 7 experts of width 96, 3 used, fused gate/up, per-expert down scale",
     [](ModelConfig& c) {
       c.ctx = 512;
       c.n_expert = 7;
       c.n_expert_used = 3;
       c.n_ff_exp = 96;
     }},
    {"moe-top1", "tiny with experts: 5 experts of width 160, 1 used, separate gate and up, no down scale",
     [](ModelConfig& c) {
       c.ctx = 512;
       c.n_expert = 5;
       c.n_expert_used = 1;
       c.n_ff_exp = 160;
       c.fused_gate_up = false;
       c.down_exps_scale = false;
     }},
    {"moe-wide", "gemma4, 3 layers SSG, n_embd 96, shared MLP 160, 20 experts of width 224, 6 used, separate gate and up, per-expert down scale",
     [](ModelConfig& c) {
       c.n_layer = 3;
       c.swa_period = 3;
       c.n_embd = 96;
       c.n_ff = 160;
       c.ctx = 512;
       c.n_expert = 20;
       c.n_expert_used = 6;
       c.n_ff_exp = 224;
       c.fused_gate_up = false;
     }},
    {"gemma-vocab", "tiny with the real Gemma vocabulary (262144 tokens from --tokenizer-json)",
     [](ModelConfig& c) {
       c.vocab = VocabKind::gemma;
       c.n_vocab = 262144;
       c.ctx = 512;
     }},
};

Status bad(const std::string& message) { return Status(Code::invalid_argument, message); }

Status parse_u32(const std::string& opt, const std::string& text, uint32_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0 || v > 0xFFFFFFFFull) {
    return bad(opt + " needs an unsigned 32-bit integer, got '" + text + "'");
  }
  *out = static_cast<uint32_t>(v);
  return Status();
}

Status parse_u64(const std::string& opt, const std::string& text, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0) {
    return bad(opt + " needs an unsigned 64-bit integer, got '" + text + "'");
  }
  *out = v;
  return Status();
}

Status parse_f32(const std::string& opt, const std::string& text, float* out) {
  char* end = nullptr;
  const float v = std::strtof(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) {
    return bad(opt + " needs a finite number, got '" + text + "'");
  }
  *out = v;
  return Status();
}

// The types make_model can quantize to (tensor_adder.h's convert_row).
Status parse_type(const char* opt, const std::string& text, GgmlType* out) {
  const struct { const char* name; GgmlType type; } kTypes[] = {
      {"Q4_0", GgmlType::Q4_0}, {"Q8_0", GgmlType::Q8_0}, {"Q4_K", GgmlType::Q4_K}, {"Q5_K", GgmlType::Q5_K},
      {"Q6_K", GgmlType::Q6_K}, {"F16", GgmlType::F16},   {"BF16", GgmlType::BF16}, {"F32", GgmlType::F32},
  };
  for (const auto& t : kTypes) {
    if (text == t.name) {
      *out = t.type;
      return Status();
    }
  }
  return bad(std::string(opt) + " must be one of Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, F16, BF16, F32, got '" + text + "'");
}

// PATTERN=TYPE
Status parse_tensor_type_rule(const std::string& text, TensorTypeRule* out) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) return bad("--tensor-type needs PATTERN=TYPE, got '" + text + "'");
  out->pattern = text.substr(0, eq);
  return parse_type("--tensor-type's TYPE", text.substr(eq + 1), &out->type);
}

using Setter = std::function<Status(const std::string& value, CliArgs& a)>;

struct Option {
  const char* name;
  bool takes_value;
  Setter set;
};

Setter u32_field(const char* opt, uint32_t ModelConfig::*field) {
  return [opt, field](const std::string& v, CliArgs& a) { return parse_u32(opt, v, &(a.cfg.*field)); };
}

Setter f32_field(const char* opt, float ModelConfig::*field) {
  return [opt, field](const std::string& v, CliArgs& a) { return parse_f32(opt, v, &(a.cfg.*field)); };
}

Setter flag(bool ModelConfig::*field, bool value) {
  return [field, value](const std::string&, CliArgs& a) {
    a.cfg.*field = value;
    return Status();
  };
}

const std::vector<Option>& options() {
  static const std::vector<Option> kOptions = {
      {"--out", true, [](const std::string& v, CliArgs& a) { a.out_path = v; return Status(); }},
      {"--arch", true,
       [](const std::string& v, CliArgs& a) {
         if (v == "gemma4") a.cfg.arch = Arch::gemma4;
         else if (v == "gemma3") a.cfg.arch = Arch::gemma3;
         else return bad("--arch must be gemma4 or gemma3, got '" + v + "'");
         return Status();
       }},
      {"--n-layer", true, u32_field("--n-layer", &ModelConfig::n_layer)},
      {"--n-embd", true, u32_field("--n-embd", &ModelConfig::n_embd)},
      {"--n-ff", true, u32_field("--n-ff", &ModelConfig::n_ff)},
      {"--n-head", true, u32_field("--n-head", &ModelConfig::n_head)},
      {"--n-head-kv-swa", true, u32_field("--n-head-kv-swa", &ModelConfig::n_head_kv_swa)},
      {"--n-head-kv-global", true, u32_field("--n-head-kv-global", &ModelConfig::n_head_kv_global)},
      {"--n-head-kv", true,
       [](const std::string& v, CliArgs& a) {
         LF_RETURN_IF_ERROR(parse_u32("--n-head-kv", v, &a.cfg.n_head_kv_swa));
         a.cfg.n_head_kv_global = a.cfg.n_head_kv_swa;
         return Status();
       }},
      {"--head-dim-swa", true, u32_field("--head-dim-swa", &ModelConfig::head_dim_swa)},
      {"--head-dim-global", true, u32_field("--head-dim-global", &ModelConfig::head_dim_global)},
      {"--head-dim", true,
       [](const std::string& v, CliArgs& a) {
         LF_RETURN_IF_ERROR(parse_u32("--head-dim", v, &a.cfg.head_dim_swa));
         a.cfg.head_dim_global = a.cfg.head_dim_swa;
         return Status();
       }},
      {"--sliding-window", true, u32_field("--sliding-window", &ModelConfig::sliding_window)},
      {"--swa-pattern", true,
       [](const std::string& v, CliArgs& a) {
         if (v.empty() || v.find_first_not_of("SG") != std::string::npos) {
           return bad("--swa-pattern must be a string of S (sliding) and G (global), got '" + v + "'");
         }
         a.cfg.swa_pattern = v;
         return Status();
       }},
      {"--n-ff-layers", true,
       [](const std::string& v, CliArgs& a) {
         a.cfg.n_ff_layers.clear();
         size_t start = 0;
         while (start <= v.size()) {
           const size_t comma = std::min(v.find(',', start), v.size());
           uint32_t width = 0;
           LF_RETURN_IF_ERROR(parse_u32("--n-ff-layers", v.substr(start, comma - start), &width));
           a.cfg.n_ff_layers.push_back(width);
           start = comma + 1;
         }
         return Status();
       }},
      {"--n-embd-per-layer", true, u32_field("--n-embd-per-layer", &ModelConfig::n_embd_per_layer)},
      {"--shared-kv-layers", true, u32_field("--shared-kv-layers", &ModelConfig::n_shared_kv)},
      {"--double-wide-shared", false, flag(&ModelConfig::double_wide_shared, true)},
      {"--no-double-wide-shared", false, flag(&ModelConfig::double_wide_shared, false)},
      {"--rope-base", true, f32_field("--rope-base", &ModelConfig::rope_base)},
      {"--rope-base-swa", true, f32_field("--rope-base-swa", &ModelConfig::rope_base_swa)},
      {"--partial-rotary", true, f32_field("--partial-rotary", &ModelConfig::partial_rotary)},
      {"--no-global-v", false, flag(&ModelConfig::global_v, false)},
      {"--global-v", false, flag(&ModelConfig::global_v, true)},
      {"--untied-output", false, flag(&ModelConfig::untied_output, true)},
      {"--output-norm-gain", true, f32_field("--output-norm-gain", &ModelConfig::output_norm_gain)},
      {"--layer-output-scale", false, flag(&ModelConfig::layer_output_scale, true)},
      {"--no-layer-output-scale", false, flag(&ModelConfig::layer_output_scale, false)},
      {"--n-expert", true, u32_field("--n-expert", &ModelConfig::n_expert)},
      {"--n-expert-used", true, u32_field("--n-expert-used", &ModelConfig::n_expert_used)},
      {"--n-ff-exp", true, u32_field("--n-ff-exp", &ModelConfig::n_ff_exp)},
      {"--fused-gate-up", false, flag(&ModelConfig::fused_gate_up, true)},
      {"--separate-gate-up", false, flag(&ModelConfig::fused_gate_up, false)},
      {"--down-exps-scale", false, flag(&ModelConfig::down_exps_scale, true)},
      {"--no-down-exps-scale", false, flag(&ModelConfig::down_exps_scale, false)},
      {"--n-vocab", true, u32_field("--n-vocab", &ModelConfig::n_vocab)},
      {"--vocab", true,
       [](const std::string& v, CliArgs& a) {
         if (v == "synthetic") a.cfg.vocab = VocabKind::synthetic;
         else if (v == "gemma") a.cfg.vocab = VocabKind::gemma;
         else return bad("--vocab must be synthetic or gemma, got '" + v + "'");
         return Status();
       }},
      {"--tokenizer-json", true, [](const std::string& v, CliArgs& a) { a.cfg.tokenizer_json = v; return Status(); }},
      {"--ctx", true, u32_field("--ctx", &ModelConfig::ctx)},
      {"--type", true, [](const std::string& v, CliArgs& a) { return parse_type("--type", v, &a.cfg.type); }},
      {"--tensor-type", true,
       [](const std::string& v, CliArgs& a) {
         TensorTypeRule rule;
         LF_RETURN_IF_ERROR(parse_tensor_type_rule(v, &rule));
         a.cfg.tensor_types.push_back(rule);
         return Status();
       }},
      {"--seed", true, [](const std::string& v, CliArgs& a) { return parse_u64("--seed", v, &a.cfg.seed); }},
      {"--softcap", true, f32_field("--softcap", &ModelConfig::softcap)},
      {"--eps", true, f32_field("--eps", &ModelConfig::eps)},
      {"--header-only", false, [](const std::string&, CliArgs& a) { a.header_only = true; return Status(); }},
      {"--list-presets", false, [](const std::string&, CliArgs& a) { a.list_presets = true; return Status(); }},
      {"--help", false, [](const std::string&, CliArgs& a) { a.help = true; return Status(); }},
  };
  return kOptions;
}

// Per-layer FFN widths, per-layer embeddings and shared-KV layers (docs/gemma-architecture.md,
// "E2B and E4B"); the pattern's letters are known by now.
Status validate_e_model_features(const ModelConfig& c) {
  if (!c.n_ff_layers.empty() && c.n_ff_layers.size() != c.n_layer) {
    return bad("--n-ff-layers has " + std::to_string(c.n_ff_layers.size()) + " widths but the model has " +
               std::to_string(c.n_layer) + " layers");
  }
  for (uint32_t il = 0; il < c.n_layer; ++il) {
    if (c.ffn_length(il) == 0) return bad("--n-ff-layers: layer " + std::to_string(il) + " has width 0");
  }
  if (c.arch == Arch::gemma3 && (c.n_embd_per_layer > 0 || c.n_shared_kv > 0)) {
    return bad("--n-embd-per-layer and --shared-kv-layers are gemma4 features");
  }
  if (c.n_shared_kv == 0) return Status();
  // llama.cpp needs two layers with their own cache and maps a shared sliding layer to the last
  // cached layer but one, a shared global layer to the last: those two must be S then G.
  if (c.n_shared_kv + 2 > c.n_layer) {
    return bad("--shared-kv-layers " + std::to_string(c.n_shared_kv) + " leaves fewer than 2 of the " +
               std::to_string(c.n_layer) + " layers with a KV cache of their own");
  }
  const uint32_t n_kv = c.n_layer - c.n_shared_kv;
  if (!c.is_swa(n_kv - 2) || c.is_swa(n_kv - 1)) {
    return bad("with --shared-kv-layers " + std::to_string(c.n_shared_kv) + ", layer " + std::to_string(n_kv - 2) +
               " must be sliding and layer " + std::to_string(n_kv - 1) + " global (the layers shared-KV layers read), got --swa-pattern " +
               c.swa_pattern);
  }
  return Status();
}

Status validate(ModelConfig& c) {
  if (c.n_layer == 0 || c.n_layer > 512) return bad("--n-layer must be in 1..512");
  if (c.n_embd == 0 || c.n_ff == 0 || c.n_head == 0) return bad("--n-embd, --n-ff and --n-head must be positive");
  if (c.sliding_window == 0) return bad("--sliding-window must be positive");
  if (c.ctx == 0) return bad("--ctx must be positive");
  if (!(c.eps > 0)) return bad("--eps must be positive");
  if (c.swa_pattern.empty()) c.swa_pattern = default_swa_pattern(c);
  if (c.swa_pattern.size() != c.n_layer) {
    return bad("--swa-pattern has " + std::to_string(c.swa_pattern.size()) + " letters but the model has " +
               std::to_string(c.n_layer) + " layers");
  }
  for (uint32_t kv : {c.n_head_kv_swa, c.n_head_kv_global}) {
    if (kv == 0 || c.n_head % kv != 0) {
      return bad("--n-head (" + std::to_string(c.n_head) + ") must be a multiple of every KV head count, got " +
                 std::to_string(kv));
    }
  }
  for (uint32_t d : {c.head_dim_swa, c.head_dim_global}) {
    if (d == 0 || d % 2 != 0) return bad("head dims must be even and positive (RoPE rotates pairs), got " + std::to_string(d));
  }
  if (c.arch == Arch::gemma3) {
    if (c.head_dim_swa != c.head_dim_global) {
      return bad("gemma3 has a single head dim: use --head-dim (got " + std::to_string(c.head_dim_swa) + " sliding, " +
                 std::to_string(c.head_dim_global) + " global)");
    }
    if (c.n_head_kv_swa != c.n_head_kv_global) {
      return bad("gemma3 has a single KV head count: use --n-head-kv");
    }
    c.swa_period = gemma3_swa_period(c.swa_pattern);
    if (c.swa_period == 0) {
      return bad("gemma3 can only express periodic patterns (P-1 sliding layers, then one global), got --swa-pattern " +
                 c.swa_pattern);
    }
  } else if (!(c.partial_rotary > 0 && c.partial_rotary <= 1)) {
    return bad("--partial-rotary must be in (0, 1]");
  }
  LF_RETURN_IF_ERROR(validate_e_model_features(c));
  if (c.is_moe()) {
    if (c.arch != Arch::gemma4) return bad("--n-expert needs --arch gemma4 (gemma3 has no mixture of experts)");
    // llama.cpp's limit (LLAMA_MAX_EXPERTS).
    if (c.n_expert > 512) return bad("--n-expert must be at most 512");
    if (c.n_expert_used == 0 || c.n_expert_used > c.n_expert) {
      return bad("--n-expert-used must be in 1..--n-expert (" + std::to_string(c.n_expert) + "), got " +
                 std::to_string(c.n_expert_used));
    }
    if (c.n_ff_exp == 0) return bad("--n-ff-exp must be positive with --n-expert");
  }
  if (c.softcap < 0) c.softcap = c.arch == Arch::gemma4 ? 30.0f : 0.0f;
  return Status();
}

}  // namespace

Status parse_cli(const std::vector<std::string>& args, CliArgs* out) {
  CliArgs a;
  // The preset is applied first wherever it appears, so overrides never depend on order.
  const Preset* preset = nullptr;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] != "--preset") continue;
    if (i + 1 >= args.size()) return bad("--preset needs a value");
    for (const Preset& p : kPresets) {
      if (args[i + 1] == p.name) preset = &p;
    }
    if (preset == nullptr) return bad("unknown preset '" + args[i + 1] + "' (see --list-presets)");
  }
  if (preset != nullptr) preset->apply(a.cfg);

  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--preset") {
      ++i;
      continue;
    }
    const Option* opt = nullptr;
    for (const Option& o : options()) {
      if (args[i] == o.name) opt = &o;
    }
    if (opt == nullptr) return bad("unknown option '" + args[i] + "' (see --help)");
    std::string value;
    if (opt->takes_value) {
      if (i + 1 >= args.size()) return bad(std::string(opt->name) + " needs a value");
      value = args[++i];
    }
    LF_RETURN_IF_ERROR(opt->set(value, a));
  }
  if (a.list_presets || a.help) {
    *out = a;
    return Status();
  }
  if (preset == nullptr) return bad("--preset is required (see --list-presets)");
  if (a.out_path.empty()) return bad("--out FILE is required");
  LF_RETURN_IF_ERROR(validate(a.cfg));
  *out = a;
  return Status();
}

std::string presets_text() {
  std::string text;
  for (const Preset& p : kPresets) text += std::string(p.name) + "\t" + p.summary + "\n";
  return text;
}

std::string usage_text() {
  std::string text =
      "usage: make_model --preset NAME --out FILE [overrides...]\n"
      "Writes a synthetic Gemma GGUF with deterministic pseudo-random weights.\n"
      "options:";
  for (const Option& o : options()) text += std::string(" ") + o.name + (o.takes_value ? " X" : "");
  return text +
         "\n"
         "--type T: every matrix (token_embd, attention, FFN, experts) in T, one of Q4_0 Q8_0 Q4_K Q5_K Q6_K F16\n"
         "  BF16 F32; norms, scales and ffn_gate_inp stay F32. A matrix whose rows do not fill T's blocks\n"
         "  (32 elements, 256 for K-quants) is refused by name, never written in another type.\n"
         "--tensor-type PATTERN=T (repeatable; the last matching rule wins): matrices matching PATTERN in T.\n"
         "  PATTERN matches a tensor name without its \".weight\" when it equals the name or its tail after\n"
         "  a '.'; '*' matches any run of characters. ffn_down_exps=Q6_K: every layer's ffn_down_exps;\n"
         "  blk.0.ffn_down=Q8_0: layer 0's shared-MLP down projection only; blk.*.attn_*=Q8_0. A rule that\n"
         "  matches no matrix is an error. The mixed presets (tiny-kquant, moe-kquant, 26b-a4b-mixed) bring\n"
         "  their own rules, which the command line's come after ('*=Q8_0' overrides them all).\n";
}

}  // namespace lf::make_model
