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

// x -> its entry (the table's reference hoisted out of the callers' loops)
inline float gelu_lookup(const std::vector<uint16_t>& table, float x) { return fp16_to_fp32(table[fp32_to_fp16(x)]); }

// ggml's GELU of x: 0 for x <= -10, x itself for x >= 10, else the table's entry
inline float gelu_clamped(const std::vector<uint16_t>& table, float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return gelu_lookup(table, x);
}

}  // namespace

float gelu_exact(float x) { return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kGeluCoefA * x * x))); }

float gelu_table(float x) { return gelu_clamped(gelu_f16_table(), x); }

// gate [n], up [n] -> out [n]
void geglu(const float* gate, const float* up, int n, float* out) {
  const std::vector<uint16_t>& table = gelu_f16_table();
  // ggml multiplies the untouched gate (not gelu(gate)) when gate >= 10.
  for (int i = 0; i < n; ++i) out[i] = gelu_clamped(table, gate[i]) * up[i];
}

float gelu_quick_exact(float x) { return x * (1.0f / (1.0f + expf(-1.702f * x))); }

float gelu_quick_table(float x) { return gelu_lookup(gelu_quick_f16_table(), x); }

void geglu_quick(const float* gate, const float* up, int n, float* out) {
  const std::vector<uint16_t>& table = gelu_quick_f16_table();
  for (int i = 0; i < n; ++i) out[i] = gelu_lookup(table, gate[i]) * up[i];
}

}  // namespace lf
