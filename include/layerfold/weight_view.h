// A typed, non-owning view of one weight tensor: what ops need to know about a weight, without
// knowing which model it belongs to.
#pragma once

#include <cassert>
#include <cstdint>

#include "layerfold/ggml_type.h"

namespace lf {

// A GGUF tensor seen as n_out rows of n_in values (ggml ne = [n_in, n_out]). 1-D tensors are
// one row. `data == nullptr` means the tensor is absent (optional tensors only).
struct WeightView {
  GgmlType type = GgmlType::F32;
  int64_t n_in = 0, n_out = 0;
  const uint8_t* data = nullptr;
  uint64_t row_bytes = 0;  // bytes from one row to the next (a whole row's bytes, or more in a column slice)
  // 0: rows as in the file. Otherwise the bytes are unit-major (docs/threads.md): the input
  // columns are cut into units of unit_cols (the last one possibly narrower), and each unit's
  // [n_out, its columns] is stored contiguously, one unit after another. row() does not apply
  // then; columns() does.
  int64_t unit_cols = 0;
  // Q4_0 / Q8_0 only, unit_cols 0: the bytes are feature-major (include/layerfold/feature_major.h),
  // one stripe per 32-column block, in which each input column is one contiguous run over the
  // rows, so a product with mostly-zero activations reads only the columns it needs. row() does
  // not apply then; columns() does.
  bool feature_major = false;
  // Q4_0 only: the rows are interleaved 4 by 4 (include/layerfold/row_strips.h), in the file's
  // layout or within each unit. row() does not apply then; strip() does, after columns().
  bool row_strips = false;

  bool present() const { return data != nullptr; }
  const uint8_t* row(int64_t r) const {
    assert(unit_cols == 0 && !feature_major && !row_strips);
    return data + static_cast<uint64_t>(r) * row_bytes;
  }
  // Row strip s (rows 4s..4s+3) at its first block: strips are 4 rows' bytes apart.
  const uint8_t* strip(int64_t s) const {
    assert(unit_cols == 0 && row_strips);
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

  // Input columns [k0, k1) of every row, on block boundaries (and inside one unit when
  // unit-major) -> a view of n_out rows of k1 - k0 values: in the file's layout the rows stay
  // row_bytes apart (strided), unit-major they are the unit's contiguous rows, feature-major
  // they are the stripes of those blocks (still feature-major). In row strips each block holds
  // 4 rows' bytes, so the slice starts 4 times further in and strips stay 4·row_bytes apart.
  WeightView columns(int64_t k0, int64_t k1) const {
    WeightView v = *this;
    v.n_in = k1 - k0;
    v.unit_cols = 0;
    if (feature_major) {  // a stripe holds its block of every row: n_out blocks' bytes
      v.data = data + static_cast<uint64_t>(n_out) * column_bytes(k0);
      return v;
    }
    const uint64_t rows_per_block = row_strips ? 4 : 1;
    if (unit_cols == 0) {
      v.data = data + rows_per_block * column_bytes(k0);
      return v;
    }
    const int64_t u0 = k0 / unit_cols * unit_cols;
    const int64_t u1 = u0 + unit_cols < n_in ? u0 + unit_cols : n_in;
    assert(k1 <= u1);
    v.data = data + static_cast<uint64_t>(n_out) * column_bytes(u0) + rows_per_block * column_bytes(k0 - u0);
    v.row_bytes = column_bytes(u1 - u0);
    return v;
  }
};

}  // namespace lf
