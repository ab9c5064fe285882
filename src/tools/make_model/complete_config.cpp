#include "complete_config.h"

#include <string>

namespace lf::make_model {
namespace {

Status bad(const std::string& message) { return Status(Code::invalid_argument, message); }

Status check_layer_kinds(const ModelConfig& m, const LayerKinds& k) {
  if (k.swa_pattern.size() != static_cast<size_t>(m.n_layer)) {
    return bad("--swa-pattern has " + std::to_string(k.swa_pattern.size()) + " letters but the model has " +
               std::to_string(m.n_layer) + " layers");
  }
  for (int kv : {k.n_head_kv_swa, k.n_head_kv_global}) {
    if (kv == 0 || k.n_head % kv != 0) {
      return bad("--n-head (" + std::to_string(k.n_head) + ") must be a multiple of every KV head count, got " +
                 std::to_string(kv));
    }
  }
  for (int d : {k.head_dim_swa, k.head_dim_global}) {
    if (d == 0 || d % 2 != 0) return bad("head dims must be even and positive (RoPE rotates pairs), got " + std::to_string(d));
  }
  if (!k.n_ff_layers.empty() && k.n_ff_layers.size() != static_cast<size_t>(m.n_layer)) {
    return bad("--n-ff-layers has " + std::to_string(k.n_ff_layers.size()) + " widths but the model has " +
               std::to_string(m.n_layer) + " layers");
  }
  return Status();
}

Status check_gemma3(const LayerKinds& k) {
  if (k.head_dim_swa != k.head_dim_global) {
    return bad("gemma3 has a single head dim: use --head-dim (got " + std::to_string(k.head_dim_swa) + " sliding, " +
               std::to_string(k.head_dim_global) + " global)");
  }
  if (k.n_head_kv_swa != k.n_head_kv_global) return bad("gemma3 has a single KV head count: use --n-head-kv");
  if (gemma3_swa_period(k.swa_pattern) == 0) {
    return bad("gemma3 can only express periodic patterns (P-1 sliding layers, then one global), got --swa-pattern " +
               k.swa_pattern);
  }
  return Status();
}

// Per-layer embeddings and shared-KV layers (docs/gemma-architecture.md, "E2B and E4B").
Status check_e_model_features(const ModelConfig& m, const LayerKinds& k) {
  if (m.arch == Arch::gemma3 && (m.n_embd_per_layer > 0 || m.n_shared_kv > 0)) {
    return bad("--n-embd-per-layer and --shared-kv-layers are gemma4 features");
  }
  if (m.n_shared_kv == 0) return Status();
  // llama.cpp needs two layers with their own cache and maps a shared sliding layer to the last
  // cached layer but one, a shared global layer to the last: those two must be S then G.
  if (m.n_shared_kv + 2 > m.n_layer) {
    return bad("--shared-kv-layers " + std::to_string(m.n_shared_kv) + " leaves fewer than 2 of the " +
               std::to_string(m.n_layer) + " layers with a KV cache of their own");
  }
  const size_t n_kv = static_cast<size_t>(m.n_layer - m.n_shared_kv);
  if (k.swa_pattern[n_kv - 2] != 'S' || k.swa_pattern[n_kv - 1] != 'G') {
    return bad("with --shared-kv-layers " + std::to_string(m.n_shared_kv) + ", layer " + std::to_string(n_kv - 2) +
               " must be sliding and layer " + std::to_string(n_kv - 1) +
               " global (the layers shared-KV layers read), got --swa-pattern " + k.swa_pattern);
  }
  return Status();
}

Status check_experts(const ModelConfig& m) {
  if (m.n_expert == 0) return Status();
  if (m.arch != Arch::gemma4) return bad("--n-expert needs --arch gemma4 (gemma3 has no mixture of experts)");
  // llama.cpp's limit (LLAMA_MAX_EXPERTS).
  if (m.n_expert > 512) return bad("--n-expert must be at most 512");
  if (m.n_expert_used == 0 || m.n_expert_used > m.n_expert) {
    return bad("--n-expert-used must be in 1..--n-expert (" + std::to_string(m.n_expert) + "), got " +
               std::to_string(m.n_expert_used));
  }
  if (m.n_ff_exp == 0) return bad("--n-ff-exp must be positive with --n-expert");
  return Status();
}

}  // namespace

Status complete_config(ModelConfig* model, MakeSettings* settings) {
  ModelConfig& m = *model;
  LayerKinds& k = settings->layers;
  if (m.n_layer == 0 || m.n_layer > 512) return bad("--n-layer must be in 1..512");
  if (m.n_embd == 0 || k.n_ff == 0 || k.n_head == 0) return bad("--n-embd, --n-ff and --n-head must be positive");
  if (m.n_swa == 0) return bad("--sliding-window must be positive");
  if (k.swa_period == 0) return bad("--swa-period must be positive");
  if (m.n_ctx_train == 0) return bad("--ctx must be positive");
  if (!(m.norm_eps > 0)) return bad("--eps must be positive");
  if (k.swa_pattern.empty()) k.swa_pattern = default_swa_pattern(m.arch, m.n_layer, k.swa_period);
  LF_RETURN_IF_ERROR(check_layer_kinds(m, k));
  if (m.arch == Arch::gemma3) {
    LF_RETURN_IF_ERROR(check_gemma3(k));
    k.swa_period = gemma3_swa_period(k.swa_pattern);
  } else if (!(settings->partial_rotary > 0 && settings->partial_rotary <= 1)) {
    return bad("--partial-rotary must be in (0, 1]");
  }
  LF_RETURN_IF_ERROR(check_e_model_features(m, k));
  LF_RETURN_IF_ERROR(check_experts(m));
  m.final_softcap = settings->softcap >= 0 ? settings->softcap : m.arch == Arch::gemma4 ? 30.0f : 0.0f;
  build_layers(k, &m);
  for (int il = 0; il < m.n_layer; ++il) {
    if (m.layers[static_cast<size_t>(il)].n_ff == 0) return bad("--n-ff-layers: layer " + std::to_string(il) + " has width 0");
  }
  return Status();
}

}  // namespace lf::make_model
