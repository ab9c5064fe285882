// A plain draft step (docs/gemma-architecture.md, "The MTP drafter") for the tests: weights
// dequantized whole, products and the softmax in double, exact GELU, keys read from the target's
// cache. Independent of the engine's kernels, threads and shard plan.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "model/drafter.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace lf::test {

// W [n_out, n_in] · x [n_in] -> [n_out], each row dequantized and summed in double.
inline std::vector<float> ref_matvec(const WeightView& W, const std::vector<float>& x) {
  std::vector<float> y(static_cast<size_t>(W.n_out)), w(static_cast<size_t>(W.n_in));
  for (int64_t r = 0; r < W.n_out; ++r) {
    (void)dequantize_row(W.type, W.row(r), w.data(), W.n_in);
    double sum = 0;
    for (int64_t j = 0; j < W.n_in; ++j) sum += static_cast<double>(w[j]) * x[j];
    y[r] = static_cast<float>(sum);
  }
  return y;
}

inline std::vector<float> ref_norm(const std::vector<float>& x, const WeightView& w, float eps) {
  std::vector<float> y(x.size());
  rmsnorm(x.data(), w.f32(), static_cast<int>(x.size()), eps, y.data());
  return y;
}

// Query heads q [n_head, D] at position pos over the target's keys of layer kv_layer at
// positions < pos (within the window on sliding layers).
inline std::vector<float> ref_attention(const LayerConfig& l, int n_swa, const KvCache& kv, const std::vector<float>& q,
                                        int pos) {
  const int D = l.head_dim;
  const int first = l.sliding ? std::max(0, pos - n_swa + 1) : 0;
  std::vector<float> out(q.size());
  for (int h = 0; h < l.n_head; ++h) {
    const int g = h / (l.n_head / l.n_head_kv);
    const KvView view = kv.view(l.kv_layer, g, pos);  // KV head g's slots alone
    std::vector<double> score;
    for (int p = first; p < pos; ++p) {
      const uint16_t* k = halves(view.k) + static_cast<size_t>(p % view.capacity) * D;  // an f16 cache
      double s = 0;
      for (int d = 0; d < D; ++d) s += static_cast<double>(q[h * D + d]) * fp16_to_fp32(k[d]);
      score.push_back(s);
    }
    double max = -INFINITY, total = 0;
    for (double s : score) max = std::max(max, s);
    for (double& s : score) total += (s = std::exp(s - max));
    for (int d = 0; d < D; ++d) {
      double acc = 0;
      for (int p = first; p < pos; ++p) {
        const uint16_t* v = halves(view.v) + static_cast<size_t>(p % view.capacity) * D;
        acc += score[p - first] * fp16_to_fp32(v[d]);
      }
      out[h * D + d] = static_cast<float>(acc / total);
    }
  }
  return out;
}

struct RefDraft {
  std::vector<float> logits, h_next;
};

inline RefDraft ref_draft_step(const Drafter& dr, const Session& target, int32_t token, const std::vector<float>& h) {
  const Model& m = dr.model;
  const ModelConfig& c = m.config;
  const int B = dr.n_embd_backbone, pos = target.n_past();
  std::vector<float> xh(2 * static_cast<size_t>(B));
  (void)dequantize_row(dr.target_embd.type, dr.target_embd.row(token), xh.data(), B);
  for (int j = 0; j < B; ++j) xh[j] *= std::sqrt(static_cast<float>(B));
  for (int j = 0; j < B; ++j) xh[B + j] = h[j];
  std::vector<float> x = ref_matvec(dr.pre_projection, xh);
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerConfig& l = c.layers[il];
    const LayerWeights& w = m.layer(il);
    std::vector<float> q = ref_matvec(w.attn_q, ref_norm(x, w.attn_norm, c.norm_eps));
    rmsnorm_rows(q.data(), w.attn_q_norm.f32(), l.n_head, l.head_dim, c.norm_eps, q.data());
    rope_neox(q.data(), l.n_head, l.head_dim, l.n_rot, pos, l.rope_base, l.rope_freq_scale,
              l.use_freq_factors ? m.rope_freqs.f32() : nullptr);
    const std::vector<float> attn = ref_matvec(w.attn_output, ref_attention(l, c.n_swa, target.kv, q, pos));
    std::vector<float> x1 = ref_norm(attn, w.post_attention_norm, c.norm_eps);
    for (size_t j = 0; j < x1.size(); ++j) x1[j] += x[j];
    const std::vector<float> f = ref_norm(x1, w.ffn_norm, c.norm_eps);
    const std::vector<float> gate = ref_matvec(w.ffn_gate, f), up = ref_matvec(w.ffn_up, f);
    std::vector<float> act(gate.size());
    for (size_t j = 0; j < act.size(); ++j) act[j] = gelu_exact(gate[j]) * up[j];
    x = ref_norm(ref_matvec(w.ffn_down, act), w.post_ffw_norm, c.norm_eps);
    for (size_t j = 0; j < x.size(); ++j) x[j] = (x[j] + x1[j]) * w.layer_output_scale.f32()[0];
  }
  const std::vector<float> normed = ref_norm(x, m.output_norm, c.norm_eps);
  return {ref_matvec(m.output, normed), ref_matvec(dr.post_projection, normed)};
}

}  // namespace lf::test
