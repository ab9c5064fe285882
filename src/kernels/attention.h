// The fast attention kernel: the bytes of lf::attention (ops.h), which stays the reference, with
// each K/V row loaded and converted once for a tile of queries and the arithmetic in SIMD
// (docs/attention.md says how and why the result is bit-identical).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kv_view.h"
#include "kernels/truncation_stats.h"
#include "quant/quant.h"

namespace lf {

// Buffers of attention_tiled for one worker: sized by the call, reused across calls, so a
// worker allocates only when a layer's head dim grows. Contents are the kernel's business.
struct AttentionWorkspace {
  std::vector<float> q;        // [tile dots, D] the tile's queries, rounded to f16
  std::vector<float> k32;      // [key block, D] a block of keys
  std::vector<float> k;        // [D, key block] the same keys, transposed (f32 tiles: a KV head's, tile by tile)
  std::vector<float> v;        // [key block, D] the block's values (f32 tiles: the KV head's)
  std::vector<double> v64;     // [key block, D] the same values in f64, for the exact FMA
  std::vector<float> acc;      // [tile dots, D] the f16 value accumulators, held as f32
  std::vector<float> scores;   // [tile dots, key block]
  std::vector<float> max, sum;  // [tile dots] online softmax: running max M and sum S
  // attention_truncated only:
  std::vector<float> row_scores;   // [tile dots, key span] every score of the tile's keys
  std::vector<float> selection;    // [key span] one row's scores, reordered to find the median
  std::vector<uint16_t> v_max;     // [key span] max |v| of each key, as f16 magnitude bits
  std::vector<float> keep_above;   // [tile dots] a truncated row keeps the keys scoring above this
  std::vector<uint8_t> keeps_all;  // [tile dots] 1: the row runs the exact computation
  // a quantized K or V only (kernels/attention_quantized.cpp):
  std::vector<block_q8_0> q8;     // [tile dots, D / 32] the tile's queries in K's vec_dot type (q above for an f16 K)
  std::vector<int8_t> k8;         // [key block, D] a block of keys' values
  std::vector<float> k_scale;     // [key block, D / 32] and their block scales
  // the same widened to int16 in the relaxed module's dot order, and the queries' block scales
  std::vector<int16_t> q16, k16;  // [tile dots, D], [key block, D]
  std::vector<float> q_scale;     // [tile dots, D / 32]

  // Sizes the buffers both kernels share for head dim D and tiles of tile_dots dots.
  void fit(int D, int tile_dots);
};

// q [n_q, n_head, D] at positions pos0 .. pos0+n_q-1 · K, V (kv) -> out [n_q, n_head, D]:
// attention() with the same arguments, byte for byte (NaN outputs stay NaN, their sign bit
// unspecified). Any head dim with an f16 cache, a multiple of 32 with a quantized K or V (which
// attention_tiled_quantized runs); every key `mask` lets a query see must be in the view (asserted).
void attention_tiled(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                     float kq_scale, float* out, AttentionWorkspace* ws);

// attention_tiled for a view with a Q8_0 or Q4_0 K or V: each key's K row unpacked and its V row
// converted once for a tile of dots sharing its KV head, then each dot's steps as attention()'s.
void attention_tiled_quantized(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                               float kq_scale, float* out, AttentionWorkspace* ws);

// attention_tiled with each (query row, query head) row's softmax truncated
// (docs/approximate.md): q [n_q, n_head, D] · K, V (kv) -> out [n_q, n_head, D], stats += what
// it did. A row's visible scores are the exact kernel's; keys scoring at most the row's median
// leave the softmax and the V sum, unless their share of the softmax mass exceeds
// max_dropped_mass (in [0, 1]) or nothing would be kept: then the row's bytes are
// attention_tiled's. Kept keys run attention_tiled's steps in increasing position, so a row
// whose dropped keys all have weight 0 there gives its bytes too (up to the sign of zeros).
void attention_truncated(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                         float kq_scale, float max_dropped_mass, float* out, AttentionWorkspace* ws, TruncationStats* stats);

// Whether llama.cpp's CPU flash attention (AVX-512) takes its f32 tile path for an f16 K/V call
// of n_q query rows and head dim D: from 64 rows, D a multiple of 16.
bool takes_f32_tiles(int n_q, int D);
// attention_f32_tiles_ref (ops.h: llama.cpp's tiled flash attention) with the same arguments,
// byte for byte: an f16 K and V, D a multiple of 16.
void attention_f32_tiles(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                         float kq_scale, float* out, AttentionWorkspace* ws);

// Its building blocks, exposed for the tests (each equals the scalar expression named):
// x [16] <- expf_ggml(x - max) each, returning sum_exp_lanes (kernels/exp_ggml.h): in vectors.
float sum_exp_lanes_simd(float* x, float max);
// h [n] f16 -> f [n] f32: fp16_to_fp32 of each.
void halves_to_floats(const uint16_t* h, float* f, int n);
// x [n] -> y [n]: fp16_to_fp32(fp32_to_fp16(x)) of each (the f16 accumulator, held as f32).
void round_floats_to_halves(const float* x, float* y, int n);
// acc [n] (f16 values as f32), v [n] (f16 values as f32) -> acc[i] = f16(std::fma(v[i], w, acc[i]))
void accumulate_weighted_value(float* acc, const float* v, float w, int n);

}  // namespace lf
