// C ABI over what a node of layers needs, answered from a parsed header before any tensor is
// read: the model's configuration as the engine reads it, the node's tensors and its bytes.
#include <string>

#include <nlohmann/json.hpp>

#include "capi/capi_internal.h"
#include "layerfold/capi.h"
#include "model/model_config.h"
#include "model/kv_cache.h"
#include "model/node_needs.h"

namespace {

const char* answer(lf_gguf* gguf, const nlohmann::ordered_json& json) {
  gguf->json = json.dump();
  return gguf->json.c_str();
}

lf::NodeShape node_shape(int layer_begin, int layer_end, int with_embedding, int with_head, int per_layer_rows) {
  lf::NodeShape shape;
  shape.range = {layer_begin, layer_end};
  shape.with_embedding = with_embedding != 0;
  shape.with_head = with_head != 0;
  shape.per_layer_rows = per_layer_rows != 0;
  return shape;
}

}  // namespace

extern "C" {

const char* lf_model_info_json(lf_gguf* gguf) {
  lf::ModelConfig c;
  if (!lf::capi::record(lf::load_model_config(gguf->file, &c))) return nullptr;
  nlohmann::ordered_json out;
  out["arch"] = c.arch == lf::Arch::gemma3 ? "gemma3" : "gemma4";
  out["n_layer"] = c.n_layer;
  out["n_embd"] = c.n_embd;
  out["n_vocab"] = c.n_vocab;
  out["n_ctx_train"] = c.n_ctx_train;
  out["n_swa"] = c.n_swa;
  out["n_embd_per_layer"] = c.n_embd_per_layer;
  out["n_expert"] = c.n_expert;
  out["n_expert_used"] = c.n_expert_used;
  out["n_ff_exp"] = c.n_ff_exp;
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const lf::LayerConfig& l : c.layers) {
    layers.push_back({{"sliding", l.sliding}, {"n_head", l.n_head}, {"n_head_kv", l.n_head_kv},
                      {"head_dim", l.head_dim}, {"n_ff", l.n_ff}, {"kv_layer", l.kv_layer}, {"moe", l.moe}});
  }
  out["layers"] = layers;
  return answer(gguf, out);
}

const char* lf_node_tensors_json(lf_gguf* gguf, int layer_begin, int layer_end, int with_embedding, int with_head,
                                 int per_layer_rows) {
  lf::ModelConfig config;
  if (!lf::capi::record(lf::load_model_config(gguf->file, &config))) return nullptr;
  std::vector<std::string> names;
  const lf::NodeShape shape = node_shape(layer_begin, layer_end, with_embedding, with_head, per_layer_rows);
  if (!lf::capi::record(lf::node_tensors(gguf->file, config, shape, &names))) return nullptr;
  return answer(gguf, names);
}

const char* lf_node_needs_json(lf_gguf* gguf, int layer_begin, int layer_end, int with_embedding, int with_head,
                               int max_ctx, int max_tokens, int per_layer_rows, const char* k_type, const char* v_type,
                               int max_span) {
  lf::NodeShape shape = node_shape(layer_begin, layer_end, with_embedding, with_head, per_layer_rows);
  shape.max_ctx = max_ctx;
  shape.max_tokens = max_tokens;
  shape.max_span = max_span;
  if (!lf::capi::record_kv_types(k_type, v_type, &shape.k_type, &shape.v_type)) return nullptr;
  lf::NodeNeeds needs;
  if (!lf::capi::record(lf::node_needs(gguf->file, shape, &needs))) return nullptr;
  nlohmann::ordered_json out;
  out["tensor_bytes"] = needs.tensor_bytes;
  out["kv_bytes_per_session"] = needs.kv_bytes_per_session;
  out["scratch_bytes"] = needs.scratch_bytes;
  out["scratch_bytes_per_worker"] = needs.scratch_bytes_per_worker;
  out["relayout_bytes"] = needs.relayout_bytes;
  out["per_layer_row_bytes"] = needs.per_layer_row_bytes;
  for (const auto& [key, layers] : {std::pair{"kv_rows_in", &needs.kv_rows_in}, std::pair{"kv_rows_out", &needs.kv_rows_out}}) {
    out[key] = nlohmann::ordered_json::array();
    for (const lf::NodeNeeds::KvLayer& l : *layers) out[key].push_back({{"layer", l.layer}, {"bytes_per_token", l.bytes_per_token}});
  }
  out["tensors"] = needs.tensors;
  return answer(gguf, out);
}

}  // extern "C"
