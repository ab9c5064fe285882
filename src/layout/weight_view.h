// A typed, non-owning view of one weight tensor: what ops need to know about a weight, without
// knowing which model it belongs to.
#pragma once

#include <cassert>
#include <cstdint>

#include "gguf/ggml_type.h"

namespace lf {

// How a weight's bytes lie in memory. The loader may rewrite a tensor from the file's layout into
// another in place (ModelLoadOptions::relayout_in_place); the bytes a product gives do not change.
enum class WeightLayout : uint8_t {
  rows,           // as in the file: n_out rows, row_bytes apart
  // Q4_0 / Q8_0: one stripe per 32-column block, in which each input column is one contiguous run
  // over the rows, so a product with mostly-zero activations reads only the columns it needs
  // (layout/feature_major.h).
  feature_major,
  // Q4_0: rows interleaved 4 by 4 (layout/row_strips.h), otherwise as in the file.
  row_strips,
};

// A GGUF tensor seen as n_out rows of n_in values (ggml ne = [n_in, n_out]). 1-D tensors are
// one row. `data == nullptr` means the tensor is absent (optional tensors only).
struct WeightView {
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0, n_out = 0;
  const uint8_t* data = nullptr;
  uint64_t row_bytes = 0;  // bytes from one row to the next (a whole row's bytes, or more in a column slice)
  WeightLayout layout = WeightLayout::rows;

  bool in_row_strips() const { return layout == WeightLayout::row_strips; }

  bool present() const { return data != nullptr; }
  // Row r, in the file's layout only.
  const uint8_t* row(int64_t r) const {
    assert(layout == WeightLayout::rows);
    return data + static_cast<uint64_t>(r) * row_bytes;
  }
  // Row strip s (rows 4s..4s+3) at its first block: strips are 4 rows' bytes apart.
  const uint8_t* strip(int64_t s) const {
    assert(layout == WeightLayout::row_strips);
    return data + static_cast<uint64_t>(s) * 4 * row_bytes;
  }
  // F32 vectors only (checked at load: type F32 and 4-byte aligned).
  const float* f32() const { return reinterpret_cast<const float*>(data); }

  // Bytes of n input columns of a row (n on a block boundary of the type).
  uint64_t column_bytes(int64_t n) const {
    TypeTraits traits{};
    type_traits(static_cast<uint32_t>(type), &traits);
    return lf::row_bytes(traits, static_cast<uint64_t>(n));
  }

  // Input columns [k0, k1) of every row, on block boundaries -> a view of n_out rows of k1 - k0
  // values: in the file's layout the rows stay row_bytes apart (strided), feature-major they are
  // the stripes of those blocks (still feature-major). In row strips each block holds 4 rows'
  // bytes, so the slice starts 4 times further in and strips stay 4·row_bytes apart.
  WeightView columns(int64_t k0, int64_t k1) const {
    WeightView v = *this;
    v.n_in = k1 - k0;
    if (layout == WeightLayout::feature_major) {  // a stripe holds its block of every row: n_out blocks' bytes
      v.data = data + static_cast<uint64_t>(n_out) * column_bytes(k0);
      return v;
    }
    const uint64_t rows_per_block = in_row_strips() ? 4 : 1;
    v.data = data + rows_per_block * column_bytes(k0);
    return v;
  }
};

}  // namespace lf
