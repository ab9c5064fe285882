// The Q4_0 / Q8_0 GEMM for prompts (kernels/gemm_q4_0_q8_0.h).
//
// Work order, outermost first:
//   column chunks  a slice of the blocks small enough that all tokens' activations for it stay
//                  in cache while every row strip streams its weights through once;
//   row strips     4 output rows, one per f32 lane;
//   token tiles    up to kTileTokens tokens reusing each unpacked weight block;
//   block runs     kRunBlocks blocks: first the integer kernel writes every block's exact sums
//                  [block][token][4 rows], then the float pass folds them into each output in
//                  increasing block order, as the reference does.
// Chunks and runs carry each output's running sum through Y, so the f32 order is the
// reference's. Splitting the integers from the floats keeps the integer kernel free of
// accumulators (all registers for weights) and makes it the one ISA-specific piece.
#include <algorithm>

#include "kernels/gemm_q4_0_q8_0.h"

namespace lf::gemm_q4_0_q8_0 {
namespace {

constexpr int kTileTokens = 16;   // tokens sharing one unpacked weight block
constexpr int64_t kRunBlocks = 16;  // blocks per integer pass: sums [16][16][4] stay in L1
constexpr int64_t kChunkActivationBytes = 192 * 1024;  // within L2 alongside a strip of weights

// f16 scales h [4] -> f32 lanes, as fp16_to_fp32 converts each: in one vector for the finite
// values scales are, through the reference converter for infinities and NaNs.
F32x4 scales_to_f32(const uint16_t h[kLanes]) {
  const auto special = [](uint16_t x) { return (x & 0x7C00u) == 0x7C00u; };
  if (special(h[0]) || special(h[1]) || special(h[2]) || special(h[3])) {
    return make(fp16_to_fp32(h[0]), fp16_to_fp32(h[1]), fp16_to_fp32(h[2]), fp16_to_fp32(h[3]));
  }
  return finite_halves_to_f32(make_i32(h[0], h[1], h[2], h[3]));
}

// Y [n_tok, y_stride] lanes at y: the first n_rows of 4, the rest untouched (row tails).
F32x4 load_lanes(const float* y, int n_rows) {
  if (n_rows == kLanes) return load_f32x4(y);
  float lanes[kLanes] = {};
  std::copy(y, y + n_rows, lanes);
  return load_f32x4(lanes);
}

// Activations of a token tile: Q8_0 rows and their scales dy [n_tok, n_blocks] as f32.
struct Tokens {
  const uint8_t* x;  // row 0 of the tile
  uint64_t x_row;    // bytes per activation row
  const float* dy;   // row 0 of the tile
  int64_t dy_row;
  int n;
};

// W strip [4 rows, blocks b_begin..b_end) · X tile -> sums [b_end - b_begin][t.n][4], exact.
template <typename Format>
void block_sums(const Strip& s, const Tokens& t, int64_t b_begin, int64_t b_end, int32_t* sums) {
  using Block = typename Format::Block;
  WeightBlock w[kLanes];
  for (int64_t b = b_begin; b < b_end; ++b) {
    for (int i = 0; i < kLanes; ++i) Format::unpack(reinterpret_cast<const Block*>(s.rows[i])[b], &w[i]);
    for (int j = 0; j < t.n; ++j) {
      const block_q8_0& xb = reinterpret_cast<const block_q8_0*>(t.x + t.x_row * static_cast<uint64_t>(j))[b];
      I16x8 a[4];
      widen_32(load_i8x16(xb.qs), load_i8x16(xb.qs + 16), a);
      store_i32(sums, sum_each(block_dot(w[0], a), block_dot(w[1], a), block_dot(w[2], a), block_dot(w[3], a)));
      sums += kLanes;
    }
  }
}

// W strip · X tile over blocks [b_begin, b_end) of the columns -> Y [tile tokens, 4 lanes]
// at y (stride y_stride); `fresh` starts from 0, else continues the sums already in Y.
template <typename Format>
void gemm_tile(const Strip& s, const Tokens& t, int64_t b_begin, int64_t b_end, bool fresh,
               float* y, int64_t y_stride) {
  using Block = typename Format::Block;
  F32x4 acc[kTileTokens];
  for (int j = 0; j < t.n; ++j) acc[j] = fresh ? splat(0.0f) : load_lanes(y + j * y_stride, s.n_rows);
  alignas(16) int32_t sums[kRunBlocks * kTileTokens * kLanes];
  for (int64_t r0 = b_begin; r0 < b_end; r0 += kRunBlocks) {
    const int64_t r1 = std::min(r0 + kRunBlocks, b_end);
    block_sums<Format>(s, t, r0, r1, sums);
    const int32_t* sumi = sums;
    for (int64_t b = r0; b < r1; ++b) {
      uint16_t d[kLanes];
      for (int i = 0; i < kLanes; ++i) d[i] = reinterpret_cast<const Block*>(s.rows[i])[b].d;
      const F32x4 dw = scales_to_f32(d);
      const float* dy = t.dy + b;
      for (int j = 0; j < t.n; ++j, sumi += kLanes) {
        acc[j] = accumulate(acc[j], load_i32x4(sumi), dw, splat(dy[j * t.dy_row]));
      }
    }
  }
  for (int j = 0; j < t.n; ++j) store_lanes(y + j * y_stride, s.n_rows, acc[j]);
}

}  // namespace

template <typename Format>
void gemm_tiles(const WeightView& W, const uint8_t* Xc, uint64_t x_row, const float* dy, int64_t n_blocks, int n_tok,
                float* Y, int64_t r0, int64_t r1) {
  const int64_t chunk = std::max(kMinChunkBlocks, kChunkActivationBytes / (int64_t{n_tok} * int64_t{sizeof(block_q8_0)}));
  for (int64_t c0 = 0; c0 < n_blocks; c0 += chunk) {
    const int64_t c1 = std::min(c0 + chunk, n_blocks);
    for (int64_t r = r0; r < r1; r += kLanes) {
      const Strip s = strip_at(W, r, r1);
      for (int j0 = 0; j0 < n_tok; j0 += kTileTokens) {
        const Tokens t{Xc + x_row * static_cast<uint64_t>(j0), x_row, dy + j0 * n_blocks, n_blocks,
                       std::min(kTileTokens, n_tok - j0)};
        gemm_tile<Format>(s, t, c0, c1, c0 == 0, Y + j0 * W.n_out + r, W.n_out);
      }
    }
  }
}

template void gemm_tiles<Q4_0>(const WeightView&, const uint8_t*, uint64_t, const float*, int64_t, int, float*, int64_t,
                               int64_t);
template void gemm_tiles<Q8_0>(const WeightView&, const uint8_t*, uint64_t, const float*, int64_t, int, float*, int64_t,
                               int64_t);

}  // namespace lf::gemm_q4_0_q8_0
