// What the Q4_0 / Q8_0 GEMM's algorithms share (kernels/gemm.h is their interface,
// docs/kernels.md the design): the tiled GEMM for prompts (gemm_q4_0_q8_0_tiles.cpp), the GEMV
// for decode (gemv_q4_0_q8_0.cpp) and, in the relaxed-SIMD build, the row-strip kernel of Q4_0
// (gemm_q4_0_strips_relaxed.cpp); gemm_q4_0_q8_0.cpp picks one per call. The block helpers are
// inline here because they are the algorithms' inner loops.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/gemm.h"
#include "kernels/simd.h"
#include "layout/weight_view.h"
#include "quant/quant.h"

namespace lf::gemm_q4_0_q8_0 {

using namespace simd;

constexpr int kLanes = 4;  // output rows per strip
constexpr int64_t kMinChunkBlocks = 16;
constexpr int kGemvMaxTokens = 2;  // up to here the GEMV path beats the tiles (kernels-bench)

// One block of 32 weights as int16 [4][8] in element order.
struct WeightBlock {
  I16x8 q[4];
};

// int8 [32] -> int16 [4][8] in the GEMV's element order: 0,2..14 | 1,3..15 | 16,18..30 | 17,19..31
inline void split_32(const int8_t* q, I16x8 out[4]) {
  bytes_even_odd(load_i8x16(q), &out[0], &out[1]);
  bytes_even_odd(load_i8x16(q + 16), &out[2], &out[3]);
}

// The two weight formats: how a block unpacks.
// unpack_split gives the GEMV's element order (nibbles_even_odd); kOffset: its Q4_0 weights
// are the unsigned nibbles q = w + 8, so its block sums exceed the true ones by 8·Σa.
struct Q4_0 {
  using Block = block_q4_0;
  static constexpr bool kOffset = true;
  static void unpack(const Block& b, WeightBlock* w) {
    const I8x16 packed = load_i8x16(b.qs);
    widen_32(low_nibbles_minus_8(packed), high_nibbles_minus_8(packed), w->q);  // elements 0-15, 16-31
  }
  static void unpack_split(const Block& b, WeightBlock* w) { nibbles_even_odd(load_i8x16(b.qs), w->q); }
};

struct Q8_0 {
  using Block = block_q8_0;
  static constexpr bool kOffset = false;
  static void unpack(const Block& b, WeightBlock* w) {
    widen_32(load_i8x16(b.qs), load_i8x16(b.qs + 16), w->q);
  }
  static void unpack_split(const Block& b, WeightBlock* w) { split_32(b.qs, w->q); }
};

// The f32 step of both formats, vec_dot_ref's: fma_f32(sumi, dw·dy, acc).
inline F32x4 accumulate(F32x4 acc, I32x4 sumi, F32x4 dw, F32x4 dy) { return fused_madd(sumi, mul(dw, dy), acc); }

// w [32] · a [32] -> 4 partial sums whose total is the exact block product
inline I32x4 block_dot(const WeightBlock& w, const I16x8 a[4]) {
  return add(add(dot_pairs(w.q[0], a[0]), dot_pairs(w.q[1], a[1])), add(dot_pairs(w.q[2], a[2]), dot_pairs(w.q[3], a[3])));
}

inline void store_lanes(float* y, int n_rows, F32x4 v) {
  if (n_rows == kLanes) return store(y, v);
  float lanes[kLanes];
  store(lanes, v);
  std::copy(lanes, lanes + n_rows, y);
}

// One strip of 4 weight rows (tails repeat the last row; its lanes are never stored).
struct Strip {
  const uint8_t* rows[kLanes];
  int n_rows;
};

// The strip of W's rows from r, cut at r1
inline Strip strip_at(const WeightView& W, int64_t r, int64_t r1) {
  Strip s{};
  s.n_rows = static_cast<int>(std::min<int64_t>(kLanes, r1 - r));
  for (int i = 0; i < kLanes; ++i) s.rows[i] = W.row(r + std::min(i, s.n_rows - 1));
  return s;
}

// The three algorithms, each over W [n_out, n_in] rows [r0, r1) (r0 < r1) · Xc [n_tok, n_in]
// (Q8_0 rows x_row bytes apart, from W's column 0; n_blocks = n_in / 32 > 0) -> Y [n_tok,
// n_out]; dy [n_tok, n_blocks] the activations' scales as f32.

// More than kGemvMaxTokens tokens, W in the file's layout.
template <typename Format>
void gemm_tiles(const WeightView& W, const uint8_t* Xc, uint64_t x_row, const float* dy, int64_t n_blocks, int n_tok,
                float* Y, int64_t r0, int64_t r1);

// 1 to kGemvMaxTokens tokens, W in the file's layout.
template <typename Format>
void gemv(const WeightView& W, const uint8_t* Xc, uint64_t x_row, const float* dy, int64_t n_blocks, int n_tok,
          float* Y, int64_t r0, int64_t r1);

#if LF_RELAXED_SIMD
// Q4_0 in row strips, any number of tokens, through the kernels of the given form; its scales
// come from Xc.
void gemm_strips(DotForm form, const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y,
                 int64_t r0, int64_t r1);

// Each form's time over the same strips in cache, as DotFormChoice reports it (choose_dot_form).
DotFormChoice time_dot_forms();

// Whether this engine fuses f32x4.relaxed_madd, which gemm_strips's block step needs.
bool relaxed_madd_fused();
#endif

}  // namespace lf::gemm_q4_0_q8_0
