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

// q [n_q, n_head, D] · K, V [positions, n_head_kv, D] (f16) -> out [n_q, n_head, D]
// The reference: the engine runs attention_tiled (kernels/attention.cpp), which the [attention]
// tests hold to these bytes, so any change here is a change there.
void attention(const float* q, int n_q, int pos0, int n_head, const KvView& kv, int n_swa, float kq_scale, float* out) {
  const int D = kv.head_dim;
  std::vector<uint16_t> q16(D);
  // The weighted sum of values is kept in f16, rounded after every key, as ggml's flash-attention
  // kernel does when V is f16 (docs/gemma-architecture.md, "Flash attention"). With Q8_0
  // activations downstream, the f16 vs f32 difference here would flip quantization roundings and
  // move next-token log-probabilities by several 1e-2 on synthetic models; matching it keeps us
  // within the oracle's bound.
  std::vector<uint16_t> v_acc(D);
  for (int i = 0; i < n_q; ++i) {
    const int p1 = pos0 + i;
    const int first_key = n_swa > 0 ? (p1 - n_swa + 1 > 0 ? p1 - n_swa + 1 : 0) : 0;
    for (int h = 0; h < n_head; ++h) {
      const int64_t q_off = (static_cast<int64_t>(i) * n_head + h) * D;
      const int g = kv_head_for(h, n_head, kv.n_head_kv);
      for (int d = 0; d < D; ++d) q16[d] = fp32_to_fp16(q[q_off + d]);

      // Online softmax as ggml's flash-attention kernel: running max M, running sum S.
      float M = -INFINITY;
      float S = 0.0f;
      for (int d = 0; d < D; ++d) v_acc[d] = 0;
      for (int p0 = first_key; p0 <= p1; ++p0) {
        if (!key_visible(p0, p1, n_swa)) continue;
        assert(p0 >= kv.first_pos && "key evicted from the ring before its last query ran");
        const int64_t off = (static_cast<int64_t>(p0 % kv.capacity) * kv.n_head_kv + g) * D;
        const float s = attention_score(kv.k + off, q16.data(), D) * kq_scale;
        const float M_old = M;
        float ms = 1.0f;  // rescales what was accumulated under the old max
        float vs = 1.0f;  // weight of this key's value
        if (s > M) {
          M = s;
          ms = expf(M_old - M);
          for (int d = 0; d < D; ++d) v_acc[d] = fp32_to_fp16(fp16_to_fp32(v_acc[d]) * ms);
        } else {
          vs = expf(s - M);
        }
        const uint16_t* v = kv.v + off;
        for (int d = 0; d < D; ++d) v_acc[d] = fp32_to_fp16(std::fma(fp16_to_fp32(v[d]), vs, fp16_to_fp32(v_acc[d])));
        S = S * ms + vs;
      }
      const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
      for (int d = 0; d < D; ++d) out[q_off + d] = fp16_to_fp32(v_acc[d]) * S_inv;
    }
  }
}

}  // namespace lf
