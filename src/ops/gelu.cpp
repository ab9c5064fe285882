#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {
namespace {

constexpr float kGeluCoefA = 0.044715f;
constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;

// ggml's table: gelu of every f16 value, itself rounded to f16 (65536 entries), held here as
// the f32 of each entry so that a lookup converts only its argument.
const std::vector<float>& gelu_f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp16_to_fp32(fp32_to_fp16(gelu_exact(fp16_to_fp32(static_cast<uint16_t>(i)))));
    return t;
  }();
  return table;
}

// ggml's quick-GELU table, built as the GELU one.
const std::vector<float>& gelu_quick_f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp16_to_fp32(fp32_to_fp16(gelu_quick_exact(fp16_to_fp32(static_cast<uint16_t>(i)))));
    return t;
  }();
  return table;
}

// x in [-10, 10] (or any x for the quick table) -> its entry
inline float gelu_lookup(const std::vector<float>& table, float x) { return table[fp32_to_fp16(x)]; }

}  // namespace

float gelu_exact(float x) { return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x))); }

float gelu_table(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return gelu_lookup(gelu_f16_table(), x);
}

// gate [n], up [n] -> out [n]
void geglu(const float* gate, const float* up, int n, float* out) {
  const std::vector<float>& table = gelu_f16_table();
  for (int i = 0; i < n; ++i) {
    // ggml multiplies the untouched gate (not gelu(gate)) when gate >= 10.
    const float x = gate[i];
    out[i] = (x <= -10.0f ? 0.0f : x >= 10.0f ? x : gelu_lookup(table, x)) * up[i];
  }
}

float gelu_quick_exact(float x) { return x * (1.0f / (1.0f + expf(-1.702f * x))); }

float gelu_quick_table(float x) { return gelu_lookup(gelu_quick_f16_table(), x); }

void geglu_quick(const float* gate, const float* up, int n, float* out) {
  const std::vector<float>& table = gelu_quick_f16_table();
  for (int i = 0; i < n; ++i) out[i] = gelu_lookup(table, gate[i]) * up[i];
}

}  // namespace lf
