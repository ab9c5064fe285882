#include "cli.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iterator>

#include "complete_config.h"
#include "presets.h"

namespace lf::make_model {
namespace {

Status bad(const std::string& message) { return Status(Code::invalid_argument, message); }

// The engine's ModelConfig holds ints: widths and counts in 0 .. INT_MAX.
Status parse_int(const std::string& opt, const std::string& text, int* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0 || v > static_cast<unsigned long long>(INT_MAX)) {
    return bad(opt + " needs an integer in 0 .. " + std::to_string(INT_MAX) + ", got '" + text + "'");
  }
  *out = static_cast<int>(v);
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

// The part of the arguments a field belongs to, so one setter serves each field type.
template <typename T>
T& part(CliArgs& a);
template <>
ModelConfig& part(CliArgs& a) { return a.model; }
template <>
LayerKinds& part(CliArgs& a) { return a.settings.layers; }
template <>
MakeSettings& part(CliArgs& a) { return a.settings; }

template <typename T>
Setter integer(const char* opt, int T::*field) {
  return [opt, field](const std::string& v, CliArgs& a) { return parse_int(opt, v, &(part<T>(a).*field)); };
}

// The drafter's own sizes: 0 would mean "left to assistant_shape", never a size one asked for.
Setter positive(const char* opt, int AssistantShape::*field) {
  return [opt, field](const std::string& v, CliArgs& a) {
    LF_RETURN_IF_ERROR(parse_int(opt, v, &(a.assistant_shape.*field)));
    return a.assistant_shape.*field > 0 ? Status() : bad(std::string(opt) + " must be positive, got '" + v + "'");
  };
}

template <typename T>
Setter number(const char* opt, float T::*field) {
  return [opt, field](const std::string& v, CliArgs& a) { return parse_f32(opt, v, &(part<T>(a).*field)); };
}

template <typename T>
Setter flag(bool T::*field, bool value) {
  return [field, value](const std::string&, CliArgs& a) {
    part<T>(a).*field = value;
    return Status();
  };
}

const std::vector<Option>& options() {
  static const std::vector<Option> kOptions = {
      {"--out", true, [](const std::string& v, CliArgs& a) { a.out_path = v; return Status(); }},
      {"--arch", true,
       [](const std::string& v, CliArgs& a) {
         if (v == "gemma4") a.model.arch = Arch::gemma4;
         else if (v == "gemma3") a.model.arch = Arch::gemma3;
         else return bad("--arch must be gemma4 or gemma3, got '" + v + "'");
         return Status();
       }},
      {"--n-layer", true, integer("--n-layer", &ModelConfig::n_layer)},
      {"--n-embd", true, integer("--n-embd", &ModelConfig::n_embd)},
      {"--n-ff", true, integer("--n-ff", &LayerKinds::n_ff)},
      {"--n-head", true, integer("--n-head", &LayerKinds::n_head)},
      {"--n-head-kv-swa", true, integer("--n-head-kv-swa", &LayerKinds::n_head_kv_swa)},
      {"--n-head-kv-global", true, integer("--n-head-kv-global", &LayerKinds::n_head_kv_global)},
      {"--n-head-kv", true,
       [](const std::string& v, CliArgs& a) {
         LF_RETURN_IF_ERROR(parse_int("--n-head-kv", v, &a.settings.layers.n_head_kv_swa));
         a.settings.layers.n_head_kv_global = a.settings.layers.n_head_kv_swa;
         return Status();
       }},
      {"--head-dim-swa", true, integer("--head-dim-swa", &LayerKinds::head_dim_swa)},
      {"--head-dim-global", true, integer("--head-dim-global", &LayerKinds::head_dim_global)},
      {"--head-dim", true,
       [](const std::string& v, CliArgs& a) {
         LF_RETURN_IF_ERROR(parse_int("--head-dim", v, &a.settings.layers.head_dim_swa));
         a.settings.layers.head_dim_global = a.settings.layers.head_dim_swa;
         return Status();
       }},
      {"--sliding-window", true, integer("--sliding-window", &ModelConfig::n_swa)},
      {"--swa-period", true, integer("--swa-period", &LayerKinds::swa_period)},
      {"--swa-pattern", true,
       [](const std::string& v, CliArgs& a) {
         if (v.empty() || v.find_first_not_of("SG") != std::string::npos) {
           return bad("--swa-pattern must be a string of S (sliding) and G (global), got '" + v + "'");
         }
         a.settings.layers.swa_pattern = v;
         return Status();
       }},
      {"--n-ff-layers", true,
       [](const std::string& v, CliArgs& a) {
         std::vector<int>& widths = a.settings.layers.n_ff_layers;
         widths.clear();
         size_t start = 0;
         while (start <= v.size()) {
           const size_t comma = std::min(v.find(',', start), v.size());
           int width = 0;
           LF_RETURN_IF_ERROR(parse_int("--n-ff-layers", v.substr(start, comma - start), &width));
           widths.push_back(width);
           start = comma + 1;
         }
         return Status();
       }},
      {"--n-embd-per-layer", true, integer("--n-embd-per-layer", &ModelConfig::n_embd_per_layer)},
      {"--shared-kv-layers", true, integer("--shared-kv-layers", &ModelConfig::n_shared_kv)},
      {"--double-wide-shared", false, flag(&LayerKinds::double_wide_shared, true)},
      {"--no-double-wide-shared", false, flag(&LayerKinds::double_wide_shared, false)},
      {"--rope-base", true, number("--rope-base", &LayerKinds::rope_base)},
      {"--rope-base-swa", true, number("--rope-base-swa", &LayerKinds::rope_base_swa)},
      {"--partial-rotary", true, number("--partial-rotary", &MakeSettings::partial_rotary)},
      {"--no-global-v", false, flag(&LayerKinds::global_v, false)},
      {"--global-v", false, flag(&LayerKinds::global_v, true)},
      {"--untied-output", false, flag(&ModelConfig::tied_output, false)},
      {"--output-norm-gain", true, number("--output-norm-gain", &MakeSettings::output_norm_gain)},
      {"--layer-output-scale", false, flag(&LayerKinds::layer_output_scale, true)},
      {"--no-layer-output-scale", false, flag(&LayerKinds::layer_output_scale, false)},
      {"--n-expert", true, integer("--n-expert", &ModelConfig::n_expert)},
      {"--n-expert-used", true, integer("--n-expert-used", &ModelConfig::n_expert_used)},
      {"--n-ff-exp", true, integer("--n-ff-exp", &ModelConfig::n_ff_exp)},
      {"--fused-gate-up", false, flag(&ModelConfig::fused_gate_up, true)},
      {"--separate-gate-up", false, flag(&ModelConfig::fused_gate_up, false)},
      {"--down-exps-scale", false, flag(&MakeSettings::down_exps_scale, true)},
      {"--no-down-exps-scale", false, flag(&MakeSettings::down_exps_scale, false)},
      {"--n-vocab", true, integer("--n-vocab", &ModelConfig::n_vocab)},
      {"--vocab", true,
       [](const std::string& v, CliArgs& a) {
         if (v == "synthetic") a.settings.vocab = VocabKind::synthetic;
         else if (v == "gemma") a.settings.vocab = VocabKind::gemma;
         else if (v == "gguf") a.settings.vocab = VocabKind::gguf;
         else return bad("--vocab must be synthetic, gemma or gguf, got '" + v + "'");
         return Status();
       }},
      {"--tokenizer-json", true, [](const std::string& v, CliArgs& a) { a.settings.tokenizer_json = v; return Status(); }},
      {"--vocab-gguf", true, [](const std::string& v, CliArgs& a) { a.settings.vocab_gguf = v; return Status(); }},
      {"--chat-template", true, [](const std::string& v, CliArgs& a) { a.settings.chat_template = v; return Status(); }},
      {"--ctx", true, integer("--ctx", &ModelConfig::n_ctx_train)},
      {"--type", true, [](const std::string& v, CliArgs& a) { return parse_type("--type", v, &a.settings.type); }},
      {"--tensor-type", true,
       [](const std::string& v, CliArgs& a) {
         TensorTypeRule rule;
         LF_RETURN_IF_ERROR(parse_tensor_type_rule(v, &rule));
         a.settings.tensor_types.push_back(rule);
         return Status();
       }},
      {"--seed", true, [](const std::string& v, CliArgs& a) { return parse_u64("--seed", v, &a.settings.seed); }},
      {"--softcap", true, number("--softcap", &MakeSettings::softcap)},
      {"--eps", true, number("--eps", &ModelConfig::norm_eps)},
      {"--assistant", false, [](const std::string&, CliArgs& a) { a.assistant = true; return Status(); }},
      {"--assistant-layers", true,
       [](const std::string& v, CliArgs& a) {
         if (v.empty() || v.find_first_not_of("SG") != std::string::npos) {
           return bad("--assistant-layers must be a string of S (sliding) and G (global), got '" + v + "'");
         }
         a.assistant_shape.pattern = v;
         return Status();
       }},
      {"--assistant-n-embd", true, positive("--assistant-n-embd", &AssistantShape::n_embd)},
      {"--assistant-n-ff", true, positive("--assistant-n-ff", &AssistantShape::n_ff)},
      {"--assistant-n-head", true, positive("--assistant-n-head", &AssistantShape::n_head)},
      {"--assistant-for", true,
       [](const std::string& v, CliArgs& a) {
         a.assistant = true;
         a.target_file = v;
         return Status();
       }},
      {"--mmproj", false, [](const std::string&, CliArgs& a) { a.mmproj = true; return Status(); }},
      {"--mmproj-for", true,
       [](const std::string& v, CliArgs& a) {
         a.mmproj = true;
         a.target_file = v;
         return Status();
       }},
      {"--vision-tower", true, [](const std::string& v, CliArgs& a) { a.vision_shape.tower = v; return Status(); }},
      {"--vision-layers", true,
       [](const std::string& v, CliArgs& a) { return parse_int("--vision-layers", v, &a.vision_shape.n_layer); }},
      {"--vision-type", true,
       [](const std::string& v, CliArgs& a) { return parse_type("--vision-type", v, &a.vision_shape.type); }},
      {"--audio", false, [](const std::string&, CliArgs& a) { a.audio_shape.enabled = true; return Status(); }},
      {"--audio-layers", true,
       [](const std::string& v, CliArgs& a) { return parse_int("--audio-layers", v, &a.audio_shape.n_layer); }},
      {"--header-only", false, [](const std::string&, CliArgs& a) { a.header_only = true; return Status(); }},
      {"--list-presets", false, [](const std::string&, CliArgs& a) { a.list_presets = true; return Status(); }},
      {"--help", false, [](const std::string&, CliArgs& a) { a.help = true; return Status(); }},
  };
  return kOptions;
}

// Options in order, each setting its field; --preset and its value are the caller's.
Status apply_options(const std::vector<std::string>& args, CliArgs* a) {
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
    LF_RETURN_IF_ERROR(opt->set(value, *a));
  }
  return Status();
}

// What a line with --assistant-for or --mmproj-for may set besides it: the target comes from its
// file.
Status check_target_file(const std::vector<std::string>& args, bool mmproj) {
  static const std::vector<std::string> kAssistant = {"--out", "--assistant", "--assistant-for", "--assistant-layers",
                                                      "--assistant-n-embd", "--assistant-n-ff", "--assistant-n-head",
                                                      "--type", "--tensor-type", "--seed", "--header-only"};
  static const std::vector<std::string> kMmproj = {"--out", "--mmproj", "--mmproj-for", "--vision-tower",
                                                   "--vision-layers", "--vision-type", "--audio", "--audio-layers",
                                                   "--seed", "--header-only"};
  const std::vector<std::string>& allowed = mmproj ? kMmproj : kAssistant;
  const char* const which = mmproj ? "--mmproj-for" : "--assistant-for";
  for (const std::string& arg : args) {
    if (arg.rfind("--", 0) != 0) continue;
    if (std::find(allowed.begin(), allowed.end(), arg) == allowed.end()) {
      return bad(arg + (mmproj && arg.rfind("--assistant", 0) == 0 ? " is not for a projector" : " describes a target") + "; " +
                 which + " reads the target from its file");
    }
  }
  return Status();
}

}  // namespace

Status parse_cli(const std::vector<std::string>& args, CliArgs* out) {
  CliArgs a;
  // The preset applies first wherever it appears, so overrides never depend on order.
  const Preset* preset = nullptr;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] != "--preset") continue;
    if (i + 1 >= args.size()) return bad("--preset needs a value");
    preset = find_preset(args[i + 1]);
    if (preset == nullptr) return bad("unknown preset '" + args[i + 1] + "' (see --list-presets)");
  }
  if (preset != nullptr) {
    LF_RETURN_IF_ERROR(apply_options(preset_args(*preset), &a));
    for (TensorTypeRule& r : a.settings.tensor_types) r.must_match = false;
  }
  LF_RETURN_IF_ERROR(apply_options(args, &a));
  if (a.list_presets || a.help) {
    *out = a;
    return Status();
  }
  if (a.out_path.empty()) return bad("--out FILE is required");
  if (a.mmproj && a.assistant) return bad("--mmproj and --assistant write different files: give one");
  if (a.audio_shape.n_layer > 0 && !a.audio_shape.enabled) return bad("--audio-layers needs --audio");
  if (a.audio_shape.enabled && !a.mmproj) return bad("--audio adds an encoder to a projector: give --mmproj or --mmproj-for too");
  if (!a.target_file.empty()) {
    // The target's configuration and vocabulary are read from its header by make_model.
    LF_RETURN_IF_ERROR(check_target_file(args, a.mmproj));
    *out = a;
    return Status();
  }
  if (preset == nullptr) return bad("--preset is required (see --list-presets)");
  if (a.settings.vocab == VocabKind::gemma && a.settings.tokenizer_json.empty()) {
    return bad("--vocab gemma needs --tokenizer-json FILE (a Gemma tokenizer.json)");
  }
  if (a.settings.vocab == VocabKind::gguf && a.settings.vocab_gguf.empty()) {
    return bad("--vocab gguf needs --vocab-gguf FILE (a GGUF with tokenizer keys, such as llama.cpp's ggml-vocab-gemma-4.gguf)");
  }
  LF_RETURN_IF_ERROR(complete_config(&a.model, &a.settings));
  *out = a;
  return Status();
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
         "  their own rules, which the command line's come after ('*=Q8_0' overrides them all).\n"
         "--vocab gguf --vocab-gguf FILE: the tokenizer keys and chat template of a GGUF (llama.cpp's\n"
         "  models/ggml-vocab-gemma-4.gguf: the real Gemma 4 vocabulary; preset gemma4-vocab).\n"
         "--chat-template FILE: FILE's text as tokenizer.chat_template (default: the vocabulary's own, or a\n"
         "  minimal turn template).\n"
         "--assistant: write the MTP drafter (gemma4-assistant) of the model the other options describe,\n"
         "  not the model. For a target of gemma-4-31B's, 26B-A4B's, E4B's or E2B's width (the *-shape\n"
         "  presets) the drafter has Google's drafter's shape, else width 32, FFN 64, layers SSG and the\n"
         "  target's query heads; --assistant-layers PATTERN (S reads the target's layer n-2, G layer n-1),\n"
         "  --assistant-n-embd N, --assistant-n-ff N and --assistant-n-head N set them. Same vocabulary,\n"
         "  types and seed as the target's file.\n"
         "--assistant-for TARGET.gguf: the drafter of the target in that file, its shapes and vocabulary\n"
         "  read from the file's header (no --preset; --type, --seed and the --assistant-* options apply).\n"

         "--mmproj: write the Gemma 4 vision projector (gemma4v) of the model the other options describe:\n"
         "  --vision-tower auto|e2b|31b|tiny (default auto: E-models' 768-wide tower, the others' 1152-wide\n"
         "  one; tiny: 64 wide, 2 layers, clipped linears and standardization), --vision-layers N (fewer\n"
         "  layers), --vision-type T (the matrices' type, default F16; the patch kernel stays F16; the audio\n"
         "  encoder's matrices take it too, as the converter gives a file one type).\n"
         "  --audio: the projector carries Gemma 4's audio encoder (gemma4a) too, Google's E2B/E4B tower\n"
         "  (1024 wide, 12 conformer blocks, 128 mel bins; its convolutions and input projection F32);\n"
         "  --audio-layers N: fewer blocks. Only for an E-model target (per-layer embeddings: E2B, E4B).\n"
         "--mmproj-for TARGET.gguf: the projector of the model in that file, its width read from the\n"
         "  file's header (no --preset; --seed, --audio and the --vision-* and --audio-* options apply).\n";
}

}  // namespace lf::make_model
