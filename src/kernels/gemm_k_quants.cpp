// GEMM of Q4_K / Q5_K / Q6_K weights with Q8_K activations (src/kernels/gemm.h).
//
// Bit-identical to vec_dot_ref: the reference sums q·q8·scale into 8 int32 lanes (lane =
// element index mod 8) per super-block, adds d·lane into 8 f32 sums, subtracts the Q4_K / Q5_K
// min term from a separate f32 sum, and adds the 8 sums at the very end. Here the 8 integer lanes
// are the 8 i16 lanes of the vectors of 8 consecutive elements, so the same lanes come out
// exactly, and the f32 steps are the reference's, two lanes of four at a time. Each weight
// super-block is unpacked once per row and applied to a tile of tokens.
#include <algorithm>
#include <cassert>

#include "kernels/simd.h"
#include "kernels/gemm.h"
#include "quant/quant.h"
#include "quant/unpack.h"

namespace lf {
namespace {

using namespace simd;

constexpr int kTileTokens = 16;
constexpr int kGroups = QK_K / 16;  // scale groups of 16 elements per super-block

// A weight super-block as integers: q [32 vectors of 8] in element order, the scale of each
// group of 16, and for Q4_K / Q5_K the min of each group.
struct KBlock {
  I16x8 q[QK_K / 8];
  int16_t scale[kGroups];
  int16_t min[kGroups];
  float d, dmin;
};

void widen_256(const int8_t q8[QK_K], I16x8 q[QK_K / 8]) {
  for (int v = 0; v < QK_K / 16; ++v) {
    const I8x16 bytes = load_i8x16(q8 + 16 * v);
    q[2 * v] = widen_lo(bytes);
    q[2 * v + 1] = widen_hi(bytes);
  }
}

// Q4_K and Q5_K: unsigned 4- or 5-bit quants, a 6-bit scale and min per 32 elements.
template <typename B, void (*Unpack)(const B&, int8_t*)>
struct KWithMins {
  using Block = B;
  static constexpr bool kMins = true;
  static void unpack(const Block& x, KBlock* k) {
    int8_t q[QK_K];
    Unpack(x, q);
    widen_256(q, k->q);
    for (int g = 0; g < kGroups; ++g) {
      const ScaleMin sm = scale_min_k4(x.scales, g / 2);
      k->scale[g] = static_cast<int16_t>(sm.scale);
      k->min[g] = static_cast<int16_t>(sm.min);
    }
    k->d = fp16_to_fp32(x.d);
    k->dmin = fp16_to_fp32(x.dmin);
  }
};
using Q4_K = KWithMins<block_q4_K, unpack_q4_K>;
using Q5_K = KWithMins<block_q5_K, unpack_q5_K>;

struct Q6_K {
  using Block = block_q6_K;
  static constexpr bool kMins = false;
  static void unpack(const Block& x, KBlock* k) {
    int8_t q[QK_K];
    unpack_q6_K(x, q);
    widen_256(q, k->q);
    for (int g = 0; g < kGroups; ++g) k->scale[g] = x.scales[g];
    k->d = fp16_to_fp32(x.d);
    k->dmin = 0.0f;
  }
};

// The reference's running state of one output: 8 lane sums and the min-term sum.
struct Sums {
  F32x4 lo, hi;
  float sumf;
};

// w · y over one super-block -> lanes [8] as two I32x4. Each i16 product pair is at most
// 2·32·128 in magnitude (Q6_K's q in [-32, 31], Q5_K's in [0, 31], q8 in [-128, 127]): exact in 16 bits.
void lanes_of(const KBlock& w, const block_q8_K& y, I32x4* lo, I32x4* hi) {
  I32x4 l = make_i32(0, 0, 0, 0), h = l;
  for (int g = 0; g < kGroups; ++g) {
    const I8x16 a = load_i8x16(y.qs + 16 * g);
    const I16x8 p = add(mul(w.q[2 * g], widen_lo(a)), mul(w.q[2 * g + 1], widen_hi(a)));
    const I16x8 s = splat_i16(w.scale[g]);
    l = add(l, mul_widen_lo(p, s));
    h = add(h, mul_widen_hi(p, s));
  }
  *lo = l;
  *hi = h;
}

// W [n_out, n_in] rows [r0, r1) · Xc (Q8_K rows x_row bytes apart, from W's column 0) -> Y [n_tok, n_out]
template <typename Format>
void gemm(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0, int64_t r1) {
  using Block = typename Format::Block;
  const int64_t n_blocks = W.n_in / QK_K;
  KBlock w;
  Sums acc[kTileTokens];
  for (int64_t r = r0; r < r1; ++r) {
    const auto* row = reinterpret_cast<const Block*>(W.row(r));
    for (int j0 = 0; j0 < n_tok; j0 += kTileTokens) {
      const int n = std::min(kTileTokens, n_tok - j0);
      for (int j = 0; j < n; ++j) acc[j] = {splat(0.0f), splat(0.0f), 0.0f};
      for (int64_t b = 0; b < n_blocks; ++b) {
        Format::unpack(row[b], &w);
        for (int j = 0; j < n; ++j) {
          const block_q8_K& y = reinterpret_cast<const block_q8_K*>(Xc + x_row * static_cast<uint64_t>(j0 + j))[b];
          I32x4 lo, hi;
          lanes_of(w, y, &lo, &hi);
          const F32x4 d = splat(w.d * y.d);
          acc[j].lo = add(acc[j].lo, mul(d, to_f32(lo)));
          acc[j].hi = add(acc[j].hi, mul(d, to_f32(hi)));
          if constexpr (Format::kMins) {
            int32_t min_term = 0;
            for (int g = 0; g < kGroups; ++g) min_term += y.bsums[g] * w.min[g];
            acc[j].sumf -= (w.dmin * y.d) * static_cast<float>(min_term);
          }
        }
      }
      for (int j = 0; j < n; ++j) {
        float lanes[8];
        store(lanes, acc[j].lo);
        store(lanes + 4, acc[j].hi);
        float sumf = acc[j].sumf;
        for (const float lane : lanes) sumf += lane;
        Y[static_cast<int64_t>(j0 + j) * W.n_out + r] = sumf;
      }
    }
  }
}

}  // namespace

void gemm_q8_K_strided(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                       int64_t r1) {
  assert(W.n_in % QK_K == 0);
  switch (W.type) {
    case GgmlType::Q4_K: return gemm<Q4_K>(W, Xc, x_row, n_tok, Y, r0, r1);
    case GgmlType::Q5_K: return gemm<Q5_K>(W, Xc, x_row, n_tok, Y, r0, r1);
    case GgmlType::Q6_K: return gemm<Q6_K>(W, Xc, x_row, n_tok, Y, r0, r1);
    default: assert(!"gemm_q8_K_strided: not a K-quant with a kernel");
  }
}

}  // namespace lf
