#include "settings.h"

namespace lf::make_model {

ModelConfig default_model() {
  ModelConfig m;
  m.arch = Arch::gemma4;
  m.n_layer = 2;
  m.n_embd = 64;
  m.n_vocab = 1024;
  m.n_ctx_train = 4096;
  m.n_swa = 4;
  m.norm_eps = 1e-6f;
  m.tied_output = true;
  m.fused_gate_up = true;  // as the converter writes
  return m;
}

std::string default_swa_pattern(Arch arch, int n_layer, int swa_period) {
  std::string pattern(static_cast<size_t>(n_layer), 'S');
  for (int il = 0; il < n_layer; ++il) {
    if (il % swa_period >= swa_period - 1) pattern[static_cast<size_t>(il)] = 'G';
  }
  if (arch == Arch::gemma4 && !pattern.empty()) pattern.back() = 'G';
  return pattern;
}

int gemma3_swa_period(const std::string& pattern) {
  const size_t first_global = pattern.find('G');
  int period;
  if (first_global != std::string::npos) {
    period = static_cast<int>(first_global) + 1;
  } else {
    // All sliding: llama.cpp's default period 6 already says so for up to 5 layers.
    period = pattern.size() < 6 ? 6 : static_cast<int>(pattern.size()) + 1;
  }
  for (size_t il = 0; il < pattern.size(); ++il) {
    const bool swa = static_cast<int>(il) % period < period - 1;
    if (swa != (pattern[il] == 'S')) return 0;
  }
  return period;
}

void build_layers(const LayerKinds& k, ModelConfig* m) {
  const bool g4 = m->arch == Arch::gemma4;
  // Layers [0, n_kv) compute K and V; a shared one reads layer n_kv - 2 when sliding, n_kv - 1
  // when global (llama.cpp's rule).
  const int n_kv = m->n_layer - m->n_shared_kv;
  m->layers.assign(static_cast<size_t>(m->n_layer), LayerConfig());
  for (int il = 0; il < m->n_layer; ++il) {
    LayerConfig& l = m->layers[static_cast<size_t>(il)];
    l.sliding = k.swa_pattern[static_cast<size_t>(il)] == 'S';
    l.head_dim = l.sliding ? k.head_dim_swa : k.head_dim_global;
    l.n_head = k.n_head;
    l.n_head_kv = l.sliding ? k.n_head_kv_swa : k.n_head_kv_global;
    // Global layers rotate the full head dim and let rope_freqs switch pairs off
    // (docs/gemma-architecture.md, "Proportional RoPE").
    l.n_rot = l.head_dim;
    l.rope_base = l.sliding ? k.rope_base_swa : k.rope_base;
    l.use_freq_factors = g4 && !l.sliding;
    l.shares_kv = il >= n_kv;
    l.kv_layer = l.shares_kv ? n_kv - (l.sliding ? 2 : 1) : il;
    l.has_v = !l.shares_kv && (!g4 || l.sliding || k.global_v);
    l.has_output_scale = g4 && k.layer_output_scale;
    l.n_ff = !k.n_ff_layers.empty() ? k.n_ff_layers[static_cast<size_t>(il)]
             : k.double_wide_shared && l.shares_kv ? 2 * k.n_ff
                                                    : k.n_ff;
    l.moe = m->n_expert > 0;
  }
}

}  // namespace lf::make_model
