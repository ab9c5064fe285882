#include "model/node_needs.h"

#include <algorithm>
#include <cstdlib>

#include "model/kv_cache.h"
#include "model/kv_shipping.h"
#include "model/per_layer_embd.h"
#include "model/shard_plan.h"
#include "model/tensor_table.h"

namespace lf {
namespace {

// Layer index of "blk.N.xxx", or -1 for a model-level tensor.
int tensor_layer(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  return std::atoi(name.c_str() + 4);
}

constexpr const char* kMatmuls[7] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

// K/V weights a shared-KV layer's file may carry but load_model never binds.
bool unread_kv_tensor(const LayerConfig& l, const std::string& name) {
  if (!l.shares_kv) return false;
  for (const char* kv : {".attn_k.weight", ".attn_v.weight", ".attn_k_norm.weight"}) {
    const std::string suffix(kv);
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
  }
  return false;
}

}  // namespace

Status layer_scratch_shape(const GgufFile& file, const ModelConfig& c, int il, LayerScratchShape* out) {
  for (size_t i = 0; i < 7; ++i) {
    const GgufTensorInfo* t = file.tensor(layer_tensor_name(il, kMatmuls[i]));
    out->matmul_type[i] = t != nullptr ? t->type : GgmlType::F32;
    out->matmul_n_in[i] = t != nullptr ? t->ne[0] : 0;
  }
  auto type_of = [&](const char* name) {
    const GgufTensorInfo* t = file.tensor(layer_tensor_name(il, name));
    return t != nullptr ? t->type : GgmlType::F32;
  };
  const char* gate = c.fused_gate_up ? "ffn_gate_up_exps" : "ffn_gate_exps";
  const char* up = c.fused_gate_up ? "ffn_gate_up_exps" : "ffn_up_exps";
  out->moe = moe_layer_shape(c, il, type_of("ffn_gate_inp"), type_of(gate), type_of(up), type_of("ffn_down_exps"));
  LayerShards shards;  // refuses what load_model's plan refuses
  return plan_layer_shards(c.layers[il], out->matmul_type[3], out->matmul_type[6], &shards);
}

Status node_tensors(const GgufFile& file, const ModelConfig& config, const NodeShape& shape, std::vector<std::string>* out) {
  const LayerRange r = shape.range;
  if (r.begin < 0 || r.end > config.n_layer || r.begin >= r.end) {
    return Status(Code::invalid_argument, "layer range [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                                              ") is not inside the model's " + std::to_string(config.n_layer) + " layers");
  }
  bool needs_rope_freqs = false;
  for (int il = r.begin; il < r.end; ++il) needs_rope_freqs |= config.layers[il].use_freq_factors;
  out->clear();
  for (const TensorSpec& spec : expected_tensors(config)) {
    if (file.tensor(spec.name) == nullptr) continue;
    const int il = tensor_layer(spec.name);
    if (il >= 0 && il < config.n_layer && unread_kv_tensor(config.layers[il], spec.name)) continue;
    const bool needed = il >= 0 ? (il >= r.begin && il < r.end)
                        : spec.name == "per_layer_token_embd.weight" ? shape.with_embedding && !shape.per_layer_rows
                        : spec.name.rfind("per_layer_", 0) == 0 ? shape.with_embedding
                        : spec.name == "token_embd.weight" ? (shape.with_embedding || (shape.with_head && config.tied_output))
                        : spec.name == "rope_freqs.weight" ? needs_rope_freqs
                        : shape.with_head;  // output_norm, output
    if (needed) out->push_back(spec.name);
  }
  return Status();
}

Status node_needs(const GgufFile& file, const NodeShape& shape, NodeNeeds* out) {
  ModelConfig c;
  LF_RETURN_IF_ERROR(load_model_config(file, &c));
  NodeNeeds needs;
  LF_RETURN_IF_ERROR(node_tensors(file, c, shape, &needs.tensors));
  if (shape.max_tokens < 1) {
    return Status(Code::invalid_argument, "max_tokens must be positive, got " + std::to_string(shape.max_tokens));
  }
  for (const std::string& name : needs.tensors) {
    const GgufTensorInfo* t = file.tensor(name);
    needs.tensor_bytes += t->n_bytes;
    // An expert tensor (3-D) is relaid one expert's matrix at a time.
    const uint64_t relaid = t->n_dims == 3 ? t->n_bytes / static_cast<uint64_t>(t->ne[2]) : t->n_bytes;
    if (tensor_layer(name) >= 0 && t->n_dims >= 2) needs.relayout_bytes = std::max(needs.relayout_bytes, relaid);
  }
  KvCacheOptions kv;
  kv.max_ctx = shape.max_ctx;
  kv.k_type = shape.k_type;
  kv.v_type = shape.v_type;
  LF_RETURN_IF_ERROR(attn_chunk_for(shape.max_span, &kv.attn_chunk));
  LF_RETURN_IF_ERROR(KvCache::bytes_for(c, shape.range, kv, &needs.kv_bytes_per_session));
  std::vector<LayerScratchShape> layers(static_cast<size_t>(shape.range.end - shape.range.begin));
  for (int il = shape.range.begin; il < shape.range.end; ++il) {
    LF_RETURN_IF_ERROR(layer_scratch_shape(file, c, il, &layers[il - shape.range.begin]));
  }
  // The top-K FFN's keep mask is the largest mode-dependent buffer: counted, as a node may be asked for it.
  const ScratchShape scratch = scratch_shape(c, shape.range, layers, shape.max_tokens, true);
  needs.scratch_bytes = scratch.bytes(0);
  // Per-layer inputs (per_layer_embd.h): a session's copy of the node's layers', and on the first
  // node every layer's, twice (the projection, then the inputs).
  needs.scratch_bytes += sizeof(float) * per_layer_input_floats(c, shape.range.begin, shape.range.end, shape.max_tokens);
  if (shape.with_embedding) needs.scratch_bytes += 2 * sizeof(float) * per_layer_input_floats(c, 0, c.n_layer, shape.max_tokens);
  if (shape.with_embedding && c.n_embd_per_layer > 0) {
    const GgufTensorInfo* table = file.tensor("per_layer_token_embd.weight");
    TypeTraits traits{};
    if (!type_traits(static_cast<uint32_t>(table->type), &traits)) {
      return Status(Code::unsupported, "tensor 'per_layer_token_embd.weight' has an unknown type");
    }
    needs.per_layer_row_bytes = row_bytes(traits, static_cast<uint64_t>(table->ne[0]));
    if (shape.per_layer_rows) needs.scratch_bytes += per_layer_rows_lookup_bytes(shape.max_tokens);
  }
  needs.scratch_bytes_per_worker = scratch.bytes(1) - scratch.bytes(0);
  auto kv_layers = [&](const std::vector<int>& layers) {
    std::vector<NodeNeeds::KvLayer> out;
    for (int il : layers) {
      const int D = c.layers[il].head_dim;
      out.push_back({il, static_cast<uint64_t>(c.layers[il].n_head_kv) *
                             (kv_row_bytes(shape.k_type, D) + kv_row_bytes(shape.v_type, D))});
    }
    return out;
  };
  needs.kv_rows_in = kv_layers(kv_layers_mirrored(c, shape.range.begin, shape.range.end));
  needs.kv_rows_out = kv_layers(kv_layers_shipped(c, shape.range.begin, shape.range.end));
  // A session's copies of one call's rows: those it is given (Session::kv_rows_in) and those it
  // hands out (ForwardReport::kv_rows_out).
  for (const auto* layers : {&needs.kv_rows_in, &needs.kv_rows_out}) {
    for (const NodeNeeds::KvLayer& l : *layers) needs.scratch_bytes += static_cast<uint64_t>(shape.max_tokens) * l.bytes_per_token;
  }
  *out = std::move(needs);
  return Status();
}

}  // namespace lf
