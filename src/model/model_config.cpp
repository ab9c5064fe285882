#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string_view>

#include "gguf/key_reader.h"
#include "model/tensor_table.h"

namespace lf {
namespace {

// Widths (n_embd, n_ff, a head's dim times the heads) above this are refused: far beyond any
// Gemma, and they keep every product of two widths inside int64 and every width inside int.
constexpr int kMaxWidth = 1 << 20;
constexpr int kMaxHeads = 1 << 12;

// The layers the file has weights for: the distinct N of its "blk.N." tensors, and the largest.
struct TableLayers {
  int64_t count = 0, last = -1;
};
TableLayers layers_with_tensors(const GgufFile& file) {
  std::set<int64_t> layers;
  for (const GgufTensorInfo& t : file.tensors) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    char* end = nullptr;
    const long long il = std::strtoll(t.name.c_str() + 4, &end, 10);
    // Indices past an int (strtoll saturates) are kept as INT32_MAX: never a layer, never an overflow.
    if (end != t.name.c_str() + 4 && *end == '.' && il >= 0) layers.insert(std::min<long long>(il, 0x7fffffff));
  }
  return {static_cast<int64_t>(layers.size()), layers.empty() ? -1 : *layers.rbegin()};
}

// Hyper-parameters shared by both architectures, before the per-arch rules.
struct CommonKeys {
  std::vector<int> n_head, n_head_kv, n_ff;
};

Status read_common(const KeyReader& keys, ModelConfig* c, CommonKeys* ck) {
  LF_RETURN_IF_ERROR(keys.get_int("context_length", &c->n_ctx_train));
  LF_RETURN_IF_ERROR(keys.get_int("embedding_length", &c->n_embd));
  LF_RETURN_IF_ERROR(keys.get_int("block_count", &c->n_layer));
  LF_RETURN_IF_ERROR(keys.get_float("attention.layer_norm_rms_epsilon", &c->norm_eps));
  if (c->n_layer <= 0 || c->n_embd <= 0) {
    return Status(Code::malformed, "block_count and embedding_length must be positive");
  }
  // Per-layer arrays are sized by block_count: it must be what the tensor table holds before
  // anything is allocated from it.
  // Every layer 0 .. block_count - 1 has tensors of its own, so block_count is bounded by the
  // table (and the table by the bytes read), whatever N a single tensor's name claims.
  const TableLayers table = layers_with_tensors(keys.file());
  if (c->n_layer != table.count || table.last + 1 != table.count) {
    return Status(Code::malformed, keys.full("block_count") + " = " + std::to_string(c->n_layer) +
                                       ", but the tensor table has blk.N tensors for " + std::to_string(table.count) +
                                       " layers" +
                                       (table.last + 1 != table.count ? " up to blk." + std::to_string(table.last) : ""));
  }
  if (c->n_embd > kMaxWidth) {
    return Status(Code::unsupported, keys.full("embedding_length") + " = " + std::to_string(c->n_embd) +
                                         " is above the largest width supported, " + std::to_string(kMaxWidth));
  }
  if (!(c->norm_eps > 0.0f)) {
    return Status(Code::malformed, keys.full("attention.layer_norm_rms_epsilon") + " must be positive");
  }
  LF_RETURN_IF_ERROR(keys.get_per_layer("attention.head_count", c->n_layer, true, 0, &ck->n_head));
  // head_count_kv defaults to head_count, layer by layer.
  LF_RETURN_IF_ERROR(keys.get_per_layer("attention.head_count_kv", c->n_layer, false, -1, &ck->n_head_kv));
  for (int il = 0; il < c->n_layer; ++il) {
    if (ck->n_head_kv[il] < 0) ck->n_head_kv[il] = ck->n_head[il];
  }
  LF_RETURN_IF_ERROR(keys.get_per_layer("feed_forward_length", c->n_layer, true, 0, &ck->n_ff));
  return Status();
}

// A per-layer key that must hold one value for all layers (llama.cpp sizes every layer's
// expert tensors by layer 0's width): that value, 0 when absent.
Status get_uniform(const KeyReader& keys, std::string_view key, int n_layer, int* out) {
  std::vector<int> values;
  LF_RETURN_IF_ERROR(keys.get_per_layer(key, n_layer, false, 0, &values));
  for (int v : values) {
    if (v != values[0]) {
      return Status(Code::unsupported, "key '" + keys.full(key) + "' differs between layers, which is not supported");
    }
  }
  *out = values[0];
  return Status();
}

// The expert keys and which layers route (docs/gemma-architecture.md, "Mixture of experts";
// docs/gguf.md, "MoE tensors and keys"). Variants llama.cpp's gemma4 graph does not run as one
// softmax over all experts are refused by name.
Status read_moe(const KeyReader& keys, const GgufFile& file, ModelConfig* c) {
  const int n_layer = c->n_layer;
  bool found = false;
  LF_RETURN_IF_ERROR(keys.get_int("expert_count", &c->n_expert, &found));
  int n_groups = 0;
  LF_RETURN_IF_ERROR(keys.get_int("expert_group_count", &n_groups, &found));
  if (n_groups > 1) {
    return Status(Code::unsupported, "grouped expert routing is not supported (" + keys.full("expert_group_count") +
                                         " = " + std::to_string(n_groups) + ")");
  }
  bool any_router = false;
  for (int il = 0; il < n_layer; ++il) {
    c->layers[il].moe = file.tensor(layer_tensor_name(il, "ffn_gate_inp")) != nullptr;
    any_router = any_router || c->layers[il].moe;
  }
  if (c->n_expert == 0) {
    if (any_router) {
      return Status(Code::malformed, "the file has ffn_gate_inp routers but no key '" + keys.full("expert_count") + "'");
    }
    return Status();
  }
  if (c->arch != Arch::gemma4) {
    return Status(Code::unsupported, "mixture-of-experts gemma3 models are not supported (" +
                                         keys.full("expert_count") + " = " + std::to_string(c->n_expert) + ")");
  }
  LF_RETURN_IF_ERROR(get_uniform(keys, "expert_used_count", n_layer, &c->n_expert_used));
  LF_RETURN_IF_ERROR(get_uniform(keys, "expert_feed_forward_length", n_layer, &c->n_ff_exp));
  // llama.cpp's LLAMA_MAX_EXPERTS.
  if (c->n_expert > 512) {
    return Status(Code::unsupported, keys.full("expert_count") + " = " + std::to_string(c->n_expert) +
                                         " is above the 512 experts llama.cpp allows");
  }
  if (c->n_expert_used < 1 || c->n_expert_used > c->n_expert) {
    return Status(Code::malformed, keys.full("expert_used_count") + " = " + std::to_string(c->n_expert_used) +
                                       " must be in 1 .. expert_count = " + std::to_string(c->n_expert));
  }
  if (c->n_ff_exp <= 0 || c->n_ff_exp > kMaxWidth) {
    return Status(Code::malformed, keys.full("expert_feed_forward_length") + " = " + std::to_string(c->n_ff_exp) +
                                       " must be in 1 .. " + std::to_string(kMaxWidth));
  }
  c->fused_gate_up = file.tensor(layer_tensor_name(0, "ffn_gate_up_exps")) != nullptr;
  for (int il = 0; il < n_layer; ++il) {
    if (!c->layers[il].moe) continue;
    const bool fused = file.tensor(layer_tensor_name(il, "ffn_gate_up_exps")) != nullptr;
    if (fused != c->fused_gate_up) {
      return Status(Code::unsupported, "layer " + std::to_string(il) +
                                           ": fused ffn_gate_up_exps in some layers and separate ffn_gate_exps / "
                                           "ffn_up_exps in others is not supported");
    }
  }
  return Status();
}

// Rope scaling factor -> freq_scale of global layers (llama.cpp: 0 or absent means 1).
Status read_rope_freq_scale(const KeyReader& keys, float* out) {
  float factor = 0.0f;
  bool found = false;
  LF_RETURN_IF_ERROR(keys.get_float("rope.scaling.factor", &factor, &found));
  *out = (found && factor != 0.0f) ? 1.0f / factor : 1.0f;
  return Status();
}

// Which cache each layer attends over (docs/gemma-architecture.md, "Shared-KV layers"): layers
// at or past n_kv = n_layer - shared_kv_layers reuse layer n_kv - 2 when sliding, n_kv - 1 when
// global (llama.cpp's rule). The source must be a layer of the same kind and shape, or the
// shared layer would read a cache laid out for another attention.
Status assign_kv_layers(const std::string& key, ModelConfig* c) {
  const int n_kv = c->n_layer - c->n_shared_kv;
  if (c->n_shared_kv > 0 && n_kv < 2) {
    return Status(Code::unsupported, key + " = " + std::to_string(c->n_shared_kv) + " leaves " + std::to_string(n_kv) +
                                         " of " + std::to_string(c->n_layer) +
                                         " layers with a KV cache of their own; llama.cpp needs at least 2");
  }
  for (int il = 0; il < c->n_layer; ++il) {
    LayerConfig& l = c->layers[il];
    l.shares_kv = il >= n_kv;
    l.kv_layer = l.shares_kv ? n_kv - (l.sliding ? 2 : 1) : il;
    if (!l.shares_kv) continue;
    const LayerConfig& src = c->layers[l.kv_layer];
    if (src.sliding != l.sliding || src.head_dim != l.head_dim || src.n_head_kv != l.n_head_kv) {
      return Status(Code::unsupported,
                    "shared-KV layer " + std::to_string(il) + " (" + (l.sliding ? "sliding" : "global") + ", head dim " +
                        std::to_string(l.head_dim) + ", " + std::to_string(l.n_head_kv) + " KV heads) would read layer " +
                        std::to_string(l.kv_layer) + "'s cache (" + (src.sliding ? "sliding" : "global") + ", head dim " +
                        std::to_string(src.head_dim) + ", " + std::to_string(src.n_head_kv) +
                        " KV heads): llama.cpp's mapping needs layer " + std::to_string(n_kv - 2) +
                        " sliding and layer " + std::to_string(n_kv - 1) + " global, of the shared layers' shapes");
    }
  }
  return Status();
}

// assistant: a gemma4-assistant drafter's own layers (model/drafter.h), which llama.cpp reads
// without per-layer inputs, shared-KV layers, experts or a final soft-cap.
Status read_gemma4(const KeyReader& keys, const GgufFile& file, bool assistant, ModelConfig* c) {
  CommonKeys ck;
  LF_RETURN_IF_ERROR(read_common(keys, c, &ck));
  const int n_layer = c->n_layer;

  // llama.cpp requires the per-layer width; shared_kv_layers defaults to 0.
  if (!assistant) LF_RETURN_IF_ERROR(keys.get_int("embedding_length_per_layer_input", &c->n_embd_per_layer));
  if (c->n_embd_per_layer > kMaxWidth) {
    return Status(Code::unsupported, keys.full("embedding_length_per_layer_input") + " = " +
                                         std::to_string(c->n_embd_per_layer) + " is above the largest width supported, " +
                                         std::to_string(kMaxWidth));
  }
  bool found = false;
  if (!assistant) LF_RETURN_IF_ERROR(keys.get_int("attention.shared_kv_layers", &c->n_shared_kv, &found));

  const int default_head_dim = ck.n_head[0] > 0 ? c->n_embd / ck.n_head[0] : 0;
  int key_length = default_head_dim, value_length = default_head_dim, key_length_swa = 0, value_length_swa = 0;
  LF_RETURN_IF_ERROR(keys.get_int("attention.key_length", &key_length, &found));
  LF_RETURN_IF_ERROR(keys.get_int("attention.value_length", &value_length, &found));
  LF_RETURN_IF_ERROR(keys.get_int("attention.key_length_swa", &key_length_swa));
  LF_RETURN_IF_ERROR(keys.get_int("attention.value_length_swa", &value_length_swa));
  if (key_length != value_length || key_length_swa != value_length_swa) {
    return Status(Code::unsupported,
                  "key_length != value_length is not supported (global " + std::to_string(key_length) + " vs " +
                      std::to_string(value_length) + ", sliding " + std::to_string(key_length_swa) + " vs " +
                      std::to_string(value_length_swa) + ")");
  }

  LF_RETURN_IF_ERROR(keys.get_int("attention.sliding_window", &c->n_swa));
  std::vector<int> sliding;
  LF_RETURN_IF_ERROR(keys.get_per_layer("attention.sliding_window_pattern", n_layer, true, 0, &sliding));

  int n_rot = key_length;
  LF_RETURN_IF_ERROR(keys.get_int("rope.dimension_count", &n_rot, &found));
  // llama.cpp defaults the sliding rope dims to the global ones, not to key_length_swa.
  int n_rot_swa = n_rot;
  LF_RETURN_IF_ERROR(keys.get_int("rope.dimension_count_swa", &n_rot_swa, &found));
  float base = 10000.0f, base_swa = 10000.0f, freq_scale = 1.0f;
  LF_RETURN_IF_ERROR(keys.get_float("rope.freq_base", &base, &found));
  LF_RETURN_IF_ERROR(keys.get_float("rope.freq_base_swa", &base_swa, &found));
  LF_RETURN_IF_ERROR(read_rope_freq_scale(keys, &freq_scale));

  // llama.cpp keeps its default cap of 30 when the key is absent.
  c->final_softcap = assistant ? 0.0f : 30.0f;
  if (!assistant) LF_RETURN_IF_ERROR(keys.get_float("final_logit_softcapping", &c->final_softcap, &found));
  c->query_scale = 1.0f;

  c->layers.resize(n_layer);
  for (int il = 0; il < n_layer; ++il) {
    LayerConfig& l = c->layers[il];
    l.sliding = sliding[il] != 0;
    l.head_dim = l.sliding ? key_length_swa : key_length;
    l.n_head = ck.n_head[il];
    l.n_head_kv = ck.n_head_kv[il];
    l.n_ff = ck.n_ff[il];
    l.n_rot = l.sliding ? n_rot_swa : n_rot;
    l.rope_base = l.sliding ? base_swa : base;
    l.rope_freq_scale = l.sliding ? 1.0f : freq_scale;
    l.use_freq_factors = !l.sliding;
    l.has_v = file.tensor(layer_tensor_name(il, "attn_v")) != nullptr;
    l.has_output_scale = file.tensor(layer_tensor_name(il, "layer_output_scale")) != nullptr;
  }
  LF_RETURN_IF_ERROR(assign_kv_layers(keys.full("attention.shared_kv_layers"), c));
  return assistant ? Status() : read_moe(keys, file, c);
}

Status read_gemma3(const KeyReader& keys, ModelConfig* c) {
  CommonKeys ck;
  LF_RETURN_IF_ERROR(read_common(keys, c, &ck));
  const int n_layer = c->n_layer;
  bool found = false;

  const int default_head_dim = ck.n_head[0] > 0 ? c->n_embd / ck.n_head[0] : 0;
  int key_length = default_head_dim, value_length = default_head_dim;
  LF_RETURN_IF_ERROR(keys.get_int("attention.key_length", &key_length, &found));
  LF_RETURN_IF_ERROR(keys.get_int("attention.value_length", &value_length, &found));
  if (key_length != value_length) {
    return Status(Code::unsupported, "key_length != value_length is not supported (" +
                                         std::to_string(key_length) + " vs " + std::to_string(value_length) + ")");
  }

  // Sliding layers only when the window key exists and is positive; then every P-th layer
  // (P = sliding_window_pattern, default 6) is global: il % P == P - 1.
  c->n_swa = 0;
  LF_RETURN_IF_ERROR(keys.get_int("attention.sliding_window", &c->n_swa, &found));
  int period = 6;
  LF_RETURN_IF_ERROR(keys.get_int("attention.sliding_window_pattern", &period, &found));
  if (c->n_swa > 0 && period <= 0) {
    return Status(Code::malformed, "key '" + keys.full("attention.sliding_window_pattern") + "' must be positive");
  }

  int n_rot = key_length;
  LF_RETURN_IF_ERROR(keys.get_int("rope.dimension_count", &n_rot, &found));
  float base = 10000.0f, base_swa = 10000.0f, freq_scale = 1.0f;
  LF_RETURN_IF_ERROR(keys.get_float("rope.freq_base", &base, &found));
  LF_RETURN_IF_ERROR(keys.get_float("rope.freq_base_swa", &base_swa, &found));
  LF_RETURN_IF_ERROR(read_rope_freq_scale(keys, &freq_scale));

  c->final_softcap = 0.0f;
  LF_RETURN_IF_ERROR(keys.get_float("final_logit_softcapping", &c->final_softcap, &found));

  // llama.cpp decides "27B" by the layer count and then divides n_embd by n_head as integers.
  c->query_scale = n_layer == 62 && ck.n_head[0] > 0
                       ? 1.0f / std::sqrt(static_cast<float>(c->n_embd / ck.n_head[0]))
                       : 1.0f / std::sqrt(static_cast<float>(key_length));

  c->layers.resize(n_layer);
  for (int il = 0; il < n_layer; ++il) {
    LayerConfig& l = c->layers[il];
    l.sliding = c->n_swa > 0 && il % period < period - 1;
    l.head_dim = key_length;
    l.n_head = ck.n_head[il];
    l.n_head_kv = ck.n_head_kv[il];
    l.n_ff = ck.n_ff[il];
    l.n_rot = n_rot;
    l.rope_base = l.sliding ? base_swa : base;
    l.rope_freq_scale = l.sliding ? 1.0f : freq_scale;
    l.use_freq_factors = false;
    l.has_v = true;
    l.has_output_scale = false;
    l.kv_layer = il;
  }
  return read_moe(keys, keys.file(), c);
}

Status check_layer_shapes(const ModelConfig& c) {
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerConfig& l = c.layers[il];
    const std::string where = "layer " + std::to_string(il) + ": ";
    if (l.head_dim <= 0 || l.n_head <= 0 || l.n_head_kv <= 0 || l.n_ff <= 0) {
      return Status(Code::malformed, where + "head dim, head counts and feed_forward_length must be positive");
    }
    if (l.n_head > kMaxHeads || l.head_dim > kMaxWidth || l.n_ff > kMaxWidth ||
        static_cast<int64_t>(l.head_dim) * l.n_head > kMaxWidth) {
      return Status(Code::unsupported, where + "head dim " + std::to_string(l.head_dim) + " x " +
                                           std::to_string(l.n_head) + " heads or feed_forward_length " +
                                           std::to_string(l.n_ff) + " is above the largest width supported, " +
                                           std::to_string(kMaxWidth) + " (at most " + std::to_string(kMaxHeads) +
                                           " heads)");
    }
    if (l.n_head % l.n_head_kv != 0) {
      return Status(Code::unsupported, where + "head_count " + std::to_string(l.n_head) +
                                           " is not a multiple of head_count_kv " + std::to_string(l.n_head_kv));
    }
    if (l.n_rot <= 0 || l.n_rot > l.head_dim || l.n_rot % 2 != 0) {
      return Status(Code::unsupported, where + "rope dimension count " + std::to_string(l.n_rot) +
                                           " must be even and at most the head dim " + std::to_string(l.head_dim));
    }
    if (l.sliding && c.n_swa <= 0) {
      return Status(Code::malformed, where + "sliding layer but sliding_window is 0");
    }
  }
  return Status();
}

Status read_n_vocab(const GgufFile& file, ModelConfig* c) {
  const GgufTensorInfo* embd = file.tensor("token_embd.weight");
  if (!embd) return Status(Code::unsupported, "missing required tensor 'token_embd.weight'");
  c->n_vocab = static_cast<int>(embd->ne[1]);
  if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens")) {
    if (tokens->type != GgufType::ARRAY) {
      return Status(Code::malformed, "key 'tokenizer.ggml.tokens' must be an array");
    }
    if (tokens->count != static_cast<uint64_t>(embd->ne[1])) {
      return Status(Code::malformed, "tokenizer.ggml.tokens has " + std::to_string(tokens->count) +
                                         " tokens but token_embd.weight has ne1 = " + std::to_string(embd->ne[1]));
    }
  }
  return Status();
}

}  // namespace

Status load_model_config(const GgufFile& file, ModelConfig* out) {
  std::string arch;
  if (!file.get_string("general.architecture", &arch)) {
    return Status(Code::unsupported, "missing required key 'general.architecture'");
  }
  ModelConfig c;
  const KeyReader keys(file, arch);
  if (arch == "gemma4") {
    c.arch = Arch::gemma4;
    LF_RETURN_IF_ERROR(read_gemma4(keys, file, false, &c));
  } else if (arch == kAssistantArch) {
    return Status(Code::unsupported, "architecture '" + arch +
                                         "' is a drafter (MTP assistant): load it beside its target model with load_drafter");
  } else if (arch == "gemma3") {
    c.arch = Arch::gemma3;
    LF_RETURN_IF_ERROR(read_gemma3(keys, &c));
  } else {
    return Status(Code::unsupported, "architecture '" + arch + "' is not supported (only gemma3 and gemma4)");
  }
  LF_RETURN_IF_ERROR(check_layer_shapes(c));
  LF_RETURN_IF_ERROR(read_n_vocab(file, &c));
  c.tied_output = file.tensor("output.weight") == nullptr;
  LF_RETURN_IF_ERROR(check_tensors(file, c));
  *out = std::move(c);
  return Status();
}

Status load_assistant_config(const GgufFile& file, ModelConfig* out, int* n_embd_backbone) {
  std::string arch;
  if (!file.get_string("general.architecture", &arch) || arch != kAssistantArch) {
    return Status(Code::unsupported, "a drafter must have general.architecture '" + std::string(kAssistantArch) + "'" +
                                         (arch.empty() ? "" : ", not '" + arch + "'"));
  }
  ModelConfig c;
  c.arch = Arch::gemma4;
  const KeyReader keys(file, arch);
  LF_RETURN_IF_ERROR(read_gemma4(keys, file, true, &c));
  // The target's width: the drafter's input rows and its next hidden state.
  LF_RETURN_IF_ERROR(keys.get_int("embedding_length_out", n_embd_backbone));
  if (*n_embd_backbone <= 0 || *n_embd_backbone > kMaxWidth || *n_embd_backbone == c.n_embd) {
    return Status(Code::malformed, keys.full("embedding_length_out") + " = " + std::to_string(*n_embd_backbone) +
                                       " must be the target's width, positive, at most " + std::to_string(kMaxWidth) +
                                       " and (as llama.cpp requires) not the drafter's own width " +
                                       std::to_string(c.n_embd));
  }
  // llama.cpp runs nextn_predict_layers of the block_count layers; the converter writes both equal.
  int n_nextn = c.n_layer;
  bool found = false;
  LF_RETURN_IF_ERROR(keys.get_int("nextn_predict_layers", &n_nextn, &found));
  if (n_nextn != c.n_layer) {
    return Status(Code::unsupported, keys.full("nextn_predict_layers") + " = " + std::to_string(n_nextn) +
                                         " differs from block_count = " + std::to_string(c.n_layer) +
                                         ", which is not supported");
  }
  for (LayerConfig& l : c.layers) {
    // Queries only, over the target's cache; which layer of it is known beside the target.
    l.shares_kv = true;
    l.kv_layer = -1;
    if (l.sliding && c.n_swa < 2) {
      return Status(Code::unsupported, keys.full("attention.sliding_window") + " = " + std::to_string(c.n_swa) +
                                           ": a drafter's sliding layers need a window of at least 2");
    }
  }
  LF_RETURN_IF_ERROR(check_layer_shapes(c));
  LF_RETURN_IF_ERROR(read_n_vocab(file, &c));
  c.tied_output = true;
  LF_RETURN_IF_ERROR(check_tensor_specs(file, assistant_tensors(c, *n_embd_backbone), kAssistantArch));
  *out = std::move(c);
  return Status();
}

}  // namespace lf
