// ggml tensor type ids and block geometry (docs/gguf.md, "Type ids and block geometry"). Ids are
// the on-disk int32 values.
#pragma once

#include <cstdint>

namespace lf {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
};

struct TypeTraits {
  const char* name;      // "Q4_0", as llama.cpp prints it
  uint32_t block_elems;  // elements per block (1 for float types)
  uint32_t block_bytes;  // bytes per block
};

// False for ids we do not know (retired, IQ*, MXFP4, ...): such a tensor is refused by name.
bool type_traits(uint32_t type_id, TypeTraits* out);

// llama.cpp's name for a type id it defines and we refuse (IQ4_NL, IQ4_XS, MXFP4, ...), so a
// refusal can say which; nullptr for ids it does not define either.
const char* refused_type_name(uint32_t type_id);

// Bytes of one row of n elements; n must be a multiple of block_elems.
inline uint64_t row_bytes(const TypeTraits& t, uint64_t n) { return n / t.block_elems * t.block_bytes; }

}  // namespace lf
