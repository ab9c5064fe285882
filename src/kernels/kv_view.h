// One layer's K/V rows as attention reads them, and the rules every attention shares: the
// scalar reference (ops/attention.cpp) and the kernels (kernels/attention.h) must agree on
// which KV head a query head reads, which keys it sees and the order of a score's sum.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace lf {

// Query head h reads KV head h / (n_head / n_head_kv): consecutive query heads share one.
inline int kv_head_for(int h, int n_head, int n_head_kv) { return h / (n_head / n_head_kv); }
// Which keys a query at position p1 sees. Its horizon is p1 itself (causal), or the last position
// of the non-causal span [span_begin, span_end) it lies in: an image's tokens attend to each other
// both ways, as llama.cpp's mtmd decodes them. With a window (n_swa > 0) it sees only keys with
// p1 - p0 < n_swa, which past the query means all of them, as llama.cpp's SWA mask has it. A
// window alone converts from its size.
struct KeyMask {
  KeyMask(int window = 0, int begin = 0, int end = 0) : n_swa(window), span_begin(begin), span_end(end) {}
  int n_swa;
  int span_begin, span_end;

  int last_key(int p1) const { return p1 >= span_begin && p1 < span_end ? span_end - 1 : p1; }
  int first_key(int p1) const { return n_swa > 0 && p1 - n_swa + 1 > 0 ? p1 - n_swa + 1 : 0; }
};
// Both bounds rise with p1, so a run of rows sees keys from its first row's first_key to its
// last row's last_key.
inline bool key_visible(int p0, int p1, const KeyMask& m) {
  return p0 <= m.last_key(p1) && (m.n_swa <= 0 || p1 - p0 < m.n_swa);
}

// The cache types, as llama.cpp's --cache-type-k/-v name them: F16 (its default), Q8_0 and
// Q4_0 (32-value blocks, so a quantized row needs a head dim that is a multiple of 32).
inline bool kv_type_supported(GgmlType t) { return t == GgmlType::F16 || t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }
// Bytes of one head's row of D values in a cache type.
inline uint64_t kv_row_bytes(GgmlType t, int D) {
  if (t == GgmlType::F16) return 2 * static_cast<uint64_t>(D);
  return static_cast<uint64_t>(D / 32) * (t == GgmlType::Q8_0 ? 34 : 18);
}

// One layer's K and V rows, each head's row of head_dim values in its type (f16 values, or
// blocks), position p in slot p % capacity (a ring when capacity is smaller than the context).
// Slots [capacity, n_head_kv] rows.
struct KvView {
  const void* k = nullptr;
  const void* v = nullptr;
  GgmlType k_type = GgmlType::F16;
  GgmlType v_type = GgmlType::F16;
  int capacity = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int first_pos = 0;  // oldest position still held (and ever written)
};

// An f16 array of the view as its values.
inline const uint16_t* halves(const void* rows) { return static_cast<const uint16_t*>(rows); }

// The row of position p, KV head g, in the view's K (or V) array `rows` of type t.
inline const uint8_t* kv_row(const KvView& kv, const void* rows, GgmlType t, int g, int p) {
  const uint64_t slot = static_cast<uint64_t>(p % kv.capacity) * kv.n_head_kv + g;
  return static_cast<const uint8_t*>(rows) + slot * kv_row_bytes(t, kv.head_dim);
}

// Keys per tile of llama.cpp's tiled flash attention (GGML_FA_TILE_KV; docs/attention.md, "The
// f32 tile path").
constexpr int kF32TileKeys = 64;

// The keys a tiled call of n_q rows from pos0 reads: [first, last], the first row's first key to
// the last row's last, in tiles from begin (first rounded down to a tile).
struct F32TileKeys {
  int begin, first, last;
};
inline F32TileKeys f32_tile_keys(int pos0, int n_q, const KeyMask& mask) {
  const int first = mask.first_key(pos0);
  return {first - first % kF32TileKeys, first, mask.last_key(pos0 + n_q - 1)};
}

// Elements of a score summed in f32 lanes: ggml_vec_dot_f16's step on AVX-512, 4 accumulators of
// 16 lanes (docs/attention.md, "The score's order").
constexpr int kScoreLanes = 64;

}  // namespace lf
