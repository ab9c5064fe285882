#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {
namespace {

constexpr float kGeluCoefA = 0.044715f;
constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;

// ggml's table: gelu of every f16 value, itself rounded to f16 (65536 entries, 128 KiB).
const std::vector<uint16_t>& gelu_f16_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp32_to_fp16(gelu_exact(fp16_to_fp32(static_cast<uint16_t>(i))));
    return t;
  }();
  return table;
}

// ggml's quick-GELU table, built as the GELU one.
const std::vector<uint16_t>& gelu_quick_f16_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = fp32_to_fp16(gelu_quick_exact(fp16_to_fp32(static_cast<uint16_t>(i))));
    return t;
  }();
  return table;
}

}  // namespace

float gelu_exact(float x) { return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x))); }

float gelu_table(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return fp16_to_fp32(gelu_f16_table()[fp32_to_fp16(x)]);
}

// gate [n], up [n] -> out [n]
void geglu(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) {
    // ggml multiplies the untouched gate (not gelu(gate)) when gate >= 10.
    out[i] = gelu_table(gate[i]) * up[i];
  }
}

float gelu_quick_exact(float x) { return x * (1.0f / (1.0f + expf(-1.702f * x))); }

float gelu_quick_table(float x) { return fp16_to_fp32(gelu_quick_f16_table()[fp32_to_fp16(x)]); }

void geglu_quick(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = gelu_quick_table(gate[i]) * up[i];
}

}  // namespace lf
