// GEMM of Q4_0 / Q8_0 weights with Q8_0 activations (src/kernels/gemm.h).
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
//
// The relaxed-SIMD build (LF_RELAXED_SIMD) reads Q4_0 weights laid out in row strips
// (src/layout/row_strips.h) with kernels/q4_0_relaxed.wat, for any number of tokens: per
// column chunk the activations are packed (pack_strip_activations); one token (decode) runs
// four strips at a time, 2 to kStripsMaxTokens tokens (batched decode) two strips at a time
// through all tokens, every running sum in a register, and more tokens (prompts) one strip at a
// time; a row's products stay in its own lane, and each block's f32 step follows its integer
// sums at once.
//
// Decode (up to kGemvMaxTokens tokens) takes a GEMV path instead, built to stream the weights:
// the activations are split once per call into int16 even / odd elements (SplitBlock); two row
// strips (8 rows in flight) run side by side through all their blocks once; each weight block is
// split by shifts and masks inside 16-bit lanes (no widening; Q4_0's nibbles stay unsigned and
// the 8·Σa they overcount is subtracted once per block); each block's integer sums go straight
// into the f32 step.
#include <algorithm>
#include <cassert>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/simd.h"
#include "kernels/gemm.h"
#include "quant/quant.h"

#if LF_RELAXED_SIMD
// One W strip (Q4_0 in row strips, n_blocks blocks, finite scales) · X packed by
// pack_strip_activations (n_tok records per block) -> acc [n_tok][4], lane = row, each sum
// continued as vec_dot_ref forms it; consts: StripConstants. src/kernels/q4_0_relaxed.wat.
extern "C" void lf_q4_0_strip_relaxed(const uint8_t* w, const uint8_t* x, int32_t n_tok, int32_t n_blocks,
                                      float* acc, const void* consts);
// Strips wa, wb, wc and wd (as above) · one token -> acc [4][4], strip a's rows then b's...: the
// same sums with the token loop taken out, for decode: four strips share each activation load
// and give four weight streams. Written into the kernel at build time by
// wasm/gen_q4_0_strips_relaxed.mjs, as are the next ones.
extern "C" void lf_q4_0_strips4_t1_relaxed(const uint8_t* wa, const uint8_t* wb, const uint8_t* wc,
                                           const uint8_t* wd, const uint8_t* x, int32_t n_blocks, float* acc,
                                           const void* consts);
// Strips wa and wb · T = 2..8 tokens -> acc [2][T][4], strip a's tokens then b's: the same sums
// with the token count fixed per function, so that all 2·T running sums stay in registers, for
// batched decode.
#define LF_STRIPS_KERNEL(T)                                                                              \
  extern "C" void lf_q4_0_strips_t##T##_relaxed(const uint8_t* wa, const uint8_t* wb, const uint8_t* x, \
                                                int32_t n_blocks, float* acc, const void* consts);
LF_STRIPS_KERNEL(2)
LF_STRIPS_KERNEL(3)
LF_STRIPS_KERNEL(4)
LF_STRIPS_KERNEL(5)
LF_STRIPS_KERNEL(6)
LF_STRIPS_KERNEL(7)
LF_STRIPS_KERNEL(8)
#undef LF_STRIPS_KERNEL
// a·b + c through f32x4.relaxed_madd, lane 0 (relaxed_madd_fused)
extern "C" float lf_relaxed_madd_probe(float a, float b, float c);
#endif

namespace lf {
namespace {

using namespace simd;

constexpr int kLanes = 4;         // output rows per strip
constexpr int kTileTokens = 16;   // tokens sharing one unpacked weight block
constexpr int64_t kRunBlocks = 16;  // blocks per integer pass: sums [16][16][4] stay in L1
constexpr int64_t kChunkActivationBytes = 192 * 1024;  // within L2 alongside a strip of weights
constexpr int64_t kMinChunkBlocks = 16;
constexpr int64_t kStripChunkBytes = 1024 * 1024;  // the strip kernel's packed activations: half of L2
constexpr int kGemvMaxTokens = 2;  // up to here the GEMV path beats the tiles (kernels-bench)
constexpr int kGemvStrips = 2;     // row strips streamed side by side by the GEMV

// One block of 32 weights as int16 [4][8] in element order.
struct WeightBlock {
  I16x8 q[4];
};

// int8 [32] -> int16 [4][8] in the GEMV's element order: 0,2..14 | 1,3..15 | 16,18..30 | 17,19..31
void split_32(const int8_t* q, I16x8 out[4]) {
  bytes_even_odd(load_i8x16(q), &out[0], &out[1]);
  bytes_even_odd(load_i8x16(q + 16), &out[2], &out[3]);
}

// The two weight formats: how a block unpacks.
// unpack_split gives the GEMV's element order (nibbles_even_odd); kOffset: its Q4_0 weights
// are the unsigned nibbles q = w + 8, so its block sums exceed the true ones by 8·Σa.
struct Q4_0 {
  using Block = block_q4_0;
  [[maybe_unused]] static constexpr bool kRelaxed = LF_RELAXED_SIMD;
  static constexpr bool kOffset = true;
  static void unpack(const Block& b, WeightBlock* w) {
    const I8x16 packed = load_i8x16(b.qs);
    widen_32(low_nibbles_minus_8(packed), high_nibbles_minus_8(packed), w->q);  // elements 0-15, 16-31
  }
  static void unpack_split(const Block& b, WeightBlock* w) { nibbles_even_odd(load_i8x16(b.qs), w->q); }
};

struct Q8_0 {
  using Block = block_q8_0;
  [[maybe_unused]] static constexpr bool kRelaxed = false;  // its weights use all 8 bits: no i7 operand
  static constexpr bool kOffset = false;
  static void unpack(const Block& b, WeightBlock* w) {
    widen_32(load_i8x16(b.qs), load_i8x16(b.qs + 16), w->q);
  }
  static void unpack_split(const Block& b, WeightBlock* w) { split_32(b.qs, w->q); }
};

// The f32 step of both formats, vec_dot_ref's: fma_f32(sumi, dw·dy, acc).
F32x4 accumulate(F32x4 acc, I32x4 sumi, F32x4 dw, F32x4 dy) { return fused_madd(sumi, mul(dw, dy), acc); }

// f16 scales h [4] -> f32 lanes, as fp16_to_fp32 converts each: in one vector for the finite
// values scales are, through the reference converter for infinities and NaNs.
F32x4 scales_to_f32(const uint16_t h[kLanes]) {
  const auto special = [](uint16_t x) { return (x & 0x7C00u) == 0x7C00u; };
  if (special(h[0]) || special(h[1]) || special(h[2]) || special(h[3])) {
    return make(fp16_to_fp32(h[0]), fp16_to_fp32(h[1]), fp16_to_fp32(h[2]), fp16_to_fp32(h[3]));
  }
  return finite_halves_to_f32(make_i32(h[0], h[1], h[2], h[3]));
}

// The f16 scales of block b of 4 rows -> f32 lanes, as fp16_to_fp32 converts each
template <typename Block>
F32x4 block_scales(const Block* const rows[kLanes], int64_t b) {
  return halves_to_f32(load_halves(&rows[0][b].d, &rows[1][b].d, &rows[2][b].d, &rows[3][b].d));
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

// The strip of W's rows from r, cut at r1
Strip strip_at(const WeightView& W, int64_t r, int64_t r1) {
  Strip s{};
  s.n_rows = static_cast<int>(std::min<int64_t>(kLanes, r1 - r));
  for (int i = 0; i < kLanes; ++i) s.rows[i] = W.row(r + std::min(i, s.n_rows - 1));
  return s;
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

// One Q8_0 activation block as the GEMV takes it: its quants split as split_32 does, and the
// 8·Σa that Q4_0's unsigned nibbles overcount, in every lane.
struct SplitBlock {
  I16x8 a[4];
  I32x4 offset;
};

SplitBlock split_block(const block_q8_0& x) {
  SplitBlock s;
  split_32(x.qs, s.a);
  int32_t sum = 0;
  for (const int8_t q : x.qs) sum += q;
  s.offset = make_i32(8 * sum, 8 * sum, 8 * sum, 8 * sum);
  return s;
}

// W strips [kStrips][4 rows, n_blocks] · X [kTokens, n_blocks] (split, scales dy [kTokens,
// n_blocks]) -> acc [kStrips][kTokens] (4 rows each). Each weight block is read and split once for
// all tokens, and its f32 step follows at once, block after block as in the reference; several
// strips keep more rows in flight and share each block's activations and constants.
template <typename Format, int kStrips, int kTokens>
void gemv_strips(const Strip* s, const SplitBlock* x, const float* dy, int64_t n_blocks, F32x4 acc[][kTokens]) {
  using Block = typename Format::Block;
  const Block* rows[kStrips][kLanes];
  for (int k = 0; k < kStrips; ++k) {
    for (int i = 0; i < kLanes; ++i) rows[k][i] = reinterpret_cast<const Block*>(s[k].rows[i]);
    for (int j = 0; j < kTokens; ++j) acc[k][j] = splat(0.0f);
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int k = 0; k < kStrips; ++k) {
      I32x4 d[kTokens][kLanes];
      for (int i = 0; i < kLanes; ++i) {
        WeightBlock w;
        Format::unpack_split(rows[k][i][b], &w);
        for (int j = 0; j < kTokens; ++j) d[j][i] = block_dot(w, x[j * n_blocks + b].a);
      }
      const F32x4 dw = block_scales(rows[k], b);
      for (int j = 0; j < kTokens; ++j) {
        I32x4 sumi = sum_each(d[j][0], d[j][1], d[j][2], d[j][3]);
        if constexpr (Format::kOffset) sumi = sub(sumi, x[j * n_blocks + b].offset);
        acc[k][j] = accumulate(acc[k][j], sumi, dw, splat(dy[j * n_blocks + b]));
      }
    }
  }
}

// W [n_out, n_blocks blocks] rows [r0, r1) · Xc [kTokens] (Q8_0, scales dy [kTokens, n_blocks])
// -> Y [kTokens, n_out]
template <typename Format, int kTokens>
void gemv(const WeightView& W, const uint8_t* Xc, uint64_t x_row, const float* dy, int64_t n_blocks, float* Y,
          int64_t r0, int64_t r1) {
  std::vector<SplitBlock> x(static_cast<size_t>(kTokens * n_blocks));
  for (int j = 0; j < kTokens; ++j) {
    const auto* xb = reinterpret_cast<const block_q8_0*>(Xc + x_row * static_cast<uint64_t>(j));
    for (int64_t b = 0; b < n_blocks; ++b) x[static_cast<size_t>(j * n_blocks + b)] = split_block(xb[b]);
  }
  int64_t r = r0;
  for (; r + kGemvStrips * kLanes <= r1; r += kGemvStrips * kLanes) {
    Strip s[kGemvStrips];
    for (int k = 0; k < kGemvStrips; ++k) s[k] = strip_at(W, r + k * kLanes, r1);
    F32x4 acc[kGemvStrips][kTokens];
    gemv_strips<Format, kGemvStrips, kTokens>(s, x.data(), dy, n_blocks, acc);
    for (int k = 0; k < kGemvStrips; ++k) {
      for (int j = 0; j < kTokens; ++j) store_lanes(Y + j * W.n_out + r + k * kLanes, kLanes, acc[k][j]);
    }
  }
  for (; r < r1; r += kLanes) {
    const Strip s = strip_at(W, r, r1);
    F32x4 acc[1][kTokens];
    gemv_strips<Format, 1, kTokens>(&s, x.data(), dy, n_blocks, acc);
    for (int j = 0; j < kTokens; ++j) store_lanes(Y + j * W.n_out + r, s.n_rows, acc[0][j]);
  }
}

// gemv<Format, n_tok> for n_tok in [kTokens, kGemvMaxTokens]
template <typename Format, int kTokens = 1>
void gemv_n(int n_tok, const WeightView& W, const uint8_t* Xc, uint64_t x_row, const float* dy, int64_t n_blocks,
            float* Y, int64_t r0, int64_t r1) {
  if (n_tok == kTokens) return gemv<Format, kTokens>(W, Xc, x_row, dy, n_blocks, Y, r0, r1);
  if constexpr (kTokens < kGemvMaxTokens) gemv_n<Format, kTokens + 1>(n_tok, W, Xc, x_row, dy, n_blocks, Y, r0, r1);
}

#if LF_RELAXED_SIMD
// Block b of one token as lf_q4_0_strip_relaxed reads it: q[k] holds elements 4k..4k+3 of the
// block (k < 4) or 16+4(k-4)..19+4(k-4) (k >= 4) in every 32-bit lane, one row strip lane each;
// minus the 8·Σa that the unsigned nibbles overcount (where the kernel's dot products start);
// the token's scale in every lane.
struct StripTokenBlock {
  int8_t q[8][16];
  int32_t minus_offset[4];
  float dy[4];
};
static_assert(sizeof(StripTokenBlock) == 160, "the layout lf_q4_0_strip_relaxed reads");

// 32-bit lane k of v in every lane
template <int k>
v128_t lane_everywhere(v128_t v) {
  return wasm_i32x4_shuffle(v, v, k, k, k, k);
}

// Blocks [b0, b1) of Xc [n_tok, n_blocks] (Q8_0) -> out [b1 - b0][n_tok], once per call and
// column chunk
void pack_strip_activations(const uint8_t* Xc, uint64_t x_row, int n_tok, int64_t b0, int64_t b1,
                            StripTokenBlock* out) {
  for (int j = 0; j < n_tok; ++j) {
    const auto* xb = reinterpret_cast<const block_q8_0*>(Xc + x_row * static_cast<uint64_t>(j));
    for (int64_t b = b0; b < b1; ++b) {
      StripTokenBlock& r = out[(b - b0) * n_tok + j];
      const v128_t lo = wasm_v128_load(xb[b].qs), hi = wasm_v128_load(xb[b].qs + 16);
      const v128_t groups[8] = {lane_everywhere<0>(lo), lane_everywhere<1>(lo), lane_everywhere<2>(lo),
                                lane_everywhere<3>(lo), lane_everywhere<0>(hi), lane_everywhere<1>(hi),
                                lane_everywhere<2>(hi), lane_everywhere<3>(hi)};
      for (int k = 0; k < 8; ++k) wasm_v128_store(r.q[k], groups[k]);
      v128_t sum = wasm_i32x4_extadd_pairwise_i16x8(
          wasm_i16x8_add(wasm_i16x8_extadd_pairwise_i8x16(lo), wasm_i16x8_extadd_pairwise_i8x16(hi)));
      sum = wasm_i32x4_add(sum, wasm_i32x4_shuffle(sum, sum, 2, 3, 0, 1));
      sum = wasm_i32x4_add(sum, wasm_i32x4_shuffle(sum, sum, 1, 0, 3, 2));  // Σa in every lane
      wasm_v128_store(r.minus_offset, wasm_i32x4_mul(sum, wasm_i32x4_splat(-8)));
      wasm_v128_store(r.dy, wasm_f32x4_splat(fp16_to_fp32(xb[b].d)));
    }
  }
}

// The constants the .wat kernels read from memory
struct StripConstants {
  uint8_t nibble_mask[16];
  float two_112[4];              // 2^112: f32 exponent bias minus f16's
  uint32_t sign_exponent[4];     // clears bits 30..28 of a sign-extended half shifted left by 13
};
alignas(16) constexpr StripConstants kStripConstants = {{15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15},
                                                        {0x1p112f, 0x1p112f, 0x1p112f, 0x1p112f},
                                                        {0x8fffffffu, 0x8fffffffu, 0x8fffffffu, 0x8fffffffu}};

// Two strips per call up to here (lf_q4_0_strips_t8_relaxed): above, the one-strip kernel was as
// fast (docs/kernels.md, batched decode).
constexpr int kStripsMaxTokens = 8;

using StripsKernel = void (*)(const uint8_t* wa, const uint8_t* wb, const uint8_t* x, int32_t n_blocks, float* acc,
                              const void* consts);
// The two-strip kernel for n_tok tokens at [n_tok - 2]
constexpr StripsKernel kStripsKernels[kStripsMaxTokens - 1] = {
    lf_q4_0_strips_t2_relaxed, lf_q4_0_strips_t3_relaxed, lf_q4_0_strips_t4_relaxed, lf_q4_0_strips_t5_relaxed,
    lf_q4_0_strips_t6_relaxed, lf_q4_0_strips_t7_relaxed, lf_q4_0_strips_t8_relaxed};

// Strips per kernel call for n_tok tokens
constexpr int strips_per_call(int n_tok) { return n_tok == 1 ? 4 : n_tok <= kStripsMaxTokens ? 2 : 1; }

// Whether this engine fuses f32x4.relaxed_madd, which the .wat kernels' block step needs to be
// vec_dot_ref's: the spec lets an engine round the product first (V8 fuses on x86 with FMA3 and
// on ARM64). (1 + 2^-23)·(1 - 2^-23) - 1 is -2^-46 fused and 0 with the product rounded. The
// operands and the function pass through volatiles so that no compiler folds the call, nor
// inlines copies of the probe's relaxed_madd, which patch_relaxed_ops.mjs counts.
bool relaxed_madd_fused() {
  static const bool fused = [] {
    float (*volatile probe)(float, float, float) = lf_relaxed_madd_probe;
    volatile float a = 1.0f + 0x1p-23f, b = 1.0f - 0x1p-23f, c = -1.0f;
    return probe(a, b, c) == -0x1p-46f;
  }();
  return fused;
}

// The relaxed build's Q4_0 GEMM over row strips: per column chunk (its activations packed, which
// stay in cache while the strips stream through, and bound the packing's memory to about
// kStripChunkBytes), per strips_per_call strips, one call of the .wat kernels over all tokens;
// each output's running sum is carried through Y from chunk to chunk. A strip that [r0, r1) cuts
// is computed whole and only its rows in range are stored; a call's strips past the range's last
// repeat it and are not stored.
void gemm_strips(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                 int64_t r1) {
  const int64_t n_blocks = W.n_in / QK4_0;
  const int64_t chunk = std::min(
      n_blocks, std::max(kMinChunkBlocks, kStripChunkBytes / (int64_t{n_tok} * int64_t{sizeof(StripTokenBlock)})));
  // allocated without zeroing: every record of a chunk is written before it is read
  const std::unique_ptr<StripTokenBlock[]> x(new StripTokenBlock[static_cast<size_t>(chunk * n_tok)]);
  const int per_call = strips_per_call(n_tok);
  // acc [per_call][n_tok][4], written in the inner loop, with a cache line of padding on each
  // side: another thread's small allocation next to it would share its lines.
  constexpr size_t kPad = 64 / sizeof(float);
  const int64_t acc_strip = int64_t{n_tok} * kLanes;
  std::vector<float> scratch(kPad + static_cast<size_t>(per_call * acc_strip) + kPad);
  float* const acc = scratch.data() + kPad;
  const int64_t s_begin = r0 / kLanes, s_end = (r1 + kLanes - 1) / kLanes;
  // the rows of strip s inside [r0, r1), as lanes [i0, i1)
  const auto lanes_in_range = [&](int64_t s) {
    return std::pair{std::max<int64_t>(r0 - s * kLanes, 0), std::min<int64_t>(r1 - s * kLanes, kLanes)};
  };
  for (int64_t c0 = 0; c0 < n_blocks; c0 += chunk) {
    const int64_t c1 = std::min(c0 + chunk, n_blocks);
    const auto chunk_blocks = static_cast<int32_t>(c1 - c0);
    pack_strip_activations(Xc, x_row, n_tok, c0, c1, x.get());
    const auto* xc = reinterpret_cast<const uint8_t*>(x.get());
    const auto strip = [&](int64_t s) { return W.strip(s) + c0 * kLanes * int64_t{sizeof(block_q4_0)}; };
    for (int64_t s = s_begin; s < s_end; s += per_call) {
      const int n_stored = static_cast<int>(std::min<int64_t>(per_call, s_end - s));
      const auto call_strip = [&](int k) { return strip(s + std::min(k, n_stored - 1)); };
      for (int k = 0; k < per_call; ++k) {
        const auto [i0, i1] = lanes_in_range(s + k);
        for (int j = 0; j < n_tok; ++j) {
          for (int64_t i = 0; i < kLanes; ++i) {
            const bool carried = c0 > 0 && k < n_stored && i >= i0 && i < i1;
            acc[k * acc_strip + j * kLanes + i] = carried ? Y[j * W.n_out + (s + k) * kLanes + i] : 0.0f;
          }
        }
      }
      if (per_call == 4) {
        lf_q4_0_strips4_t1_relaxed(call_strip(0), call_strip(1), call_strip(2), call_strip(3), xc, chunk_blocks, acc,
                                   &kStripConstants);
      } else if (per_call == 2) {
        kStripsKernels[n_tok - 2](call_strip(0), call_strip(1), xc, chunk_blocks, acc, &kStripConstants);
      } else {
        lf_q4_0_strip_relaxed(strip(s), xc, n_tok, chunk_blocks, acc, &kStripConstants);
      }
      for (int k = 0; k < n_stored; ++k) {
        const auto [i0, i1] = lanes_in_range(s + k);
        for (int j = 0; j < n_tok; ++j) {
          for (int64_t i = i0; i < i1; ++i) Y[j * W.n_out + (s + k) * kLanes + i] = acc[k * acc_strip + j * kLanes + i];
        }
      }
    }
  }
}
#endif

// W [n_out, n_in] rows [r0, r1) · Xc (Q8_0 rows x_row bytes apart, from W's column 0) -> Y [n_tok, n_out]
template <typename Format>
void gemm(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0, int64_t r1) {
  const int64_t n_blocks = W.n_in / QK8_0;
  if (n_tok <= 0 || r0 >= r1) return;
  if (n_blocks == 0) {  // an empty column range sums to 0, as the reference's does
    for (int j = 0; j < n_tok; ++j) std::fill(Y + j * W.n_out + r0, Y + j * W.n_out + r1, 0.0f);
    return;
  }
#if LF_RELAXED_SIMD
  if constexpr (Format::kRelaxed) {
    if (W.in_row_strips()) {
      assert(relaxed_madd_fused());  // else gemm_uses_row_strips kept the file's layout
      return gemm_strips(W, Xc, x_row, n_tok, Y, r0, r1);
    }
  }
#endif
  assert(!W.in_row_strips());  // only where gemm_uses_row_strips
  // dy [n_tok, n_blocks]: converted once here rather than once per row strip.
  std::vector<float> dy(static_cast<size_t>(n_tok) * static_cast<size_t>(n_blocks));
  for (int j = 0; j < n_tok; ++j) {
    const auto* xb = reinterpret_cast<const block_q8_0*>(Xc + x_row * static_cast<uint64_t>(j));
    for (int64_t b = 0; b < n_blocks; ++b) dy[j * n_blocks + b] = fp16_to_fp32(xb[b].d);
  }
  if (n_tok <= kGemvMaxTokens) return gemv_n<Format>(n_tok, W, Xc, x_row, dy.data(), n_blocks, Y, r0, r1);
  const int64_t chunk = std::max(kMinChunkBlocks, kChunkActivationBytes / (int64_t{n_tok} * int64_t{sizeof(block_q8_0)}));
  for (int64_t c0 = 0; c0 < n_blocks; c0 += chunk) {
    const int64_t c1 = std::min(c0 + chunk, n_blocks);
    for (int64_t r = r0; r < r1; r += kLanes) {
      const Strip s = strip_at(W, r, r1);
      for (int j0 = 0; j0 < n_tok; j0 += kTileTokens) {
        const Tokens t{Xc + x_row * static_cast<uint64_t>(j0), x_row, dy.data() + j0 * n_blocks, n_blocks,
                       std::min(kTileTokens, n_tok - j0)};
        gemm_tile<Format>(s, t, c0, c1, c0 == 0, Y + j0 * W.n_out + r, W.n_out);
      }
    }
  }
}

}  // namespace

bool has_gemm_kernel(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return true;
    default: return false;
  }
}

void gemm_q8_0_strided(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                       int64_t r1) {
  assert((W.type == GgmlType::Q4_0 || W.type == GgmlType::Q8_0) && W.n_in % QK8_0 == 0);
  if (W.type == GgmlType::Q4_0) {
    gemm<Q4_0>(W, Xc, x_row, n_tok, Y, r0, r1);
  } else {
    gemm<Q8_0>(W, Xc, x_row, n_tok, Y, r0, r1);
  }
}

bool relaxed_kernels_run() {
#if LF_RELAXED_SIMD
  return relaxed_madd_fused();
#else
  return false;
#endif
}

bool gemm_uses_row_strips(GgmlType weight_type) { return relaxed_kernels_run() && weight_type == GgmlType::Q4_0; }

const char* gemm_kernel_isa() { return relaxed_kernels_run() ? "wasm-relaxed-simd" : kIsa; }

}  // namespace lf
