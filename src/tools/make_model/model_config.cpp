#include "model_config.h"

namespace lf::make_model {

std::string default_swa_pattern(const ModelConfig& cfg) {
  std::string pattern(cfg.n_layer, 'S');
  for (uint32_t il = 0; il < cfg.n_layer; ++il) {
    if (il % cfg.swa_period >= cfg.swa_period - 1) pattern[il] = 'G';
  }
  if (cfg.arch == Arch::gemma4 && !pattern.empty()) pattern.back() = 'G';
  return pattern;
}

uint32_t gemma3_swa_period(const std::string& pattern) {
  const size_t first_global = pattern.find('G');
  uint32_t period;
  if (first_global != std::string::npos) {
    period = static_cast<uint32_t>(first_global) + 1;
  } else {
    // All sliding: llama.cpp's default period 6 already says so for up to 5 layers.
    period = pattern.size() < 6 ? 6 : static_cast<uint32_t>(pattern.size()) + 1;
  }
  for (uint32_t il = 0; il < pattern.size(); ++il) {
    const bool swa = il % period < period - 1;
    if (swa != (pattern[il] == 'S')) return 0;
  }
  return period;
}

}  // namespace lf::make_model
