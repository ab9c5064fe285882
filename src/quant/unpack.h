// Block -> small integers: the bit-unpacking shared by dequantization and the reference dots, so
// both read the packed formats (docs/gguf.md, "Legacy blocks" and "K-quants") through one
// definition. The float formulas stay with their callers because llama.cpp associates them
// differently in each place.
#pragma once

#include <cstdint>

#include "quant/quant.h"

namespace lf {

// Legacy blocks: q [32] with value_i = q_i·d (+ m for the _1 types).
void unpack_q4_0(const block_q4_0& b, int8_t q[QK4_0]);  // q in [-8, 7]
void unpack_q4_1(const block_q4_1& b, int8_t q[QK4_0]);  // q in [0, 15]
void unpack_q5_0(const block_q5_0& b, int8_t q[QK4_0]);  // q in [-16, 15]
void unpack_q5_1(const block_q5_1& b, int8_t q[QK4_0]);  // q in [0, 31]

// K-quant super-blocks: q [256] in element order.
void unpack_q4_K(const block_q4_K& b, int8_t q[QK_K]);  // q in [0, 15]
void unpack_q5_K(const block_q5_K& b, int8_t q[QK_K]);  // q in [0, 31]
void unpack_q6_K(const block_q6_K& b, int8_t q[QK_K]);  // q in [-32, 31]

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block (get_scale_min_k4).
struct ScaleMin {
  int scale;
  int min;
};
ScaleMin scale_min_k4(const uint8_t scales[12], int j);

}  // namespace lf
