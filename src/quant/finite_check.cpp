#include "quant/finite_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstddef>
#include <cstring>

#include "quant/quant.h"
#include "quant/row_check.h"

namespace lf {
namespace {

bool half_finite(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return (h & 0x7C00) != 0x7C00;
}

bool bf16_finite(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return (h & 0x7F80) != 0x7F80;
}

bool f32_finite(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return std::isfinite(f);
}

// Byte offsets of a block's scales, and how to read them: -1 ends the list.
struct Scales {
  int offsets[2] = {-1, -1};
  bool (*finite)(const uint8_t*) = half_finite;
};

bool scales_of(GgmlType type, Scales* s) {
  switch (type) {
    case GgmlType::F32: *s = {{0, -1}, f32_finite}; return true;
    case GgmlType::F16: *s = {{0, -1}, half_finite}; return true;
    case GgmlType::BF16: *s = {{0, -1}, bf16_finite}; return true;
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: *s = {{0, -1}, half_finite}; return true;
    case GgmlType::Q4_1: case GgmlType::Q5_1: *s = {{0, 2}, half_finite}; return true;
    case GgmlType::Q4_K: case GgmlType::Q5_K: *s = {{0, 2}, half_finite}; return true;
    case GgmlType::Q6_K: *s = {{static_cast<int>(offsetof(block_q6_K, d)), -1}, half_finite}; return true;
    case GgmlType::Q8_K: *s = {{0, -1}, f32_finite}; return true;
    default: return false;
  }
}

}  // namespace

Status check_finite_tensor(const std::string& name, GgmlType type, const uint8_t* data, int64_t n_in, int64_t n_out) {
  TypeTraits traits{};
  LF_RETURN_IF_ERROR(check_row("check_finite_tensor", type, n_in, &traits));
  Scales scales;
  if (!scales_of(type, &scales)) {
    return Status(Code::unsupported, "tensor '" + name + "' has type " + type_label(type) + ", whose scales are not checked");
  }
  const int64_t blocks_per_row = n_in / traits.block_elems;
  const bool floats = traits.block_elems == 1;
  for (int64_t r = 0; r < n_out; ++r) {
    const uint8_t* row = data + static_cast<uint64_t>(r) * static_cast<uint64_t>(blocks_per_row) * traits.block_bytes;
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      const uint8_t* block = row + static_cast<uint64_t>(b) * traits.block_bytes;
      for (int offset : scales.offsets) {
        if (offset < 0 || scales.finite(block + offset)) continue;
        return Status(Code::invalid_argument, "tensor '" + name + "' has a non-finite " +
                                                  (floats ? "value at element " : "scale in block ") +
                                                  std::to_string(b) + " of row " + std::to_string(r));
      }
    }
  }
  return Status();
}

Status check_finite_rows(std::span<const float> x, int width, const std::string& what) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      return Status(Code::invalid_argument, what + " is not finite at row " + std::to_string(i / width) +
                                                ", element " + std::to_string(i % width));
    }
  }
  return Status();
}

Status check_norm_input_rows(std::span<const float> x, int width, const std::string& what) {
  LF_RETURN_IF_ERROR(check_finite_rows(x, width, what));
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i] * x[i])) {
      char value[32];
      std::snprintf(value, sizeof value, "%.3g", static_cast<double>(x[i]));
      return Status(Code::invalid_argument, what + " is too large at row " + std::to_string(i / width) + ", element " +
                                                std::to_string(i % width) + " (" + value +
                                                "): its square overflows float32, which RMSNorm sums; |x| must be "
                                                "below 1.8e19");
    }
  }
  return Status();
}

Status check_logit_rows(std::span<const float> logits, int n_vocab) {
  LF_RETURN_IF_ERROR(check_finite_rows(logits, n_vocab, "logits"));
  for (size_t row = 0; row < logits.size() / n_vocab; ++row) {
    const std::span<const float> r = logits.subspan(row * n_vocab, n_vocab);
    if (std::all_of(r.begin(), r.end(), [](float v) { return v == 0.0f; })) {
      return Status(Code::invalid_argument, "logits are all zero at row " + std::to_string(row) +
                                                ": the hidden state carries nothing to sample from");
    }
  }
  return Status();
}

}  // namespace lf
