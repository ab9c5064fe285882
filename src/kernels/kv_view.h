// One layer's K/V rows as attention reads them, and the rules every attention shares: the
// scalar reference (ops/attention.cpp) and the kernels (kernels/attention.h) must agree on
// which KV head a query head reads, which keys it sees and the order of a score's sum.
#pragma once

#include <cstdint>

namespace lf {

// Query head h reads KV head h / (n_head / n_head_kv): consecutive query heads share one.
inline int kv_head_for(int h, int n_head, int n_head_kv) { return h / (n_head / n_head_kv); }
// Key at p0 is visible to a query at p1 iff p0 <= p1 and, with a window (n_swa > 0), p1 - p0 < n_swa.
inline bool key_visible(int p0, int p1, int n_swa) { return p0 <= p1 && (n_swa <= 0 || p1 - p0 < n_swa); }

// One layer's K and V rows in f16, position p in slot p % capacity (a ring when capacity is
// smaller than the context). Slots [capacity, n_head_kv, head_dim].
struct KvView {
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int capacity = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int first_pos = 0;  // oldest position still held (and ever written)
};

// Elements of a score summed in f32 lanes: ggml_vec_dot_f16's step on AVX-512, 4 accumulators of
// 16 lanes (docs/attention.md, "The score's order").
constexpr int kScoreLanes = 64;

}  // namespace lf
