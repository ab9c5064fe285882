#include "model/tensor_table.h"

#include <string>

namespace lf {
namespace {

std::string shape_string(int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  return "[" + std::to_string(ne0) + ", " + std::to_string(ne1) + (ne2 != 1 || ne3 != 1 ? ", " + std::to_string(ne2) : "") +
         (ne3 != 1 ? ", " + std::to_string(ne3) : "") + "]";
}

bool matmul_type_supported(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

const char* type_name(GgmlType t) {
  TypeTraits tt;
  return type_traits(static_cast<uint32_t>(t), &tt) ? tt.name : "unknown";
}

// A MoE layer's router, experts and the norms of its two branches (docs/gguf.md, "MoE tensors
// and keys"). The router stays F32 or F16 in llama-quantize's files; any matmul type is read.
void add_moe_specs(const ModelConfig& c, int il, std::vector<TensorSpec>* specs) {
  using R = TensorRole;
  const int64_t n_embd = c.n_embd, F = c.n_ff_exp, E = c.n_expert;
  auto add = [&](const char* name, const char* suffix, int64_t ne0, int64_t ne1, int64_t ne2, R role, bool required) {
    specs->push_back({layer_tensor_name(il, name, suffix), ne0, ne1, role, required, ne2});
  };
  add("ffn_gate_inp", "weight", n_embd, E, 1, R::matmul, true);
  add("ffn_gate_inp", "scale", n_embd, 1, 1, R::f32_vector, true);
  add("pre_ffw_norm_2", "weight", n_embd, 1, 1, R::f32_vector, true);
  add("post_ffw_norm_1", "weight", n_embd, 1, 1, R::f32_vector, true);
  add("post_ffw_norm_2", "weight", n_embd, 1, 1, R::f32_vector, true);
  if (c.fused_gate_up) {
    add("ffn_gate_up_exps", "weight", n_embd, 2 * F, E, R::matmul, true);
  } else {
    add("ffn_gate_exps", "weight", n_embd, F, E, R::matmul, true);
    add("ffn_up_exps", "weight", n_embd, F, E, R::matmul, true);
  }
  add("ffn_down_exps", "weight", F, n_embd, E, R::matmul, true);
  add("ffn_down_exps", "scale", E, 1, 1, R::f32_vector, false);
}

}  // namespace

std::string layer_tensor_name(int il, const char* short_name, const char* suffix) {
  return "blk." + std::to_string(il) + "." + short_name + "." + suffix;
}

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  using R = TensorRole;
  std::vector<TensorSpec> specs;
  const int64_t n_embd = c.n_embd;
  specs.push_back({"token_embd.weight", n_embd, c.n_vocab, R::matmul, true});
  specs.push_back({"output.weight", n_embd, c.n_vocab, R::matmul, false});
  specs.push_back({"output_norm.weight", n_embd, 1, R::f32_vector, true});
  if (c.n_embd_per_layer > 0) {
    const int64_t n_pl_all = static_cast<int64_t>(c.n_embd_per_layer) * c.n_layer;
    specs.push_back({"per_layer_token_embd.weight", n_pl_all, c.n_vocab, R::matmul, true});
    specs.push_back({"per_layer_model_proj.weight", n_embd, n_pl_all, R::matmul, true});
    specs.push_back({"per_layer_proj_norm.weight", c.n_embd_per_layer, 1, R::f32_vector, true});
  }
  bool any_freq_factors = false;
  for (const LayerConfig& l : c.layers) any_freq_factors = any_freq_factors || l.use_freq_factors;
  if (any_freq_factors) {
    // One tensor for all global layers, one factor per rotated pair.
    int global_head_dim = 0;
    for (const LayerConfig& l : c.layers) {
      if (l.use_freq_factors) global_head_dim = l.head_dim;
    }
    specs.push_back({"rope_freqs.weight", global_head_dim / 2, 1, R::f32_vector, true});
  }
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerConfig& l = c.layers[il];
    auto add = [&](const char* name, int64_t ne0, int64_t ne1, R role, bool required) {
      specs.push_back({layer_tensor_name(il, name), ne0, ne1, role, required});
    };
    add("attn_norm", n_embd, 1, R::f32_vector, true);
    add("attn_q", n_embd, l.q_dim(), R::matmul, true);
    // A shared-KV layer may carry K/V weights (llama.cpp does not require or read them).
    add("attn_k", n_embd, l.kv_dim(), R::matmul, !l.shares_kv);
    add("attn_v", n_embd, l.kv_dim(), R::matmul, c.arch == Arch::gemma3);
    add("attn_output", l.q_dim(), n_embd, R::matmul, true);
    add("attn_q_norm", l.head_dim, 1, R::f32_vector, true);
    add("attn_k_norm", l.head_dim, 1, R::f32_vector, !l.shares_kv);
    add("post_attention_norm", n_embd, 1, R::f32_vector, true);
    add("ffn_norm", n_embd, 1, R::f32_vector, true);
    add("ffn_gate", n_embd, l.n_ff, R::matmul, true);
    add("ffn_up", n_embd, l.n_ff, R::matmul, true);
    add("ffn_down", l.n_ff, n_embd, R::matmul, true);
    add("post_ffw_norm", n_embd, 1, R::f32_vector, true);
    if (c.arch == Arch::gemma4) add("layer_output_scale", 1, 1, R::f32_vector, false);
    if (c.n_embd_per_layer > 0) {
      add("inp_gate", n_embd, c.n_embd_per_layer, R::matmul, true);
      add("proj", c.n_embd_per_layer, n_embd, R::matmul, true);
      add("post_norm", n_embd, 1, R::f32_vector, true);
    }
    if (l.moe) add_moe_specs(c, il, &specs);
  }
  return specs;
}

Status check_tensors(const GgufFile& file, const ModelConfig& c) {
  return check_tensor_specs(file, expected_tensors(c), c.arch == Arch::gemma4 ? "gemma4" : "gemma3");
}

std::vector<TensorSpec> assistant_tensors(const ModelConfig& c, int n_embd_backbone) {
  using R = TensorRole;
  std::vector<TensorSpec> specs;
  const int64_t n_embd = c.n_embd, n_b = n_embd_backbone;
  specs.push_back({"token_embd.weight", n_embd, c.n_vocab, R::matmul, true});
  specs.push_back({"output_norm.weight", n_embd, 1, R::f32_vector, true});
  // [target token embedding; target hidden state] -> the drafter's width, and back.
  specs.push_back({"nextn.pre_projection.weight", 2 * n_b, n_embd, R::matmul, true});
  specs.push_back({"nextn.post_projection.weight", n_embd, n_b, R::matmul, true});
  for (const LayerConfig& l : c.layers) {
    if (l.use_freq_factors) {
      specs.push_back({"rope_freqs.weight", l.head_dim / 2, 1, R::f32_vector, true});
      break;
    }
  }
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerConfig& l = c.layers[il];
    auto add = [&](const char* name, int64_t ne0, int64_t ne1, R role) {
      specs.push_back({layer_tensor_name(il, name), ne0, ne1, role, true});
    };
    add("attn_norm", n_embd, 1, R::f32_vector);
    add("attn_q", n_embd, l.q_dim(), R::matmul);
    add("attn_output", l.q_dim(), n_embd, R::matmul);
    add("attn_q_norm", l.head_dim, 1, R::f32_vector);
    add("post_attention_norm", n_embd, 1, R::f32_vector);
    add("layer_output_scale", 1, 1, R::f32_vector);
    add("ffn_norm", n_embd, 1, R::f32_vector);
    add("ffn_gate", n_embd, l.n_ff, R::matmul);
    add("ffn_up", n_embd, l.n_ff, R::matmul);
    add("ffn_down", l.n_ff, n_embd, R::matmul);
    add("post_ffw_norm", n_embd, 1, R::f32_vector);
  }
  return specs;
}

Status check_tensor_specs(const GgufFile& file, const std::vector<TensorSpec>& specs, const std::string& arch) {
  for (const GgufTensorInfo& t : file.tensors) {
    bool known = false;
    for (const TensorSpec& s : specs) known = known || s.name == t.name;
    if (known) continue;
    if (t.name.find("_exps") != std::string::npos || t.name.find("ffn_gate_inp") != std::string::npos) {
      return Status(Code::unsupported, "mixture-of-experts tensor '" + t.name + "' is not supported");
    }
    // An E-model drafter's masked-embedding head, which llama.cpp loads but never computes with.
    if (arch == kAssistantArch && (t.name == "masked_embd_centroids.weight" || t.name == "masked_embd_ordering")) continue;
    // A projector's audio encoder, beside the vision tower in one file, is not the tower's ...
    const bool audio_tensor = t.name.rfind("a.", 0) == 0 || t.name.rfind("mm.a.", 0) == 0;
    if (arch == kVisionArch && audio_tensor) continue;
    // ... nor is the tower beside the audio encoder the encoder's.
    if (arch == kAudioArch && !audio_tensor) continue;
    return Status(Code::unsupported, "unexpected tensor '" + t.name + "' (not part of a " + arch + " model)");
  }
  for (const TensorSpec& s : specs) {
    const GgufTensorInfo* t = file.tensor(s.name);
    if (!t) {
      if (s.required) return Status(Code::unsupported, "missing required tensor '" + s.name + "'");
      continue;
    }
    if (t->ne[0] != s.ne0 || t->ne[1] != s.ne1 || t->ne[2] != s.ne2 || t->ne[3] != s.ne3) {
      return Status(Code::malformed, "tensor '" + s.name + "' has ne " + shape_string(t->ne[0], t->ne[1], t->ne[2], t->ne[3]) +
                                         ", expected " + shape_string(s.ne0, s.ne1, s.ne2, s.ne3));
    }
    if (s.role == TensorRole::f32_vector && t->type != GgmlType::F32) {
      return Status(Code::unsupported, "tensor '" + s.name + "' has type " + type_name(t->type) + ", expected F32");
    }
    if (s.role == TensorRole::matmul && !matmul_type_supported(t->type)) {
      return Status(Code::unsupported, "tensor '" + s.name + "' has type " + type_name(t->type) +
                                           ", which is not supported for matrix multiplication");
    }
  }
  return Status();
}

}  // namespace lf
