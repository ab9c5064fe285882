// GEMM of feature-major Q4_0 / Q8_0 weights with Q8_0 activations (src/layout/feature_major.h),
// bit-identical to gemm_q8_0_strided on the row layout, with work that follows the nonzero
// activation quants.
//
// Why the bits match: each output is the reference's sumf, which starts at +0.0f and takes one
// f32 step per block in increasing block order, sumf = fma_f32(sumi, dw·dy, sumf).
// The block's integer sum sumi is exact, so the features may be summed in any order and zero
// activation quants left out. The f32 steps are the reference's, one output per vector lane.
//
// Skipped steps: a token's block is skipped when its term is sure to be ±0: all its activation
// quants are 0 or its scale dy is ±0, AND dy and the weight scales dw of the rows at hand are
// finite (0·inf is NaN, so then the step is taken, on the exact sumi). Adding ±0 never changes
// sumf: x + ±0 is x for every x but -0, and sumf is never -0 (it starts at +0, and a sum is -0
// only when both terms are); ±inf stays, and a NaN (quiet, made by arithmetic) comes back as is
// (the fused step rounds the same exact sum, so this holds for it too).
// Zero quants are left out of the integer sums, which changes nothing at all.
//
// Work order, outermost first:
//   row chunks   rows whose f32 sums [tile tokens][rows] take kChunkSumBytes: every row of a
//                decode at once, so that each feature's column is read as one run;
//   token tiles  up to kTileTokens tokens;
//   blocks       in increasing order, each a stripe read front to back;
//   row spans    kSpanRows rows: their weight scales to f32 once, then for a lone token the
//                columns unpacked straight into its products, for several the columns of the
//                features any of them needs unpacked once into int16 [32][kSpanRows] (L1);
//   32-row groups  per token, integer accumulators in registers over that token's nonzero
//                features, then its f32 step.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#include "kernels/simd.h"
#include "layout/feature_major.h"
#include "quant/quant.h"

namespace lf {
namespace {

using namespace simd;

constexpr int kGroupRows = 32;  // rows of one set of integer accumulators (and of a Q4_0 packing group)
constexpr int kSpanRows = 128;  // rows whose unpacked columns [32 features][128] int16 (8 KiB) stay in L1
constexpr int kSpanGroups = kSpanRows / kGroupRows;
constexpr int kTileTokens = 16;
// A row chunk's f32 sums [tile tokens][rows] take at most this: all rows of a decode at once;
// 1024 rows for a full token tile (within L2).
constexpr int64_t kChunkSumBytes = 64 * 1024;

// One feature's weights for one 32-row group as int16 in row order: Q8_0 quants, Q4_0 nibbles
// (quant + 8). Rows past a tail group are 0 and never stored.
struct Column {
  I16x8 q[4];
};

// A tail group (fewer than 32 rows) in row order -> Column, zero-padded.
void load_tail(const int16_t* q, int rows, Column* c) {
  alignas(16) int16_t padded[kGroupRows] = {};
  std::copy(q, q + rows, padded);
  for (int k = 0; k < 4; ++k) c->q[k] = load_i16x8(padded + 8 * k);
}

// The two weight formats: how a group of a column unpacks and how the integer sums accumulate.
// Both accumulate -sumi = Σ q·(−a) and negate it once: for Q4_0 that is what fits int16
// (Q4_0::Acc).
struct Q4_0 {
  static constexpr uint64_t kBlockBytes = sizeof(block_q4_0);
  static uint64_t column_bytes(int64_t n_out) { return static_cast<uint64_t>(n_out) / 2; }
  // column [n_out / 2 bytes] -> group g's nibbles n = q + 8 in [0, 15] (the packing of
  // src/layout/feature_major.h)
  static void unpack(const uint8_t* column, int64_t n_out, int64_t g, Column* c) {
    const uint8_t* p = column + 16 * g;
    const int rows = static_cast<int>(std::min<int64_t>(kGroupRows, n_out - kGroupRows * g));
    if (rows == kGroupRows) {
      const I8x16 packed = load_i8x16(p);
      const I8x16 lo = low_nibbles(packed), hi = high_nibbles(packed);  // rows 0-15, 16-31
      c->q[0] = widen_lo_u8(lo);
      c->q[1] = widen_hi_u8(lo);
      c->q[2] = widen_lo_u8(hi);
      c->q[3] = widen_hi_u8(hi);
      return;
    }
    int16_t q[kGroupRows];
    for (int i = 0; i < rows / 2; ++i) {
      q[i] = static_cast<int16_t>(p[i] & 0x0F);
      q[rows / 2 + i] = static_cast<int16_t>(p[i] >> 4);
    }
    load_tail(q, rows, c);
  }
  // int16 lanes, one per row, wrapping: Σ n·(−a) + 8·Σa is Σ (n − 8)·(−a) = −sumi modulo 2^16,
  // and −sumi lies in [−32768, 32512] (q in [−8, 7], −a in [−127, 128]), so the wrapped lanes
  // hold it exactly. (sumi itself reaches +32768 = 32·(−8)·(−128), one past int16.) Keeping the
  // unsigned nibbles saves their "− 8" on every weight.
  struct Acc {
    I16x8 v[4];
  };
  // sum_a = Σ a over the token's nonzero quants of the block
  static Acc start(int32_t sum_a) {
    const I16x8 v = splat_i16(static_cast<int16_t>(static_cast<uint16_t>(8 * sum_a)));
    return {{v, v, v, v}};
  }
  static void mac(Acc* acc, const Column& c, I16x8 minus_a) {
    for (int k = 0; k < 4; ++k) acc->v[k] = add(acc->v[k], mul(c.q[k], minus_a));
  }
  // rows 4i..4i+3 -> sumi
  static I32x4 sumi(const Acc& acc, int i) { return neg(i % 2 ? widen_hi(acc.v[i / 2]) : widen_lo(acc.v[i / 2])); }
};

struct Q8_0 {
  static constexpr uint64_t kBlockBytes = sizeof(block_q8_0);
  static uint64_t column_bytes(int64_t n_out) { return static_cast<uint64_t>(n_out); }
  static void unpack(const uint8_t* column, int64_t n_out, int64_t g, Column* c) {
    const uint8_t* p = column + kGroupRows * g;
    const int rows = static_cast<int>(std::min<int64_t>(kGroupRows, n_out - kGroupRows * g));
    if (rows == kGroupRows) return widen_32(load_i8x16(p), load_i8x16(p + 16), c->q);
    int16_t q[kGroupRows];
    for (int i = 0; i < rows; ++i) q[i] = static_cast<int8_t>(p[i]);
    load_tail(q, rows, c);
  }
  // int32 lanes: a product reaches 2^14, two overflow int16.
  struct Acc {
    I32x4 v[8];
  };
  static Acc start(int32_t) {
    Acc acc;
    for (I32x4& v : acc.v) v = make_i32(0, 0, 0, 0);
    return acc;
  }
  static void mac(Acc* acc, const Column& c, I16x8 minus_a) {
    for (int k = 0; k < 4; ++k) {
      acc->v[2 * k] = add(acc->v[2 * k], mul_widen_lo(c.q[k], minus_a));
      acc->v[2 * k + 1] = add(acc->v[2 * k + 1], mul_widen_hi(c.q[k], minus_a));
    }
  }
  static I32x4 sumi(const Acc& acc, int i) { return neg(acc.v[i]); }
};

// How a block's sum joins the f32 sum, in both formats: vec_dot_ref's fma_f32(sumi, dw·dy, acc).
F32x4 accumulate(F32x4 acc, I32x4 sumi, F32x4 dw, F32x4 dy) { return fused_madd(sumi, mul(dw, dy), acc); }

bool is_special_half(uint16_t h) { return (h & 0x7C00u) == 0x7C00u; }  // infinity or NaN

// What the kernel needs of each token's activation block, worked out once per call.
struct ActivationBlocks {
  std::vector<uint32_t> live;     // [n_tok, n_blocks]: bit f set when quant f is nonzero
  std::vector<float> dy;          // [n_tok, n_blocks]
  std::vector<uint8_t> skippable;  // [n_tok, n_blocks]: the term is ±0 whenever the dw are finite
};

ActivationBlocks describe_activations(const uint8_t* Xc, uint64_t x_row, int n_tok, int64_t n_blocks) {
  ActivationBlocks a;
  const size_t n = static_cast<size_t>(n_tok) * static_cast<size_t>(n_blocks);
  a.live.resize(n);
  a.dy.resize(n);
  a.skippable.resize(n);
  for (int t = 0; t < n_tok; ++t) {
    const auto* xb = reinterpret_cast<const block_q8_0*>(Xc + x_row * static_cast<uint64_t>(t));
    for (int64_t b = 0; b < n_blocks; ++b) {
      const size_t i = static_cast<size_t>(t) * static_cast<size_t>(n_blocks) + static_cast<size_t>(b);
      uint32_t live = 0;
      for (int f = 0; f < QK8_0; ++f) live |= static_cast<uint32_t>(xb[b].qs[f] != 0) << f;
      a.live[i] = live;
      a.dy[i] = fp16_to_fp32(xb[b].d);
      a.skippable[i] = (live == 0 || (xb[b].d & 0x7FFFu) == 0) && !is_special_half(xb[b].d);
    }
  }
  return a;
}

// scales h [n] (n <= kSpanRows) -> dw [kSpanRows] f32 as fp16_to_fp32 converts each, zeros
// past n. Returns whether all are finite.
bool convert_scales(const uint8_t* h, int n, float* dw) {
  alignas(16) uint16_t padded[kSpanRows];
  if (n < kSpanRows) {
    std::fill(padded, padded + kSpanRows, uint16_t{0});
    std::memcpy(padded, h, static_cast<size_t>(n) * sizeof(uint16_t));
    h = reinterpret_cast<const uint8_t*>(padded);
  }
  // 4 halves per word: an exponent field of 0x7C00 (infinity, NaN) carries into its lane's top bit.
  uint64_t special = 0;
  for (int i = 0; i < kSpanRows; i += 4) {
    uint64_t w;
    std::memcpy(&w, h + 2 * i, sizeof w);
    special |= ((w & 0x7C007C007C007C00u) + 0x0400040004000400u) & 0x8000800080008000u;
  }
  if (special != 0) {
    for (int i = 0; i < kSpanRows; ++i) {
      uint16_t half;
      std::memcpy(&half, h + 2 * i, sizeof half);
      dw[i] = fp16_to_fp32(half);
    }
    return false;
  }
  for (int i = 0; i < kSpanRows; i += 8) {
    const I16x8 v = load_i16x8(h + 2 * i);
    store(dw + i, finite_halves_to_f32(widen_lo(v)));
    store(dw + i + 4, finite_halves_to_f32(widen_hi(v)));
  }
  return true;
}

// One token's activation block, ready for the integer kernel: its nonzero quants, negated.
struct TokenBlock {
  int n_live;
  int32_t sum_a;  // Σ of its quants
  uint8_t feature[QK8_0];
  I16x8 minus_a[QK8_0];
  F32x4 dy;
};

// W block, rows of n_groups groups · one token -> its sums s [rows] take the block's f32 step.
// column_of(f, g) gives the Column of feature f, group g.
template <typename Format, typename ColumnOf>
void token_step(const TokenBlock& tb, int n_groups, const float* dw, float* s, ColumnOf column_of) {
  for (int g = 0; g < n_groups; ++g, s += kGroupRows, dw += kGroupRows) {
    typename Format::Acc acc = Format::start(tb.sum_a);
    for (int i = 0; i < tb.n_live; ++i) Format::mac(&acc, column_of(tb.feature[i], g), tb.minus_a[i]);
    for (int i = 0; i < kGroupRows / 4; ++i) {
      store(s + 4 * i, accumulate(load_f32x4(s + 4 * i), Format::sumi(acc, i), load_f32x4(dw + 4 * i), tb.dy));
    }
  }
}

// Per-call scratch, off the wasm32-wasi module's 64 KiB stack.
struct Scratch {
  std::vector<TokenBlock> tokens;  // [kTileTokens]
  std::vector<Column> columns;     // [32 features][kSpanGroups], 8 KiB
};

// Block b of W rows [c0, c1) · X tile -> sums [tile tokens][rows from c0] (sums_row floats
// apart): one f32 step per token and row, unless skipped.
template <typename Format>
void block_step(const WeightView& W, const ActivationBlocks& act, const uint8_t* Xc, uint64_t x_row, int j0, int n_tile,
                int64_t b, int64_t c0, int64_t c1, float* sums, int64_t sums_row, Scratch* scratch) {
  const int64_t n_blocks = W.n_in / QK8_0;
  const uint64_t n_out = static_cast<uint64_t>(W.n_out);
  const uint64_t column = Format::column_bytes(W.n_out);
  const uint8_t* stripe = W.data + static_cast<uint64_t>(b) * Format::kBlockBytes * n_out;
  const uint8_t* quants = stripe + 2 * n_out;
  const auto info = [&](int t) { return static_cast<size_t>(j0 + t) * static_cast<size_t>(n_blocks) + static_cast<size_t>(b); };
  for (int t = 0; t < n_tile; ++t) {
    TokenBlock& tb = scratch->tokens[static_cast<size_t>(t)];
    const int8_t* qs = reinterpret_cast<const block_q8_0*>(Xc + x_row * static_cast<uint64_t>(j0 + t))[b].qs;
    tb.n_live = 0;
    tb.sum_a = 0;
    for (uint32_t l = act.live[info(t)]; l != 0; l &= l - 1, ++tb.n_live) {
      const int f = __builtin_ctz(l);
      tb.feature[tb.n_live] = static_cast<uint8_t>(f);
      tb.minus_a[tb.n_live] = splat_i16(static_cast<int16_t>(-qs[f]));
      tb.sum_a += qs[f];
    }
    tb.dy = splat(act.dy[info(t)]);
  }
  alignas(16) float dw[kSpanRows];
  for (int64_t s0 = c0; s0 < c1; s0 += kSpanRows) {
    const int n_groups = static_cast<int>((std::min(s0 + kSpanRows, c1) - s0 + kGroupRows - 1) / kGroupRows);
    const int rows = static_cast<int>(std::min<int64_t>(int64_t{kGroupRows} * n_groups, W.n_out - s0));
    const bool finite = convert_scales(stripe + 2 * static_cast<uint64_t>(s0), rows, dw);
    uint32_t needed = 0;    // tokens whose step is taken
    uint32_t features = 0;  // features they read
    for (int t = 0; t < n_tile; ++t) {
      if (finite && act.skippable[info(t)]) continue;
      needed |= 1u << t;
      features |= act.live[info(t)];
    }
    const int64_t g0 = s0 / kGroupRows;
    float* s = sums + (s0 - c0);
    const auto unpack = [&](int f, int g) {
      Column c;
      Format::unpack(quants + static_cast<uint64_t>(f) * column, W.n_out, g0 + g, &c);
      return c;
    };
    if (needed != 0 && (needed & (needed - 1)) == 0) {  // one token: unpack straight into its products
      const int t = __builtin_ctz(needed);
      token_step<Format>(scratch->tokens[static_cast<size_t>(t)], n_groups, dw, s + t * sums_row, unpack);
      continue;
    }
    Column* columns = scratch->columns.data();
    for (uint32_t m = features; m != 0; m &= m - 1) {
      const int f = __builtin_ctz(m);
      for (int g = 0; g < n_groups; ++g) columns[f * kSpanGroups + g] = unpack(f, g);
    }
    const auto unpacked = [&](int f, int g) -> const Column& { return columns[f * kSpanGroups + g]; };
    for (uint32_t m = needed; m != 0; m &= m - 1) {
      const int t = __builtin_ctz(m);
      token_step<Format>(scratch->tokens[static_cast<size_t>(t)], n_groups, dw, s + t * sums_row, unpacked);
    }
  }
}

// W [n_out, n_in] feature-major rows [r0, r1) · Xc (Q8_0 rows x_row bytes apart) -> Y [n_tok, n_out]
template <typename Format>
void gemm(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0, int64_t r1) {
  const int64_t n_blocks = W.n_in / QK8_0;
  const ActivationBlocks act = describe_activations(Xc, x_row, n_tok, n_blocks);
  const int tile = std::min(kTileTokens, n_tok);
  const int64_t chunk_rows = std::max<int64_t>(kSpanRows, kChunkSumBytes / (int64_t{tile} * 4) / kSpanRows * kSpanRows);
  std::vector<float> sums(static_cast<size_t>(tile * chunk_rows));  // [tile][chunk_rows]
  Scratch scratch{std::vector<TokenBlock>(kTileTokens), std::vector<Column>(QK8_0 * kSpanGroups)};
  // Chunks start on a group: the packing's groups count from row 0.
  for (int64_t c0 = r0 / kGroupRows * kGroupRows; c0 < r1; c0 += chunk_rows) {
    const int64_t c1 = std::min(c0 + chunk_rows, r1);
    for (int j0 = 0; j0 < n_tok; j0 += kTileTokens) {
      const int n_tile = std::min(kTileTokens, n_tok - j0);
      std::fill(sums.begin(), sums.end(), 0.0f);
      for (int64_t b = 0; b < n_blocks; ++b) {
        block_step<Format>(W, act, Xc, x_row, j0, n_tile, b, c0, c1, sums.data(), chunk_rows, &scratch);
      }
      const int64_t y0 = std::max(c0, r0);
      for (int t = 0; t < n_tile; ++t) {
        const float* s = sums.data() + t * chunk_rows;
        std::copy(s + (y0 - c0), s + (c1 - c0), Y + (j0 + t) * W.n_out + y0);
      }
    }
  }
}

}  // namespace

void gemm_feature_major(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                        int64_t r1) {
  assert(W.layout == WeightLayout::feature_major && (W.type == GgmlType::Q4_0 || W.type == GgmlType::Q8_0) && W.n_in % QK8_0 == 0);
  if (n_tok <= 0 || r0 >= r1) return;
  if (W.type == GgmlType::Q4_0) {
    gemm<Q4_0>(W, Xc, x_row, n_tok, Y, r0, r1);
  } else {
    gemm<Q8_0>(W, Xc, x_row, n_tok, Y, r0, r1);
  }
}

}  // namespace lf
