// GEMM of Q4_0 / Q8_0 weights with Q8_0 activations (src/kernels/gemm.h): which of the three
// algorithms of kernels/gemm_q4_0_q8_0.h runs a call. The relaxed-SIMD build (LF_RELAXED_SIMD)
// hands Q4_0 weights in row strips to its strip kernel; otherwise decode (up to kGemvMaxTokens
// tokens) takes the GEMV, which streams the weights, and prompts the tiled GEMM, which unpacks
// each weight block once for many tokens.
#include <algorithm>
#include <atomic>
#include <cassert>
#include <type_traits>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_q4_0_q8_0.h"

namespace lf {
namespace {

using gemm_q4_0_q8_0::Q4_0;
using gemm_q4_0_q8_0::Q8_0;

// set by the host once at load (choose_dot_form, set_dot_form), read by every worker's call
std::atomic<DotForm> g_dot_form{DotForm::dot_add};

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
  // Q8_0 weights use all 8 bits: they cannot be the relaxed dot's i7 operand.
  if constexpr (std::is_same_v<Format, Q4_0>) {
    if (W.in_row_strips()) {
      assert(gemm_q4_0_q8_0::relaxed_madd_fused());  // else gemm_uses_row_strips kept the file's layout
      return gemm_q4_0_q8_0::gemm_strips(dot_form(), W, Xc, x_row, n_tok, Y, r0, r1);
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
  if (n_tok <= gemm_q4_0_q8_0::kGemvMaxTokens) {
    return gemm_q4_0_q8_0::gemv<Format>(W, Xc, x_row, dy.data(), n_blocks, n_tok, Y, r0, r1);
  }
  gemm_q4_0_q8_0::gemm_tiles<Format>(W, Xc, x_row, dy.data(), n_blocks, n_tok, Y, r0, r1);
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
  return gemm_q4_0_q8_0::relaxed_madd_fused();
#else
  return false;
#endif
}

bool gemm_uses_row_strips(GgmlType weight_type) { return relaxed_kernels_run() && weight_type == GgmlType::Q4_0; }

const char* dot_form_name(DotForm form) { return form == DotForm::pairs ? "pairs" : "dot-add"; }

// The pairs form must win by this much: where the dot-add is one instruction (x86 with
// AVX-VNNI) it is the faster form by about 15%, and a noisy timing must not trade it away.
constexpr double kPairsMargin = 0.95;

DotFormChoice choose_dot_form() {
#if LF_RELAXED_SIMD
  if (relaxed_kernels_run()) {
    DotFormChoice seen = gemm_q4_0_q8_0::time_dot_forms();
    seen.form = seen.pairs_ms > 0 && seen.pairs_ms < kPairsMargin * seen.dot_add_ms ? DotForm::pairs : DotForm::dot_add;
    set_dot_form(seen.form);
    return seen;
  }
#endif
  return {dot_form(), 0.0, 0.0};
}

void set_dot_form(DotForm form) { g_dot_form.store(form, std::memory_order_relaxed); }

DotForm dot_form() { return g_dot_form.load(std::memory_order_relaxed); }

const char* gemm_kernel_isa() { return relaxed_kernels_run() ? "wasm-relaxed-simd" : simd::kIsa; }

}  // namespace lf
