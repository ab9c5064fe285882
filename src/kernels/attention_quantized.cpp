// attention_tiled_quantized: lf::attention's arithmetic for a cache with a Q8_0 or Q4_0 K or V,
// reorganized so that a tile of (query row, query head) pairs sharing one KV head unpacks each
// K row and converts each V row once. Each pair keeps the reference's order over keys and its
// operations, so the bytes are the same (docs/attention.md, "Quantized cache").
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_steps.h"
#include "quant/quant.h"

namespace lf {
namespace {

using namespace attn_steps;

// One key of a dot's online softmax with an f32 accumulator (a quantized V): score s, value
// v [D] -> acc [D], running max M and running sum S, as ggml's ggml_vec_scale_f32 and
// ggml_vec_mad_f32 (fused on every x86 build of it that has FMA). D is a multiple of 32.
void softmax_step_f32(float s, const float* v, int D, float* acc, float& M, float& S) {
  const float M_old = M;
  float ms = 1.0f;
  float vs = 1.0f;
  if (s > M) {
    M = s;
    ms = expf(M_old - M);
    const simd::F32x4 scale = simd::splat(ms);
    for (int d = 0; d < D; d += 4) simd::store(acc + d, simd::mul(simd::load_f32x4(acc + d), scale));
  } else {
    vs = expf(s - M);
  }
  S = S * ms + vs;
  madd_f32(acc, v, vs, D);
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

// One tile: query rows [i0, i1) × the `group` query heads of KV head g.
class QuantizedTile : TileShape {
 public:
  QuantizedTile(const float* q, int pos0, int n_head, const KvView& kv, const KeyMask& mask, float kq_scale,
                AttentionWorkspace& ws, int g, int i0, int i1)
      : TileShape(q, pos0, n_head, kv, mask, kq_scale, ws, g, i0, i1) {}

  void run(float* out) {
    load_queries();
    for (int p = first_key(), last = last_key(); p <= last; ++p) {
      load_key(p);
      for (int i = i0_; i < i1_; ++i) {
        if (!visible(p, i)) continue;
        for (int hh = 0; hh < group_; ++hh) step(dot_index(i, hh));
      }
    }
    store(out);
  }

 private:
  int n_dots() const { return (i1_ - i0_) * group_; }
  const int nb_ = D_ / QK8_0;

  void load_queries() {
    for (int i = i0_; i < i1_; ++i) {
      for (int hh = 0; hh < group_; ++hh) {
        const float* qd = q_ + q_offset(i, hh);
        const int j = dot_index(i, hh);
        if (kv_.k_type == GgmlType::F16) {
          load_query(qd, D_, ws_.q.data() + static_cast<int64_t>(j) * D_);
        } else {
          quantize_row_q8_0_x86(qd, ws_.q8.data() + static_cast<int64_t>(j) * nb_, D_);
        }
      }
    }
    std::fill(ws_.acc.begin(), ws_.acc.begin() + static_cast<int64_t>(n_dots()) * D_, 0.0f);
    std::fill(ws_.max.begin(), ws_.max.begin() + n_dots(), -INFINITY);
    std::fill(ws_.sum.begin(), ws_.sum.begin() + n_dots(), 0.0f);
  }

  // Key p: K unpacked into k8 / k_scale (a quantized K) or alone in a block of attention_tiled's
  // transposed keys (an f16 K, scored as that kernel scores it); V -> v [D] f32 (and v64 for an
  // f16 V).
  void load_key(int p) {
    if (kv_.k_type == GgmlType::F16) {
      load_keys_transposed(kv_, g_, p, 1, ws_.k32.data(), ws_.k.data());
    } else {
      unpack_kv_blocks(kv_.k_type, kv_row(kv_, kv_.k, kv_.k_type, g_, p), D_, ws_.k8.data(), ws_.k_scale.data());
    }
    const uint8_t* v_row = kv_row(kv_, kv_.v, kv_.v_type, g_, p);
    if (kv_.v_type == GgmlType::F16) {
      halves_to_f32(halves(v_row), ws_.v.data(), D_);
      if (!values_fused()) promote(ws_.v.data(), ws_.v64.data(), D_);
    } else {
      const Status converted = dequantize_row(kv_.v_type, v_row, ws_.v.data(), D_);
      assert(converted.ok());
      (void)converted;
    }
  }

  // Dot j's steps for the key load_key loaded.
  void step(int j) {
    float s = 0.0f;
    if (kv_.k_type == GgmlType::F16) {
      float block[kKeyBlock];
      score_block(ws_.q.data() + static_cast<int64_t>(j) * D_, ws_.k.data(), D_, kq_scale_, block);
      s = block[0];
    } else {
      s = dot_q8_0(ws_.k8.data(), ws_.k_scale.data(), ws_.q8.data() + static_cast<int64_t>(j) * nb_, D_) * kq_scale_;
    }
    float* acc = ws_.acc.data() + static_cast<int64_t>(j) * D_;
    if (kv_.v_type == GgmlType::F16) {
      softmax_step(s, ws_.v.data(), ws_.v64.data(), D_, acc, ws_.max[j], ws_.sum[j]);
    } else {
      softmax_step_f32(s, ws_.v.data(), D_, acc, ws_.max[j], ws_.sum[j]);
    }
  }
};

}  // namespace

void attention_tiled_quantized(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                               float kq_scale, float* out, AttentionWorkspace* ws) {
  const int D = kv.head_dim;
  const int group = n_head / kv.n_head_kv;
  const int rows_per_tile = std::max(1, kTileDots / group);
  const size_t dots = static_cast<size_t>(rows_per_tile) * group;
  ws->fit(D, static_cast<int>(dots));
  ws->q8.resize(dots * (D / QK8_0));
  ws->k8.resize(D);
  ws->k_scale.resize(D / QK8_0);
  for (int g = 0; g < kv.n_head_kv; ++g) {
    for (int i0 = 0; i0 < n_q; i0 += rows_per_tile) {
      QuantizedTile(q, pos0, n_head, kv, mask, kq_scale, *ws, g, i0, std::min(n_q, i0 + rows_per_tile)).run(out);
    }
  }
}

}  // namespace lf
