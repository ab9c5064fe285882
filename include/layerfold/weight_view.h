// A typed, non-owning view of one weight tensor: what ops need to know about a weight, without
// knowing which model it belongs to.
#pragma once

#include <cstdint>

#include "layerfold/ggml_type.h"

namespace lf {

// A GGUF tensor seen as n_out rows of n_in values (ggml ne = [n_in, n_out]). 1-D tensors are
// one row. `data == nullptr` means the tensor is absent (optional tensors only).
struct WeightView {
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0, n_out = 0;
  const uint8_t* data = nullptr;
  uint64_t row_bytes = 0;

  bool present() const { return data != nullptr; }
  const uint8_t* row(int64_t r) const { return data + static_cast<uint64_t>(r) * row_bytes; }
  // F32 vectors only (checked at load: type F32 and 4-byte aligned).
  const float* f32() const { return reinterpret_cast<const float*>(data); }
};

}  // namespace lf
