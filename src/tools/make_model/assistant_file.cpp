#include "assistant_file.h"

#include "metadata.h"
#include "model_file.h"
#include "tensor_adder.h"
#include "weights.h"

namespace lf::make_model {
namespace {

// Google's drafters by their target's width, from each checkpoint's config.json (the
// converter, conversion/gemma.py's Gemma4AssistantModel, writes them as they are): four layers,
// three sliding and one global.
struct GoogleDrafter {
  int n_embd_target;
  AssistantShape shape;
};
const GoogleDrafter kGoogleDrafters[] = {
    {5376, {1024, 8192, 32, "SSSG"}},  // gemma-4-31B-it-assistant
    {2816, {1024, 8192, 16, "SSSG"}},  // gemma-4-26B-A4B-it-assistant: a dense FFN beside a MoE target
    {2560, {256, 2048, 4, "SSSG"}},    // gemma-4-E4B-it-assistant
    {1536, {256, 2048, 4, "SSSG"}},    // gemma-4-E2B-it-assistant
};

// The drafter's configuration: each layer's attention shaped as the target layer it reads
// (llama.cpp's sharing rule: sliding layers layer n-2, global ones n-1), its own width and FFN.
Status assistant_config(const ModelConfig& target, const AssistantShape& shape, ModelConfig* out) {
  if (target.arch != Arch::gemma4 || target.n_layer < 2) {
    return Status(Code::invalid_argument, "a drafter needs a gemma4 target of at least 2 layers");
  }
  if (shape.pattern.empty() || shape.pattern.find_first_not_of("SG") != std::string::npos) {
    return Status(Code::invalid_argument, "the drafter's layer pattern '" + shape.pattern + "' must be S and G only");
  }
  // llama.cpp tells the target's width from the drafter's by their differing.
  if (shape.n_embd <= 0 || shape.n_embd == target.n_embd || shape.n_ff <= 0 || shape.n_head <= 0) {
    return Status(Code::invalid_argument, "the drafter's width (" + std::to_string(shape.n_embd) +
                                              "), FFN width and head count must be positive, and the width not the target's (" +
                                              std::to_string(target.n_embd) + ")");
  }
  ModelConfig c;
  c.arch = Arch::gemma4;
  c.n_embd = shape.n_embd;
  c.n_layer = static_cast<int>(shape.pattern.size());
  c.n_vocab = target.n_vocab;
  c.n_ctx_train = target.n_ctx_train;
  c.n_swa = target.n_swa;
  c.norm_eps = target.norm_eps;
  c.final_softcap = target.final_softcap;
  for (char kind : shape.pattern) {
    const LayerConfig& src = target.layers[target.n_layer - (kind == 'S' ? 2 : 1)];
    if (src.sliding != (kind == 'S')) {
      return Status(Code::invalid_argument, std::string("the target's layer ") +
                                                std::to_string(target.n_layer - (kind == 'S' ? 2 : 1)) + " is not " +
                                                (kind == 'S' ? "sliding" : "global") + ", as a drafter needs");
    }
    if (shape.n_head % src.n_head_kv != 0) {
      return Status(Code::invalid_argument, "the drafter's " + std::to_string(shape.n_head) +
                                                " query heads are not a multiple of the target's layer " +
                                                std::to_string(target.n_layer - (kind == 'S' ? 2 : 1)) + "'s " +
                                                std::to_string(src.n_head_kv) + " KV heads");
    }
    LayerConfig l = src;
    l.n_head = shape.n_head;
    l.n_ff = shape.n_ff;
    l.shares_kv = true;
    l.has_v = false;
    l.has_output_scale = true;
    l.moe = false;
    c.layers.push_back(l);
  }
  *out = std::move(c);
  return Status();
}

// The target's layer shapes as the command line's kinds, for write_arch_metadata.
MakeSettings assistant_settings(const ModelConfig& target, const ModelConfig& c, const MakeSettings& settings) {
  MakeSettings s = settings;
  const LayerConfig& sliding = target.layers[target.n_layer - 2];
  const LayerConfig& global = target.layers[target.n_layer - 1];
  s.layers.n_head = c.layers[0].n_head;
  s.layers.head_dim_swa = sliding.head_dim;
  s.layers.head_dim_global = global.head_dim;
  s.layers.rope_base = global.rope_base;
  s.layers.rope_base_swa = sliding.rope_base;
  s.tensor_types.clear();
  // Its own weights, not the target's under the names both have (token_embd, output_norm).
  s.seed = mix64(settings.seed ^ fnv1a(kAssistantArch));
  return s;
}

}  // namespace

AssistantShape assistant_shape(const ModelConfig& target, const AssistantShape& given) {
  AssistantShape s{32, 64, target.layers.empty() ? 0 : target.layers.back().n_head, "SSG"};
  for (const GoogleDrafter& g : kGoogleDrafters) {
    if (g.n_embd_target == target.n_embd) s = g.shape;
  }
  if (given.n_embd > 0) s.n_embd = given.n_embd;
  if (given.n_ff > 0) s.n_ff = given.n_ff;
  if (given.n_head > 0) s.n_head = given.n_head;
  if (!given.pattern.empty()) s.pattern = given.pattern;
  return s;
}

Status add_assistant(const ModelConfig& target, const AssistantShape& given, const MakeSettings& settings, GgufWriter* w) {
  const AssistantShape shape = assistant_shape(target, given);
  ModelConfig c;
  LF_RETURN_IF_ERROR(assistant_config(target, shape, &c));
  const MakeSettings s = assistant_settings(target, c, settings);
  Vocab vocab;
  LF_RETURN_IF_ERROR(make_vocab(s, c.n_vocab, &vocab));
  c.n_vocab = static_cast<int>(vocab.tokens.size());
  write_arch_metadata(c, s, *w, kAssistantArch);
  const std::string a = std::string(kAssistantArch) + ".";
  // The converter writes the target's width and every layer as an MTP layer.
  w->set_u32(a + "embedding_length_out", static_cast<uint32_t>(target.n_embd));
  w->set_u32(a + "nextn_predict_layers", static_cast<uint32_t>(c.n_layer));
  write_tokenizer_metadata(c, vocab, *w);
  TensorAdder t(s, *w);
  LF_RETURN_IF_ERROR(t.linear("nextn.pre_projection.weight", 2 * static_cast<int64_t>(target.n_embd), c.n_embd));
  LF_RETURN_IF_ERROR(t.linear("nextn.post_projection.weight", c.n_embd, target.n_embd));
  return add_weight_tensors(c, s, *w);
}

}  // namespace lf::make_model
