// Fast matmul kernels for the weight types that matter (Gemma 4 QAT ships Q4_0; Q8_0, and the
// K-quants Q4_K / Q6_K of other files): GEMMs over tiles of output rows × up to 16 tokens, each
// weight block unpacked once per tile, integer block products in SIMD (WASM SIMD128, relaxed
// SIMD in the layerfold_mt_relaxed module, SSE2, or a scalar twin elsewhere).
// Results are bit-identical to a loop of vec_dot_ref: the integer sums are exact, and each
// output keeps the reference's f32 operations in the reference's order (vector lanes are
// different outputs, or the reference's own 8 K-quant lanes). docs/kernels.md has the design
// and numbers.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"
#include "layout/weight_view.h"

namespace lf {

// True for Q4_0, Q8_0 (gemm_q8_0_strided), Q4_K and Q6_K (gemm_q8_K_strided): matmul_rows
// hands these to the kernels.
bool has_gemm_kernel(GgmlType weight_type);

// W [n_out, n_in] (Q4_0 or Q8_0 / Q4_K or Q6_K) · Xc [n_tok, n_in] (Q8_0 / Q8_K rows) -> Y [n_tok,
// n_out], rows [r0, r1) only; Y row t is at Y + t·n_out. The activations' row stride x_row is
// given apart from W.n_in: W may be a column slice of a wider weight (WeightView::columns), Xc
// then points at the slice's first column of row 0 and its rows are x_row bytes apart.
void gemm_q8_0_strided(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                       int64_t r1);
void gemm_q8_K_strided(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                       int64_t r1);

// True for F32, F16 and BF16 (gemm_float_strided, src/kernels/gemm_float.cpp).
bool is_float_weight(GgmlType weight_type);

// W [n_out, n_in] (F32, F16 or BF16) · Xc [n_tok, n_in] (f32 rows, x_row bytes apart) -> Y
// [n_tok, n_out], rows [r0, r1): several rows' reference sums side by side.
void gemm_float_strided(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                        int64_t r1);

// acc [n] <- fma(a, b, acc) lane by lane, each as fma_f32 rounds it (src/kernels/madd_floats.cpp)
void madd_floats(float* acc, const float* a, const float* b, int64_t n);
// acc [n] <- acc + w·v lane by lane, the product and the sum each rounded to f32
void add_scaled_floats(float* acc, const float* v, float w, int64_t n);

// y [n] <- ggml_clamp's MAX(MIN(x, hi), lo) of each x [n], in vectors: the clamps around a
// clamped linear (Gemma 4's ClippableLinear), x == y allowed (src/kernels/clamp_floats.cpp)
void clamp_floats(const float* x, int64_t n, float lo, float hi, float* y);

// W [n_out, n_in] (F16, BF16, or F32) · X [n_tok, n_in] (f32 values, already rounded to f16 for an
// F16 W, to bf16 for a BF16 one, rows n_in apart) -> Y [n_tok, n_out], rows [r0, r1): each output
// summed as llamafile's tinyBLAS sums it on AVX-512 (with AVX512-BF16 for BF16), which is how
// llama.cpp multiplies a float weight outside its repacked buffers (an mmproj's): 16 f32 lanes,
// lane λ adding elements λ, λ + 16, ... in order by fused multiply-adds (BF16: in each 32, lane
// λ adding 2λ + 1, then 2λ, as _mm512_dpbf16_ps), then the lanes halved
// (src/kernels/gemm_lanes16.cpp). For W with n_in a multiple of 16 (BF16: 32) and n_out of 4
// (gemm_lanes16_fits), tinyBLAS's own conditions.
bool gemm_lanes16_fits(const WeightView& W);
void gemm_lanes16(const WeightView& W, const float* X, int n_tok, float* Y, int64_t r0, int64_t r1);
// One output of it, the scalar references: w [n] (f16) · x [n] (f16-valued floats), w [n] (bf16)
// · x [n] (bf16-valued floats; n a multiple of 32), and w [n] (f32) · x [n] through fma_f32; n a
// multiple of 16.
float dot_f16_lanes16_ref(const uint16_t* w, const float* x, int64_t n);
float dot_bf16_lanes16_ref(const uint16_t* w, const float* x, int64_t n);
float dot_f32_lanes16_ref(const float* w, const float* x, int64_t n);
// dot_f32_lanes16_ref in vectors, the same bits: a dot of two f32 rows as tinyBLAS takes it.
float dot_f32_lanes16(const float* w, const float* x, int64_t n);
// x [n] · y [n] as llama.cpp's AVX-512 ggml_vec_dot_f32 sums it, where tinyBLAS does not run (an
// f32 mul_mat whose output rows are not a multiple of 4): four vectors of 16 lanes, fused steps
// over each 64 elements, the vectors added (0 + 2, 1 + 3, then 0 + 1) and the lanes halved; n a
// multiple of 64. The scalar reference, and the same in vectors:
float dot_f32_ggml_ref(const float* x, const float* y, int64_t n);
float dot_f32_ggml(const float* x, const float* y, int64_t n);
// x [n] (bf16) · y [n] (bf16-valued floats) as ggml_vec_dot_bf16 sums it with AVX512-BF16: two
// accumulators of 16 lanes, each taking 32 elements of every 64 by _mm512_dpbf16_ps's steps
// (lane λ: element 2λ + 1, then 2λ), each halved and the two added in double; n a multiple of 64.
float dot_bf16_ggml(const uint16_t* x, const float* y, int64_t n);
// W [n_out, n_in] (F16, BF16 or F32) · X [n_tok, n_in] (f32 values, already rounded to f16 for an
// F16 W, to bf16 for a BF16 one) -> Y [n_tok, n_out], rows [r0, r1): the product as llama.cpp
// takes it where tinyBLAS declines (one token; src0's rows not in fours): ggml's vector dot per
// output (ggml_vec_dot_f16 has the same lanes as the f32 one, its f16 products exact in f32;
// dot_bf16_ggml). For W with n_in a multiple of 64 (gemm_ggml_fits).
bool gemm_ggml_fits(const WeightView& W);
void gemm_ggml(const WeightView& W, const float* X, int n_tok, float* Y, int64_t r0, int64_t r1);

// Whether the relaxed-SIMD kernels run: in the relaxed module where the engine fuses
// f32x4.relaxed_madd, on which their block step's bits rest (docs/kernels.md, "The fused step").
// Where it does not, the module keeps the file's layout and runs its SIMD128 kernels instead,
// the same bits; false in every other build.
bool relaxed_kernels_run();

// Whether this build's kernel for weight_type reads it in row strips (src/layout/row_strips.h):
// the relaxed-SIMD module's Q4_0 kernel does (where relaxed_kernels_run), and the loader lays
// such weights out in strips where it may rewrite them (ModelLoadOptions::relayout_in_place).
// Every build reads the file's layout too.
bool gemm_uses_row_strips(GgmlType weight_type);

// The relaxed kernels' two forms of the Q4_0 strips' integer products (docs/kernels.md, "Two
// forms of the dot product"): per 16 weights one i32 dot-add (one vpdpbusd on x86 with
// AVX-VNNI, else three instructions and a constant), or an i16 dot summed in i16 lanes and
// widened once per block (one pmaddubsw per 16 weights on every x86). The same exact sums,
// so the same bits: only the speed differs, by how the engine lowers them.
enum class DotForm { dot_add, pairs };
const char* dot_form_name(DotForm form);

// What choose_dot_form saw: each form's time over the same strips in cache (ms, the best of a
// few runs; 0 where the clock did not advance, as in an edge isolate) and what runs now.
struct DotFormChoice {
  DotForm form;
  double dot_add_ms, pairs_ms;
};

// Times both forms and runs the faster from then on (the dot-add form unless the pairs form is
// measurably faster); outside the relaxed kernels (relaxed_kernels_run false) times nothing.
// Called once by the host at load, before any forward; set_dot_form instead forces one.
DotFormChoice choose_dot_form();
void set_dot_form(DotForm form);
DotForm dot_form();

// Which backend the kernels run: "wasm-relaxed-simd" (where relaxed_kernels_run),
// "wasm-simd128", "sse2" or "scalar" (the Q4_0 kernel's; the others use the plain SIMD of the
// same build).
const char* gemm_kernel_isa();

}  // namespace lf
