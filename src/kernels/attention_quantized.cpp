// attention_tiled_quantized: lf::attention's arithmetic for a cache with a Q8_0 or Q4_0 K or V,
// reorganized as attention_tiled is: a block of keys' K rows unpacked and V rows converted once
// for a tile of (query row, query head) pairs sharing one KV head. Each pair keeps the
// reference's order over keys and its operations, so the bytes are the same (docs/attention.md,
// "Quantized cache").
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_steps.h"
#include "quant/quant.h"

#if LF_RELAXED_SIMD
// x · y over n_blocks blocks of 32 values, both widened by widen_for_dot, with their block
// scales: dot_q8_0's result, its f32 steps fused by f32x4.relaxed_madd (src/kernels/relaxed_simd.wat)
extern "C" float lf_attn_dot_q8_0_relaxed(const int16_t* x, const float* x_scale, const int16_t* y,
                                          const float* y_scale, int32_t n_blocks);
// v [32·i] <- dequantize_row's values of Q8_0 (kind 8) or Q4_0 (kind 4) blocks, i < n_blocks, up
// to the first with an infinite or NaN scale: returns how many it converted
extern "C" int32_t lf_kv_values_relaxed(const void* blocks, int32_t kind, float* v, int32_t n_blocks);
#endif

namespace lf {
namespace {

using namespace attn_steps;

// acc [D] <- madd_f32 of each queued key in order; the queue emptied.
void madd_keys(float* acc, WeightedKeys& keys, int D) {
#if LF_RELAXED_SIMD
  if (values_fused() && keys.n > 1 && D % 16 == 0) {
    lf_attn_madd_keys_relaxed(acc, keys.v, keys.w, keys.n, D);
    keys.n = 0;
    return;
  }
#endif
  for (int k = 0; k < keys.n; ++k) madd_f32(acc, keys.v[k], keys.w[k], D);
  keys.n = 0;
}

// One key of a dot's online softmax with an f32 accumulator (a quantized V): score s, value
// v [D] -> acc [D], running max M and running sum S, as ggml's ggml_vec_scale_f32 and
// ggml_vec_mad_f32 (fused on every x86 build of it that has FMA). D is a multiple of 32. A key
// below the running max only joins `queued`, as softmax_step's do (attention_steps.h).
void softmax_step_f32(float s, const float* v, int D, float* acc, float& M, float& S, WeightedKeys& queued) {
  if (s > M) {
    madd_keys(acc, queued, D);
    const float ms = expf(M - s);
    M = s;
    const simd::F32x4 scale = simd::splat(ms);
    for (int d = 0; d < D; d += 4) simd::store(acc + d, simd::mul(simd::load_f32x4(acc + d), scale));
    S = S * ms + 1.0f;
    madd_f32(acc, v, 1.0f, D);
  } else {
    const float vs = expf(s - M);
    if (queued.n == kKeyBlock) madd_keys(acc, queued, D);
    queued.push(v, nullptr, vs);
    if (!(vs < kSmallestNormal)) S += vs;  // S · 1 + vs, the same bits (kSmallestNormal)
  }
}

// x [n] with block scales x_scale (a K row unpack_kv_blocks unpacked) · y [n / 32] (the query
// in Q8_0) -> vec_dot_q8_0_lanes' result: its 8 lanes of 4 consecutive elements as two vectors,
// each lane's block sum added as that function adds it, then its pairwise reduction.
float dot_q8_0(const int8_t* x, const float* x_scale, const block_q8_0* y, int n) {
  static_assert(kVecDotLanes == 8, "two I32x4 of lanes per block");
  simd::F32x4 lanes_lo = simd::splat(0.0f), lanes_hi = lanes_lo;
  for (int b = 0; b < n / QK8_0; ++b) {
    simd::I16x8 xq[4], yq[4];
    simd::widen_32(simd::load_i8x16(x + b * QK8_0), simd::load_i8x16(x + b * QK8_0 + 16), xq);
    simd::widen_32(simd::load_i8x16(y[b].qs), simd::load_i8x16(y[b].qs + 16), yq);
    const simd::F32x4 d = simd::splat(x_scale[b] * fp16_to_fp32(y[b].d));
    const simd::I32x4 sums_lo = simd::add_pairs(simd::dot_pairs(xq[0], yq[0]), simd::dot_pairs(xq[1], yq[1]));
    const simd::I32x4 sums_hi = simd::add_pairs(simd::dot_pairs(xq[2], yq[2]), simd::dot_pairs(xq[3], yq[3]));
    lanes_lo = simd::fused_madd(sums_lo, d, lanes_lo);
    lanes_hi = simd::fused_madd(sums_hi, d, lanes_hi);
  }
  float lane[4];
  simd::store(lane, simd::add(lanes_lo, lanes_hi));
  return (lane[0] + lane[2]) + (lane[1] + lane[3]);
}

// A quantized V row -> v [D]: dequantize_row's values (the relaxed module's .wat converts the
// blocks it can, all of them unless a scale is infinite or NaN).
void load_quantized_values(GgmlType type, const void* row, int D, float* v) {
#if LF_RELAXED_SIMD
  if (lf_kv_values_relaxed(row, type == GgmlType::Q8_0 ? 8 : 4, v, D / QK8_0) == D / QK8_0) return;
#endif
  const Status converted = dequantize_row(type, row, v, D);
  assert(converted.ok());
  (void)converted;
}

#if LF_RELAXED_SIMD
// x [n] -> out [n] as int16, n a multiple of 16, in the order lf_attn_dot_q8_0_relaxed reads:
// of each 16 values the pairs (0, 1), (4, 5), (8, 9), (12, 13), then (2, 3), (6, 7), (10, 11),
// (14, 15), so that the i32x4.dot_i16x8_s of the two halves, added, holds in lane l the sum of
// the products of values 4l .. 4l+3, as dot_q8_0's lanes do.
void widen_for_dot(const int8_t* x, int16_t* out, int n) {
  for (int i = 0; i < n; i += 16) {
    const v128_t bytes = wasm_v128_load(x + i);
    const v128_t pairs = wasm_i8x16_shuffle(bytes, bytes, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    wasm_v128_store(out + i, wasm_i16x8_extend_low_i8x16(pairs));
    wasm_v128_store(out + i + 8, wasm_i16x8_extend_high_i8x16(pairs));
  }
}
#endif

// One tile: query rows [i0, i1) × the `group` query heads of KV head g.
class QuantizedTile : TileShape {
 public:
  QuantizedTile(const float* q, int pos0, int n_head, const KvView& kv, const KeyMask& mask, float kq_scale,
                AttentionWorkspace& ws, int g, int i0, int i1)
      : TileShape(q, pos0, n_head, kv, mask, kq_scale, ws, g, i0, i1) {}

  void run(float* out) {
    load_queries();
    const int first = first_key(), last = last_key();
    for (int pb = first; pb <= last; pb += kKeyBlock) {
      const int nb = std::min(kKeyBlock, last - pb + 1);
      load_keys(pb, nb);
      for (int i = i0_; i < i1_; ++i) {
        if (!sees_any(i, pb, nb)) continue;
        for (int hh = 0; hh < group_; ++hh) steps(dot_index(i, hh), i, pb, nb);
      }
    }
    store(out);
  }

 private:
  int n_dots() const { return (i1_ - i0_) * group_; }
  const int nb_ = D_ / QK8_0;

  // Whether a quantized K's scores take lf_attn_dot_q8_0_relaxed, on int16 rows.
  static bool dots_widened() {
#if LF_RELAXED_SIMD
    return values_fused();
#else
    return false;
#endif
  }

  void load_queries() {
    for (int i = i0_; i < i1_; ++i) {
      for (int hh = 0; hh < group_; ++hh) {
        const float* qd = q_ + q_offset(i, hh);
        const int j = dot_index(i, hh);
        if (kv_.k_type == GgmlType::F16) {
          load_query(qd, D_, ws_.q.data() + static_cast<int64_t>(j) * D_);
          continue;
        }
        block_q8_0* q8 = ws_.q8.data() + static_cast<int64_t>(j) * nb_;
        quantize_row_q8_0_x86(qd, q8, D_);
#if LF_RELAXED_SIMD
        if (dots_widened()) {
          for (int b = 0; b < nb_; ++b) {
            widen_for_dot(q8[b].qs, ws_.q16.data() + static_cast<int64_t>(j) * D_ + b * QK8_0, QK8_0);
            ws_.q_scale[j * nb_ + b] = fp16_to_fp32(q8[b].d);
          }
        }
#endif
      }
    }
    std::fill(ws_.acc.begin(), ws_.acc.begin() + static_cast<int64_t>(n_dots()) * D_, 0.0f);
    std::fill(ws_.max.begin(), ws_.max.begin() + n_dots(), -INFINITY);
    std::fill(ws_.sum.begin(), ws_.sum.begin() + n_dots(), 0.0f);
  }

  // Keys pb .. pb+nb-1: K transposed into a block as attention_tiled's (an f16 K) or unpacked
  // into k8 / k_scale (and k16 where the dots take it); V -> v [kKeyBlock, D] f32 (and v64 for
  // an f16 V).
  void load_keys(int pb, int nb) {
    if (kv_.k_type == GgmlType::F16) {
      load_keys_transposed(kv_, g_, pb, nb, ws_.k32.data(), ws_.k.data());
    } else {
      for (int b = 0; b < nb; ++b) {
        int8_t* k8 = ws_.k8.data() + static_cast<int64_t>(b) * D_;
        unpack_kv_blocks(kv_.k_type, kv_row(kv_, kv_.k, kv_.k_type, g_, pb + b), D_, k8, ws_.k_scale.data() + b * nb_);
#if LF_RELAXED_SIMD
        if (dots_widened()) widen_for_dot(k8, ws_.k16.data() + static_cast<int64_t>(b) * D_, D_);
#endif
      }
    }
    if (kv_.v_type == GgmlType::F16) {
      load_values(kv_, g_, pb, nb, ws_.v.data(), ws_.v64.data());
      return;
    }
    for (int b = 0; b < nb; ++b) {
      load_quantized_values(kv_.v_type, kv_row(kv_, kv_.v, kv_.v_type, g_, pb + b), D_, ws_.v.data() + static_cast<int64_t>(b) * D_);
    }
  }

  // Dot j's scores of the block's nb keys -> s [kKeyBlock].
  void scores(int j, int nb, float* s) {
    if (kv_.k_type == GgmlType::F16) {
      score_block(ws_.q.data() + static_cast<int64_t>(j) * D_, ws_.k.data(), D_, kq_scale_, s);
      return;
    }
    for (int b = 0; b < nb; ++b) {
      const int64_t row = static_cast<int64_t>(b) * D_;
#if LF_RELAXED_SIMD
      if (dots_widened()) {
        s[b] = lf_attn_dot_q8_0_relaxed(ws_.k16.data() + row, ws_.k_scale.data() + b * nb_,
                                        ws_.q16.data() + static_cast<int64_t>(j) * D_, ws_.q_scale.data() + j * nb_, nb_) *
               kq_scale_;
        continue;
      }
#endif
      s[b] = dot_q8_0(ws_.k8.data() + row, ws_.k_scale.data() + b * nb_, ws_.q8.data() + static_cast<int64_t>(j) * nb_, D_) *
             kq_scale_;
    }
  }

  // Dot j (query row i)'s steps for the keys load_keys loaded, in increasing position.
  void steps(int j, int i, int pb, int nb) {
    float s[kKeyBlock];
    scores(j, nb, s);
    float* acc = ws_.acc.data() + static_cast<int64_t>(j) * D_;
    const bool f16 = kv_.v_type == GgmlType::F16;
    WeightedKeys queued;
    for (int b = 0; b < nb; ++b) {
      if (!visible(pb + b, i)) continue;
      const int64_t vb = static_cast<int64_t>(b) * D_;
      if (f16) {
        softmax_step(s[b], ws_.v.data() + vb, ws_.v64.data() + vb, D_, acc, ws_.max[j], ws_.sum[j], queued);
      } else {
        softmax_step_f32(s[b], ws_.v.data() + vb, D_, acc, ws_.max[j], ws_.sum[j], queued);
      }
    }
    if (f16) {
      add_weighted_keys(acc, queued, D_);
    } else {
      madd_keys(acc, queued, D_);
    }
  }
};

}  // namespace

void attention_tiled_quantized(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                               float kq_scale, float* out, AttentionWorkspace* ws) {
  const int D = kv.head_dim;
  const int group = n_head / kv.n_head_kv;
  const int rows_per_tile = std::max(1, kTileDots / group);
  const size_t dots = static_cast<size_t>(rows_per_tile) * group, blocks = static_cast<size_t>(D / QK8_0);
  ws->fit(D, static_cast<int>(dots));
  ws->q8.resize(dots * blocks);
  ws->k8.resize(static_cast<size_t>(kKeyBlock) * D);
  ws->k_scale.resize(kKeyBlock * blocks);
  ws->q16.resize(dots * D);
  ws->k16.resize(static_cast<size_t>(kKeyBlock) * D);
  ws->q_scale.resize(dots * blocks);
  for (int g = 0; g < kv.n_head_kv; ++g) {
    for (int i0 = 0; i0 < n_q; i0 += rows_per_tile) {
      QuantizedTile(q, pos0, n_head, kv, mask, kq_scale, *ws, g, i0, std::min(n_q, i0 + rows_per_tile)).run(out);
    }
  }
}

}  // namespace lf
