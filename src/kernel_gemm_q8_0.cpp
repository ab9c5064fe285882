// GEMM of Q4_0 / Q8_0 weights with Q8_0 activations (include/layerfold/kernels.h).
//
// Work order, outermost first:
//   column chunks  a slice of the blocks small enough that all tokens' activations for it stay
//                  in cache while every row strip streams its weights through once;
//   row strips     4 output rows, one per f32 lane;
//   token tiles    up to kTileTokens tokens reusing each unpacked weight block;
//   blocks         in increasing order within the chunk, each lane accumulating sequentially.
// Chunks carry each output's running sum through Y, so the f32 order is the reference's.
#include <algorithm>
#include <cassert>
#include <vector>

#include "kernel_simd.h"
#include "layerfold/kernels.h"
#include "layerfold/quant.h"

namespace lf {
namespace {

using namespace simd;

constexpr int kLanes = 4;        // output rows per strip
constexpr int kTileTokens = 8;   // tokens sharing one unpacked weight block
constexpr int64_t kChunkActivationBytes = 192 * 1024;  // within L2 alongside a strip of weights
constexpr int64_t kMinChunkBlocks = 16;

// One block of 32 weights as int16 [4][8] in element order.
struct WeightBlock {
  I16x8 q[4];
};

void widen_32(I8x16 lo, I8x16 hi, I16x8 q[4]) {
  q[0] = widen_lo(lo);
  q[1] = widen_hi(lo);
  q[2] = widen_lo(hi);
  q[3] = widen_hi(hi);
}

// The two weight formats: how a block unpacks and how its integer sum joins the f32 sum,
// associated exactly as in vec_dot_ref.
struct Q4_0 {
  using Block = block_q4_0;
  static void unpack(const Block& b, WeightBlock* w) {
    const I8x16 packed = load_i8x16(b.qs);
    widen_32(low_nibbles_minus_8(packed), high_nibbles_minus_8(packed), w->q);  // elements 0-15, 16-31
  }
  // acc + (sumi·dw)·dy
  static F32x4 accumulate(F32x4 acc, F32x4 sumi, F32x4 dw, F32x4 dy) { return add(acc, mul(mul(sumi, dw), dy)); }
};

struct Q8_0 {
  using Block = block_q8_0;
  static void unpack(const Block& b, WeightBlock* w) {
    widen_32(load_i8x16(b.qs), load_i8x16(b.qs + 16), w->q);
  }
  // acc + sumi·(dw·dy)
  static F32x4 accumulate(F32x4 acc, F32x4 sumi, F32x4 dw, F32x4 dy) { return add(acc, mul(sumi, mul(dw, dy))); }
};

// f16 scales h [4] -> f32 lanes, as fp16_to_fp32 converts each: in one vector for the finite
// values scales are, through the reference converter for infinities and NaNs.
F32x4 scales_to_f32(const uint16_t h[kLanes]) {
  const auto special = [](uint16_t x) { return (x & 0x7C00u) == 0x7C00u; };
  if (special(h[0]) || special(h[1]) || special(h[2]) || special(h[3])) {
    return make(fp16_to_fp32(h[0]), fp16_to_fp32(h[1]), fp16_to_fp32(h[2]), fp16_to_fp32(h[3]));
  }
  return finite_halves_to_f32(make_i32(h[0], h[1], h[2], h[3]));
}

// w [32] · a [32] -> 4 partial sums whose total is the exact block product
I32x4 block_dot(const WeightBlock& w, const I16x8 a[4]) {
  return add(add(dot_pairs(w.q[0], a[0]), dot_pairs(w.q[1], a[1])), add(dot_pairs(w.q[2], a[2]), dot_pairs(w.q[3], a[3])));
}

// Y [n_tok, y_stride] lanes at y: the first n_rows of 4, the rest untouched (row tails).
F32x4 load_lanes(const float* y, int n_rows) {
  if (n_rows == kLanes) return load_f32x4(y);
  float lanes[kLanes] = {};
  std::copy(y, y + n_rows, lanes);
  return load_f32x4(lanes);
}

void store_lanes(float* y, int n_rows, F32x4 v) {
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

// Activations of a token tile: Q8_0 rows and their scales dy [n_tok, n_blocks] as f32.
struct Tokens {
  const uint8_t* x;  // row 0 of the tile
  uint64_t x_row;    // bytes per activation row
  const float* dy;   // row 0 of the tile, relative to the first block of the column range
  int64_t dy_row;
  int n;
};

// W strip · X tile over blocks [b_begin, b_end) of the columns -> Y [tile tokens, 4 lanes]
// at y (stride y_stride); `fresh` starts from 0, else continues the sums already in Y.
// `b_first` is the column range's first block (dy's origin).
template <typename Format>
void gemm_tile(const Strip& s, const Tokens& t, int64_t b_first, int64_t b_begin, int64_t b_end, bool fresh,
               float* y, int64_t y_stride) {
  using Block = typename Format::Block;
  F32x4 acc[kTileTokens];
  for (int j = 0; j < t.n; ++j) acc[j] = fresh ? splat(0.0f) : load_lanes(y + j * y_stride, s.n_rows);
  WeightBlock w[kLanes];
  uint16_t d[kLanes];
  for (int64_t b = b_begin; b < b_end; ++b) {
    for (int i = 0; i < kLanes; ++i) {
      const Block& block = reinterpret_cast<const Block*>(s.rows[i])[b];
      Format::unpack(block, &w[i]);
      d[i] = block.d;
    }
    const F32x4 dw = scales_to_f32(d);
    for (int j = 0; j < t.n; ++j) {
      const block_q8_0& xb = reinterpret_cast<const block_q8_0*>(t.x + t.x_row * static_cast<uint64_t>(j))[b];
      I16x8 a[4];
      widen_32(load_i8x16(xb.qs), load_i8x16(xb.qs + 16), a);
      const I32x4 sumi = sum_each(block_dot(w[0], a), block_dot(w[1], a), block_dot(w[2], a), block_dot(w[3], a));
      acc[j] = Format::accumulate(acc[j], to_f32(sumi), dw, splat(t.dy[j * t.dy_row + (b - b_first)]));
    }
  }
  for (int j = 0; j < t.n; ++j) store_lanes(y + j * y_stride, s.n_rows, acc[j]);
}

template <typename Format>
void gemm(const WeightView& W, const uint8_t* Xc, int n_tok, float* Y, int64_t r0, int64_t r1, int64_t k0, int64_t k1) {
  const int64_t b_first = k0 / QK8_0, b_last = k1 / QK8_0, n_blocks = b_last - b_first;
  const uint64_t x_row = activation_row_bytes(W.type, W.n_in);
  if (n_tok <= 0 || r0 >= r1) return;
  if (n_blocks == 0) {  // an empty column range sums to 0, as the reference's does
    for (int j = 0; j < n_tok; ++j) std::fill(Y + j * W.n_out + r0, Y + j * W.n_out + r1, 0.0f);
    return;
  }
  // dy [n_tok, n_blocks]: converted once here rather than once per row strip.
  std::vector<float> dy(static_cast<size_t>(n_tok) * static_cast<size_t>(n_blocks));
  for (int j = 0; j < n_tok; ++j) {
    const auto* xb = reinterpret_cast<const block_q8_0*>(Xc + x_row * static_cast<uint64_t>(j));
    for (int64_t b = 0; b < n_blocks; ++b) dy[j * n_blocks + b] = fp16_to_fp32(xb[b_first + b].d);
  }
  const int64_t chunk = std::max(kMinChunkBlocks, kChunkActivationBytes / (int64_t{n_tok} * int64_t{sizeof(block_q8_0)}));
  for (int64_t c0 = b_first; c0 < b_last; c0 += chunk) {
    const int64_t c1 = std::min(c0 + chunk, b_last);
    for (int64_t r = r0; r < r1; r += kLanes) {
      Strip s{};
      s.n_rows = static_cast<int>(std::min<int64_t>(kLanes, r1 - r));
      for (int i = 0; i < kLanes; ++i) s.rows[i] = W.row(r + std::min(i, s.n_rows - 1));
      for (int j0 = 0; j0 < n_tok; j0 += kTileTokens) {
        const Tokens t{Xc + x_row * static_cast<uint64_t>(j0), x_row, dy.data() + j0 * n_blocks, n_blocks,
                       std::min(kTileTokens, n_tok - j0)};
        gemm_tile<Format>(s, t, b_first, c0, c1, c0 == b_first, Y + j0 * W.n_out + r, W.n_out);
      }
    }
  }
}

}  // namespace

bool has_gemm_kernel(GgmlType weight_type) { return weight_type == GgmlType::Q4_0 || weight_type == GgmlType::Q8_0; }

void gemm_q8_0_activations(const WeightView& W, const uint8_t* Xc, int n_tok, float* Y, int64_t r0, int64_t r1,
                           int64_t k0, int64_t k1) {
  assert(has_gemm_kernel(W.type) && k0 % QK8_0 == 0 && k1 % QK8_0 == 0 && 0 <= k0 && k0 <= k1 && k1 <= W.n_in);
  if (W.type == GgmlType::Q4_0) {
    gemm<Q4_0>(W, Xc, n_tok, Y, r0, r1, k0, k1);
  } else {
    gemm<Q8_0>(W, Xc, n_tok, Y, r0, r1, k0, k1);
  }
}

const char* gemm_kernel_isa() { return kIsa; }

}  // namespace lf
