// The Q4_0 / Q8_0 GEMV for decode (kernels/gemm_q4_0_q8_0.h), built to stream the weights: the
// activations are split once per call into int16 even / odd elements (SplitBlock); two row
// strips (8 rows in flight) run side by side through all their blocks once; each weight block is
// split by shifts and masks inside 16-bit lanes (no widening; Q4_0's nibbles stay unsigned and
// the 8·Σa they overcount is subtracted once per block); each block's integer sums go straight
// into the f32 step.
#include <vector>

#include "kernels/gemm_q4_0_q8_0.h"

namespace lf::gemm_q4_0_q8_0 {
namespace {

constexpr int kGemvStrips = 2;  // row strips streamed side by side

// The f16 scales of block b of 4 rows -> f32 lanes, as fp16_to_fp32 converts each
template <typename Block>
F32x4 block_scales(const Block* const rows[kLanes], int64_t b) {
  return halves_to_f32(load_halves(&rows[0][b].d, &rows[1][b].d, &rows[2][b].d, &rows[3][b].d));
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
void gemv_tokens(const WeightView& W, const uint8_t* Xc, uint64_t x_row, const float* dy, int64_t n_blocks, float* Y,
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

// gemv_tokens<Format, n_tok> for n_tok in [kTokens, kGemvMaxTokens]
template <typename Format, int kTokens = 1>
void gemv_n(int n_tok, const WeightView& W, const uint8_t* Xc, uint64_t x_row, const float* dy, int64_t n_blocks,
            float* Y, int64_t r0, int64_t r1) {
  if (n_tok == kTokens) return gemv_tokens<Format, kTokens>(W, Xc, x_row, dy, n_blocks, Y, r0, r1);
  if constexpr (kTokens < kGemvMaxTokens) gemv_n<Format, kTokens + 1>(n_tok, W, Xc, x_row, dy, n_blocks, Y, r0, r1);
}

}  // namespace

template <typename Format>
void gemv(const WeightView& W, const uint8_t* Xc, uint64_t x_row, const float* dy, int64_t n_blocks, int n_tok,
          float* Y, int64_t r0, int64_t r1) {
  gemv_n<Format>(n_tok, W, Xc, x_row, dy, n_blocks, Y, r0, r1);
}

template void gemv<Q4_0>(const WeightView&, const uint8_t*, uint64_t, const float*, int64_t, int, float*, int64_t,
                         int64_t);
template void gemv<Q8_0>(const WeightView&, const uint8_t*, uint64_t, const float*, int64_t, int, float*, int64_t,
                         int64_t);

}  // namespace lf::gemm_q4_0_q8_0
