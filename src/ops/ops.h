// Model-agnostic transformer ops, scalar and written to match llama.cpp's CPU backend
// (docs/gemma-architecture.md, "Primitive ops" and "CPU backend numerics"). One file per concern:
// ops/rmsnorm.cpp, ops/layernorm.cpp, ops/sincos.cpp, ops/rope.cpp, ops/gelu.cpp, ops/expf.cpp, ops/tanh.cpp,
// ops/silu.cpp, ops/softmax.cpp, ops/attention.cpp, ops/matmul.cpp.
// Optimized kernels are tested against these.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "kernels/kv_view.h"
#include "layout/weight_view.h"
#include "quant/quant.h"

namespace lf {

// --- RMSNorm (ops/rmsnorm.cpp) ---
// x [n] -> y [n] = (x · 1/sqrt(mean(x²) + eps)) ⊙ w; w == nullptr: no weight. Sum of squares in
// double as ggml does. y may alias x.
void rmsnorm(const float* x, const float* w, int n, float eps, float* y);
// x [n_rows, n] -> y [n_rows, n], each row normalized on its own (per head, per token).
void rmsnorm_rows(const float* x, const float* w, int n_rows, int n, float eps, float* y);

// --- LayerNorm (ops/layernorm.cpp) ---
// Without a bias (ggml_norm, AVX-512's sums): x [n] -> y [n] = (x - mean) · 1/sqrt(var + eps) ⊙ w;
// w == nullptr: no weight. y may alias x.
void layernorm(const float* x, const float* w, int n, float eps, float* y);

// --- the audio encoder's activations (ops/expf.cpp, ops/tanh.cpp, ops/silu.cpp) ---
// glibc's expf and tanhf, which llama.cpp's CPU backend calls, computed here bit for bit in
// every build (libm's differ between glibc, musl and wasi-libc): expf on all but 2 of the 2^32
// inputs (ops/expf.cpp), tanhf (fdlibm's, through its expm1f) on all.
float exp_f32(float x);
float tanh_f32(float x);
// 1/(1 + e^-x) as ggml_vec_sigmoid_f32, through exp_f32.
float sigmoid_f32(float x);
// x [n] -> y [n] = x / (1 + e^-x) as ggml_vec_silu_f32 on AVX-512: ggml_v_expf for each whole
// 16, exp_f32 for the tail.
void silu(const float* x, int n, float* y);

// --- sin / cos (ops/sincos.cpp) ---
// sinf(x) and cosf(x) as glibc computes them on an x86-64 CPU with FMA (llama.cpp's RoPE cache
// on its x86 hosts), the same bits in every build whatever its libm.
float sin_f32(float x);
float cos_f32(float x);

// --- RoPE, NEOX layout (ops/rope.cpp) ---
// x [n_head, head_dim] rotated in place at position pos: pairs (j, j + n_rot/2) for j < n_rot/2,
// angle (freq_scale · (pos · base^(-2j/n_rot) / freq_factors[j])) with the power iterated in f32
// as ggml does; dims >= n_rot untouched. freq_factors == nullptr: all 1.
void rope_neox(float* x, int n_head, int head_dim, int n_rot, int pos, float freq_base, float freq_scale,
               const float* freq_factors);

// --- Top-K selection (ops/top_k.cpp), for the top-K gate FFN (approx.h) ---
// a [n] -> keep [n], 1 for the k entries of largest |a| (ties to the lower index, NaN above
// everything), 0 elsewhere; returns the dropped share Σ_dropped |a| / Σ |a|, summed in f64 in
// index order (0 when Σ |a| is 0). keys is scratch.
double select_top_k(const float* a, int n, int k, std::vector<uint64_t>* keys, uint8_t* keep);

// --- GELU (ops/gelu.cpp) ---
float gelu_exact(float x);  // 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))) in f32
float gelu_table(float x);  // ggml CPU: 0 for x <= -10, x for x >= 10, else f16 table at f16(x)
// gate [n], up [n] -> out [n] = gelu_table(gate) · up (ggml_vec_geglu_f32)
void geglu(const float* gate, const float* up, int n, float* out);
float gelu_quick_exact(float x);  // x · 1/(1 + exp(-1.702·x)) in f32
float gelu_quick_table(float x);  // ggml CPU: f16 table at f16(x), every x (no cut-offs)
// gate [n], up [n] -> out [n] = gelu_quick_table(gate) · up (ggml_vec_geglu_quick_f32)
void geglu_quick(const float* gate, const float* up, int n, float* out);

// --- softmax and soft-cap (ops/softmax.cpp) ---
// x [n] in place: exp(x - max) / Σ, sum in double.
void softmax(float* x, int n);
// x [n] in place: cap · tanh(x · (1/cap)), the reciprocal taken once in f32.
void softcap(float* x, int n, float cap);

// --- attention (ops/attention.cpp) ---
// KvView, kv_head_for, key_visible and kScoreLanes are in kernels/kv_view.h, below both this
// reference and the kernels, which must agree on them.

// k [D] · q [D] (f16) -> the score's dot as llama.cpp's AVX-512 build sums it: the first
// D - D % 64 products into 64 f32 lanes (element i into lane i % 64), the lanes reduced by halves,
// the rest of the products added to that in double, the total rounded to f32.
float attention_score(const uint16_t* k, const uint16_t* q, int D);

// q [n_q, n_head, head_dim] at positions pos0 .. pos0+n_q-1 -> out [n_q, n_head, head_dim].
// llama.cpp's one-chunk flash-attention path (the one it takes for every cache type we hold):
// q converted to K's vec_dot type (f16, or Q8_0 blocks for a quantized K), s = the score·kq_scale,
// online softmax in f32, keys visited in increasing position, V accumulated in f16 when V is f16,
// in f32 (each value converted to f32, one fused step per element) when it is quantized. Each
// row sees the keys `mask` lets it; every one of them must be in the view (asserted).
void attention(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask, float kq_scale,
               float* out);

// --- attention as llama.cpp's tiled CPU flash attention computes it (ops/attention_f32_tiles.cpp) ---
// q [n_q, n_head, D] (f32) at positions pos0 .. pos0+n_q-1 · K, V (an f16 view) -> out [n_q,
// n_head, D], each row seeing the keys `mask` lets it (every one in the view): llama.cpp's tiled
// flash attention without softcap or sinks, which it runs for an f16 K/V call of 64 or more
// query rows when D is a multiple of 16 (docs/attention.md, "The f32 tile path"). Keys in tiles
// of kF32TileKeys from a multiple of it (llama.cpp's cells are the positions), over the call's
// keys (f32_tile_keys, kernels/kv_view.h); per query and head: each score one FMA chain over d
// from 0, times kq_scale, the keys the row does not see -inf; the tile's max M_new; at a new max
// the f32 accumulator and S scaled by expf(M - M_new); the weights expf_ggml(s - M) summed
// kExpLanes at a time into a double added to S; each value element one FMA chain over the
// tile's keys; out = acc · (1/S).
void attention_f32_tiles_ref(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                             float kq_scale, float* out);

// --- Hadamard rotation (ops/hadamard.cpp) ---
// x [n / block, block] in place: each block times the Sylvester Hadamard matrix of its size (a
// power of two) scaled by 1/sqrt(block), as llama.cpp rotates Q, K and V for a quantized cache
// (its own inverse: applying it twice gives x back up to rounding).
void hadamard_rotate(float* x, int n, int block);

// --- matmul (ops/matmul.cpp) ---
// X [n_tok, n_in] f32 -> Xc [n_tok, activation_row_bytes(W.type, n_in)] in W's vec_dot type.
// Done once per activation; every output row then reuses it.
Status convert_activations(const WeightView& W, const float* X, int n_tok, std::vector<uint8_t>* Xc);
// W [n_out, n_in] · Xc [n_tok, n_in] -> Y [n_tok, n_out], output rows [r0, r1) only, so the
// rows can be split across threads. Y row t is at Y + t·n_out. With [k0, k1) (multiples of the
// weight's block size; k1 = -1: n_in) only those input columns are summed: the product with a
// column slice of W.
void matmul_rows(const WeightView& W, const uint8_t* Xc, int n_tok, float* Y, int64_t r0, int64_t r1,
                 int64_t k0 = 0, int64_t k1 = -1);
// The same over all of W's columns, with the activations' row stride given apart from W.n_in:
// W may be a column slice of a wider weight (WeightView::columns);
// Xc then points at the slice's first column of token 0, and its rows are x_row bytes apart.
void matmul_rows_strided(const WeightView& W, const uint8_t* Xc, uint64_t x_row, int n_tok, float* Y, int64_t r0,
                         int64_t r1);
// W [n_out, n_in] · X [n_tok, n_in] -> Y [n_tok, n_out]: convert_activations + all rows.
Status matmul(const WeightView& W, const float* X, int n_tok, float* Y);

}  // namespace lf
