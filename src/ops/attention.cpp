#include <cassert>
#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {

// A product of two f16 values is exact in f32 (11 × 11 significant bits, |x| < 2^32), so each
// lane's fused multiply-add in ggml is this plain f32 add. The halving is GGML_F32x16_REDUCE: the
// accumulator pairs (lanes l and l + 32, then l and l + 16), then _mm512_reduce_add_ps's tree
// (l and l + 8, l + 4, l + 2, l + 1).
float attention_score(const uint16_t* k, const uint16_t* q, int D) {
  const int n_in_lanes = D - D % kScoreLanes;
  float lane[kScoreLanes] = {};
  for (int i = 0; i < n_in_lanes; ++i) lane[i % kScoreLanes] += fp16_to_fp32(k[i]) * fp16_to_fp32(q[i]);
  for (int half = kScoreLanes / 2; half >= 1; half /= 2) {
    for (int l = 0; l < half; ++l) lane[l] += lane[l + half];
  }
  double sum = lane[0];
  for (int i = n_in_lanes; i < D; ++i) sum += static_cast<double>(fp16_to_fp32(k[i]) * fp16_to_fp32(q[i]));
  return static_cast<float>(sum);
}

namespace {

// One (query row, query head)'s query as K's vec_dot type holds it: f16 values for an f16 K,
// Q8_0 blocks (llama.cpp's x86 quantize_row_q8_0) for a Q8_0 or Q4_0 K.
struct Query {
  std::vector<uint16_t> q16;        // [D]
  std::vector<block_q8_0> blocks;   // [D / 32]
  std::vector<int8_t> k;            // [D] scratch: a quantized key's values
  std::vector<float> k_scale;       // [D / 32] and its block scales

  Query(GgmlType k_type, int D) {
    if (k_type == GgmlType::F16) {
      q16.resize(D);
    } else {
      blocks.resize(D / QK8_0);
      k.resize(D);
      k_scale.resize(D / QK8_0);
    }
  }
  void load(const float* q, int D) {
    if (!q16.empty()) {
      for (int d = 0; d < D; ++d) q16[d] = fp32_to_fp16(q[d]);
    } else {
      quantize_row_q8_0_x86(q, blocks.data(), D);
    }
  }
  // k_row (one key in type) · the query -> its unscaled score.
  float score(GgmlType type, const uint8_t* k_row, int D) {
    if (type == GgmlType::F16) return attention_score(halves(k_row), q16.data(), D);
    unpack_kv_blocks(type, k_row, D, k.data(), k_scale.data());
    return vec_dot_q8_0_lanes(k.data(), k_scale.data(), blocks.data(), D);
  }
};

}  // namespace

// q [n_q, n_head, D] · K, V [positions, n_head_kv] rows in their types -> out [n_q, n_head, D]
// The reference: the engine runs attention_tiled (kernels/attention.cpp), which the [attention]
// tests hold to these bytes, so any change here is a change there.
void attention(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask, float kq_scale,
               float* out) {
  const int D = kv.head_dim;
  Query query(kv.k_type, D);
  // An f16 V's weighted sum is kept in f16, rounded after every key, as ggml's flash-attention
  // kernel does when V is f16 (docs/gemma-architecture.md, "Flash attention"). With Q8_0
  // activations downstream, the f16 vs f32 difference here would flip quantization roundings and
  // move next-token log-probabilities by several 1e-2 on synthetic models; matching it keeps us
  // within the oracle's bound. A quantized V is converted to f32 and summed in f32, as ggml does.
  const bool v_f16 = kv.v_type == GgmlType::F16;
  std::vector<uint16_t> v_acc(D);
  std::vector<float> acc32(D), v32(D);
  for (int i = 0; i < n_q; ++i) {
    const int p1 = pos0 + i;
    const int first_key = mask.first_key(p1), last_key = mask.last_key(p1);
    for (int h = 0; h < n_head; ++h) {
      const int64_t q_off = (static_cast<int64_t>(i) * n_head + h) * D;
      const int g = kv_head_for(h, n_head, kv.n_head_kv);
      query.load(q + q_off, D);

      // Online softmax as ggml's flash-attention kernel: running max M, running sum S.
      float M = -INFINITY;
      float S = 0.0f;
      for (int d = 0; d < D; ++d) v_acc[d] = 0;
      for (int d = 0; d < D; ++d) acc32[d] = 0.0f;
      for (int p0 = first_key; p0 <= last_key; ++p0) {
        if (!key_visible(p0, p1, mask)) continue;
        assert(p0 >= kv.first_pos && "key evicted from the ring before its last query ran");
        const float s = query.score(kv.k_type, kv_row(kv, kv.k, kv.k_type, g, p0), D) * kq_scale;
        const float M_old = M;
        float ms = 1.0f;  // rescales what was accumulated under the old max
        float vs = 1.0f;  // weight of this key's value
        if (s > M) {
          M = s;
          ms = expf(M_old - M);
          for (int d = 0; d < D; ++d) {
            if (v_f16) {
              v_acc[d] = fp32_to_fp16(fp16_to_fp32(v_acc[d]) * ms);
            } else {
              acc32[d] *= ms;
            }
          }
        } else {
          vs = expf(s - M);
        }
        const uint8_t* v = kv_row(kv, kv.v, kv.v_type, g, p0);
        if (v_f16) {
          for (int d = 0; d < D; ++d) {
            v_acc[d] = fp32_to_fp16(std::fma(fp16_to_fp32(halves(v)[d]), vs, fp16_to_fp32(v_acc[d])));
          }
        } else {
          const Status converted = dequantize_row(kv.v_type, v, v32.data(), D);
          assert(converted.ok());
          (void)converted;
          for (int d = 0; d < D; ++d) acc32[d] = fma_f32(v32[d], vs, acc32[d]);
        }
        S = S * ms + vs;
      }
      const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
      for (int d = 0; d < D; ++d) out[q_off + d] = (v_f16 ? fp16_to_fp32(v_acc[d]) : acc32[d]) * S_inv;
    }
  }
}

}  // namespace lf
