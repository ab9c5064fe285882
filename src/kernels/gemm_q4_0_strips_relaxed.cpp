// The relaxed-SIMD build's Q4_0 kernel (kernels/gemm_q4_0_q8_0.h), over Q4_0 weights laid out
// in row strips (src/layout/row_strips.h) with kernels/relaxed_simd.wat, for any number of
// tokens: per column chunk the activations are packed (pack_strip_activations); one token
// (decode) runs four strips at a time, 2 to kStripsMaxTokens tokens (batched decode) two strips
// at a time through all tokens, every running sum in a register, and more tokens (prompts) one
// strip at a time; a row's products stay in its own lane, and each block's f32 step follows its
// integer sums at once. Empty outside the relaxed variants (wasm/targets.cmake).
#include "kernels/gemm_q4_0_q8_0.h"

#if LF_RELAXED_SIMD
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "base/elapsed.h"

// One W strip (Q4_0 in row strips, n_blocks blocks, finite scales) · X packed by
// pack_strip_activations (n_tok records per block) -> acc [n_tok][4], lane = row, each sum
// continued as vec_dot_ref forms it; consts: StripConstants. src/kernels/relaxed_simd.wat; its
// _pairs twin (each kernel here has one) forms the same integer sums another way (DotForm).
#define LF_STRIP_KERNEL(NAME) \
  extern "C" void NAME(const uint8_t* w, const uint8_t* x, int32_t n_tok, int32_t n_blocks, float* acc, const void* consts);
LF_STRIP_KERNEL(lf_q4_0_strip_relaxed)
LF_STRIP_KERNEL(lf_q4_0_strip_pairs_relaxed)
#undef LF_STRIP_KERNEL
// Strips wa, wb, wc and wd (as above) · one token -> acc [4][4], strip a's rows then b's...: the
// same sums with the token loop taken out, for decode: four strips share each activation load
// and give four weight streams. Written into the kernel at build time by
// wasm/gen_q4_0_strips_relaxed.mjs, as are the next ones and every _pairs twin.
#define LF_STRIPS4_KERNEL(NAME)                                                                                 \
  extern "C" void NAME(const uint8_t* wa, const uint8_t* wb, const uint8_t* wc, const uint8_t* wd, const uint8_t* x, \
                       int32_t n_blocks, float* acc, const void* consts);
LF_STRIPS4_KERNEL(lf_q4_0_strips4_t1_relaxed)
LF_STRIPS4_KERNEL(lf_q4_0_strips4_t1_pairs_relaxed)
#undef LF_STRIPS4_KERNEL
// Strips wa and wb · T = 2..8 tokens -> acc [2][T][4], strip a's tokens then b's: the same sums
// with the token count fixed per function, so that all 2·T running sums stay in registers, for
// batched decode.
#define LF_STRIPS_KERNEL(T)                                                                                    \
  extern "C" void lf_q4_0_strips_t##T##_relaxed(const uint8_t* wa, const uint8_t* wb, const uint8_t* x,       \
                                                int32_t n_blocks, float* acc, const void* consts);            \
  extern "C" void lf_q4_0_strips_t##T##_pairs_relaxed(const uint8_t* wa, const uint8_t* wb, const uint8_t* x, \
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

namespace lf::gemm_q4_0_q8_0 {
namespace {

constexpr int64_t kStripChunkBytes = 1024 * 1024;  // the strip kernel's packed activations: half of L2

// Block b of one token as the multi-strip kernels (decode, batched decode) read it: q[k] holds
// elements 4k..4k+3 of the block (k < 4) or 16+4(k-4)..19+4(k-4) (k >= 4) in every 32-bit lane,
// one row strip lane each; minus the 8·Σa that the unsigned nibbles overcount (where the
// kernel's dot products start); the token's scale in every lane.
struct SplatRecord {
  int8_t q[8][16];
  int32_t minus_offset[4];
  float dy[4];
};
static_assert(sizeof(SplatRecord) == 160, "the layout the multi-strip kernels read");

// The same as the one-strip kernels (prompts) read it: the block's 32 quants in element order,
// each group of 4 put in every lane as it is loaded (v128.load32_splat), then -8·Σa and dy. Each
// strip of a prompt reads the whole chunk of records from L2, and a quarter of the bytes makes
// 128-token prompts 10% faster on one thread and 17-20% on two (docs/kernels.md); the few
// records of the multi-strip kernels stay in L1, where the wider loads are faster.
struct QuantRecord {
  int8_t q[32];
  int32_t minus_offset;
  float dy;
};
static_assert(sizeof(QuantRecord) == 40, "the layout the one-strip kernels read");

// 32-bit lane k of v in every lane
template <int k>
v128_t lane_everywhere(v128_t v) {
  return wasm_i32x4_shuffle(v, v, k, k, k, k);
}

// Σa of the block whose quants are lo, hi, in every lane
v128_t block_sum(v128_t lo, v128_t hi) {
  v128_t sum = wasm_i32x4_extadd_pairwise_i16x8(
      wasm_i16x8_add(wasm_i16x8_extadd_pairwise_i8x16(lo), wasm_i16x8_extadd_pairwise_i8x16(hi)));
  sum = wasm_i32x4_add(sum, wasm_i32x4_shuffle(sum, sum, 2, 3, 0, 1));
  return wasm_i32x4_add(sum, wasm_i32x4_shuffle(sum, sum, 1, 0, 3, 2));
}

void pack_record(const block_q8_0& xb, SplatRecord& r) {
  const v128_t lo = wasm_v128_load(xb.qs), hi = wasm_v128_load(xb.qs + 16);
  const v128_t groups[8] = {lane_everywhere<0>(lo), lane_everywhere<1>(lo), lane_everywhere<2>(lo),
                            lane_everywhere<3>(lo), lane_everywhere<0>(hi), lane_everywhere<1>(hi),
                            lane_everywhere<2>(hi), lane_everywhere<3>(hi)};
  for (int k = 0; k < 8; ++k) wasm_v128_store(r.q[k], groups[k]);
  wasm_v128_store(r.minus_offset, wasm_i32x4_mul(block_sum(lo, hi), wasm_i32x4_splat(-8)));
  wasm_v128_store(r.dy, wasm_f32x4_splat(fp16_to_fp32(xb.d)));
}

void pack_record(const block_q8_0& xb, QuantRecord& r) {
  const v128_t lo = wasm_v128_load(xb.qs), hi = wasm_v128_load(xb.qs + 16);
  wasm_v128_store(r.q, lo);
  wasm_v128_store(r.q + 16, hi);
  r.minus_offset = -8 * wasm_i32x4_extract_lane(block_sum(lo, hi), 0);
  r.dy = fp16_to_fp32(xb.d);
}

// Blocks [b0, b1) of Xc [n_tok, n_blocks] (Q8_0) -> out [b1 - b0][n_tok], once per call and
// column chunk
template <typename Record>
void pack_strip_activations(const uint8_t* Xc, uint64_t x_row, int n_tok, int64_t b0, int64_t b1, Record* out) {
  for (int j = 0; j < n_tok; ++j) {
    const auto* xb = reinterpret_cast<const block_q8_0*>(Xc + x_row * static_cast<uint64_t>(j));
    for (int64_t b = b0; b < b1; ++b) pack_record(xb[b], out[(b - b0) * n_tok + j]);
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

constexpr uint16_t kHalfOne = 0x3c00;  // 1.0 as an f16

// Two strips per call up to here (lf_q4_0_strips_t8_relaxed): above, the one-strip kernel was as
// fast (docs/kernels.md, batched decode).
constexpr int kStripsMaxTokens = 8;

using StripKernel = void (*)(const uint8_t* w, const uint8_t* x, int32_t n_tok, int32_t n_blocks, float* acc,
                             const void* consts);
using Strips4Kernel = void (*)(const uint8_t* wa, const uint8_t* wb, const uint8_t* wc, const uint8_t* wd,
                               const uint8_t* x, int32_t n_blocks, float* acc, const void* consts);
using StripsKernel = void (*)(const uint8_t* wa, const uint8_t* wb, const uint8_t* x, int32_t n_blocks, float* acc,
                              const void* consts);

// One form's kernels: the general one-strip kernel, the one-token four-strip kernel, and the
// two-strip kernel for n_tok tokens at [n_tok - 2]
struct StripKernels {
  StripKernel one_strip;
  Strips4Kernel strips4_t1;
  StripsKernel strips[kStripsMaxTokens - 1];
};
constexpr StripKernels kDotAddKernels = {
    lf_q4_0_strip_relaxed,
    lf_q4_0_strips4_t1_relaxed,
    {lf_q4_0_strips_t2_relaxed, lf_q4_0_strips_t3_relaxed, lf_q4_0_strips_t4_relaxed, lf_q4_0_strips_t5_relaxed,
     lf_q4_0_strips_t6_relaxed, lf_q4_0_strips_t7_relaxed, lf_q4_0_strips_t8_relaxed}};
constexpr StripKernels kPairsKernels = {
    lf_q4_0_strip_pairs_relaxed,
    lf_q4_0_strips4_t1_pairs_relaxed,
    {lf_q4_0_strips_t2_pairs_relaxed, lf_q4_0_strips_t3_pairs_relaxed, lf_q4_0_strips_t4_pairs_relaxed,
     lf_q4_0_strips_t5_pairs_relaxed, lf_q4_0_strips_t6_pairs_relaxed, lf_q4_0_strips_t7_pairs_relaxed,
     lf_q4_0_strips_t8_pairs_relaxed}};

const StripKernels& kernels_of(DotForm form) { return form == DotForm::pairs ? kPairsKernels : kDotAddKernels; }

// Strips per kernel call for n_tok tokens
constexpr int strips_per_call(int n_tok) { return n_tok == 1 ? 4 : n_tok <= kStripsMaxTokens ? 2 : 1; }

}  // namespace

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

namespace {

// The relaxed build's Q4_0 GEMM over row strips, its activations packed as Record: per column
// chunk (its activations packed, which stay in cache while the strips stream through, and bound
// the packing's memory to about kStripChunkBytes), per strips_per_call strips, one call of the
// .wat kernels over all tokens; each output's running sum is carried through Y from chunk to
// chunk. A strip that [r0, r1) cuts is computed whole and only its rows in range are stored; a
// call's strips past the range's last repeat it and are not stored.
template <typename Record>
void gemm_strips_of(const StripKernels& kernels, const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok,
                    float* Y, int64_t r0, int64_t r1) {
  const int64_t n_blocks = W.n_in / QK4_0;
  const int64_t chunk =
      std::min(n_blocks, std::max(kMinChunkBlocks, kStripChunkBytes / (int64_t{n_tok} * int64_t{sizeof(Record)})));
  // allocated without zeroing: every record of a chunk is written before it is read
  const std::unique_ptr<Record[]> x(new Record[static_cast<size_t>(chunk * n_tok)]);
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
        kernels.strips4_t1(call_strip(0), call_strip(1), call_strip(2), call_strip(3), xc, chunk_blocks, acc,
                           &kStripConstants);
      } else if (per_call == 2) {
        kernels.strips[n_tok - 2](call_strip(0), call_strip(1), xc, chunk_blocks, acc, &kStripConstants);
      } else {
        kernels.one_strip(strip(s), xc, n_tok, chunk_blocks, acc, &kStripConstants);
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

}  // namespace

void gemm_strips(DotForm form, const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y,
                 int64_t r0, int64_t r1) {
  const StripKernels& kernels = kernels_of(form);
  if (strips_per_call(n_tok) == 1) return gemm_strips_of<QuantRecord>(kernels, W, Xc, x_row, n_tok, Y, r0, r1);
  gemm_strips_of<SplatRecord>(kernels, W, Xc, x_row, n_tok, Y, r0, r1);
}

// What choose_dot_form compares: per form, decode's four-strip kernel and the one-strip kernel
// over 16 tokens, on 16 strips of 64 blocks (74 KB, and 164 + 41 KB of activation records: in L2, so
// the instructions are timed, not the memory), about 0.15 ms a run; the forms alternate, 30 runs
// each, the best kept. So many because the first calls run V8's baseline code, which it
// replaces with optimized code compiled in the background after a few calls: with 5 runs one
// form was sometimes timed only before its replacement and lost to the slower one. The
// weights' scales are 1 and the tokens' too, every other byte varied: no subnormal or
// non-finite value slows one form's f32 step.
DotFormChoice time_dot_forms() {
  constexpr int kStrips = 16, kBlocks = 64, kTokens = 16, kDecodeRepeats = 24, kRuns = 30;
  constexpr int64_t kStripBytes = int64_t{kBlocks} * kLanes * int64_t{sizeof(block_q4_0)};
  std::vector<uint8_t> w(static_cast<size_t>(kStrips * kStripBytes));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  for (int64_t b = 0; b < int64_t{kStrips} * kBlocks; ++b) {  // a strip block: 4 f16 scales, then the quants
    for (int r = 0; r < kLanes; ++r) std::memcpy(&w[b * kLanes * sizeof(block_q4_0) + 2 * r], &kHalfOne, 2);
  }
  std::vector<block_q8_0> blocks(static_cast<size_t>(kBlocks * kTokens));
  for (size_t i = 0; i < blocks.size(); ++i) {
    for (int j = 0; j < 32; ++j) blocks[i].qs[j] = static_cast<int8_t>((i * 131 + j * 7) % 255 - 127);
    std::memcpy(&blocks[i].d, &kHalfOne, 2);
  }
  const auto* xb = reinterpret_cast<const uint8_t*>(blocks.data());
  std::vector<SplatRecord> splat(blocks.size());  // decode's kernel reads the first kBlocks as one token's
  std::vector<QuantRecord> quant(blocks.size());
  pack_strip_activations(xb, kBlocks * sizeof(block_q8_0), kTokens, 0, kBlocks, splat.data());
  pack_strip_activations(xb, kBlocks * sizeof(block_q8_0), kTokens, 0, kBlocks, quant.data());
  std::vector<float> acc(kTokens * kLanes * 4);
  const auto* x_splat = reinterpret_cast<const uint8_t*>(splat.data());
  const auto* x_quant = reinterpret_cast<const uint8_t*>(quant.data());
  const auto strip = [&](int s) { return w.data() + s * kStripBytes; };
  const auto run = [&](const StripKernels& k) {
    const Clock::time_point t0 = Clock::now();
    for (int r = 0; r < kDecodeRepeats; ++r) {
      for (int s = 0; s < kStrips; s += 4) {
        k.strips4_t1(strip(s), strip(s + 1), strip(s + 2), strip(s + 3), x_splat, kBlocks, acc.data(),
                     &kStripConstants);
      }
    }
    for (int s = 0; s < kStrips; ++s) k.one_strip(strip(s), x_quant, kTokens, kBlocks, acc.data(), &kStripConstants);
    return ms_since(t0);
  };
  DotFormChoice seen{DotForm::dot_add, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  for (int r = 0; r < kRuns; ++r) {
    seen.dot_add_ms = std::min(seen.dot_add_ms, run(kDotAddKernels));
    seen.pairs_ms = std::min(seen.pairs_ms, run(kPairsKernels));
  }
  return seen;
}

}  // namespace lf::gemm_q4_0_q8_0
#endif
