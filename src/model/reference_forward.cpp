#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/kv_shipping.h"
#include "model/reference_forward.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {
namespace {

using Matrix = std::vector<float>;  // [rows, cols], row-major

// W [n_out, n_in] (any type) -> f32 [n_out, n_in]
Status dequantize(const WeightView& W, Matrix* out) {
  out->resize(static_cast<size_t>(W.n_out) * static_cast<size_t>(W.n_in));
  for (int64_t r = 0; r < W.n_out; ++r) {
    LF_RETURN_IF_ERROR(dequantize_row(W.type, W.row(r), out->data() + static_cast<size_t>(r) * W.n_in, W.n_in));
  }
  return Status();
}

// W [n_out, n_in] · X [n, n_in] -> Y [n, n_out]
Status linear(const WeightView& W, const Matrix& X, int n, Matrix* Y) {
  Matrix w;
  LF_RETURN_IF_ERROR(dequantize(W, &w));
  const size_t n_in = static_cast<size_t>(W.n_in), n_out = static_cast<size_t>(W.n_out);
  Y->assign(static_cast<size_t>(n) * n_out, 0.0f);
  for (size_t t = 0; t < static_cast<size_t>(n); ++t) {
    for (size_t o = 0; o < n_out; ++o) {
      double sum = 0.0;
      for (size_t i = 0; i < n_in; ++i) sum += static_cast<double>(w[o * n_in + i]) * X[t * n_in + i];
      (*Y)[t * n_out + o] = static_cast<float>(sum);
    }
  }
  return Status();
}

// q [n, n_head, D], k, v [n, n_kv, D] -> out [n, n_head, D]; the keys mask lets each query see.
void attend(const Matrix& q, const Matrix& k, const Matrix& v, int n, const LayerConfig& l, const KeyMask& mask, Matrix* out) {
  const int D = l.head_dim;
  out->assign(q.size(), 0.0f);
  std::vector<float> p(n);
  for (int i = 0; i < n; ++i) {
    for (int h = 0; h < l.n_head; ++h) {
      const int g = kv_head_for(h, l.n_head, l.n_head_kv);
      const float* qh = &q[(static_cast<size_t>(i) * l.n_head + h) * D];
      for (int j = 0; j < n; ++j) {
        const float* kj = &k[(static_cast<size_t>(j) * l.n_head_kv + g) * D];
        double s = 0.0;
        for (int d = 0; d < D; ++d) s += static_cast<double>(qh[d]) * kj[d];
        p[j] = key_visible(j, i, mask) ? static_cast<float>(s) : -INFINITY;
      }
      softmax(p.data(), n);
      float* oh = &(*out)[(static_cast<size_t>(i) * l.n_head + h) * D];
      for (int j = 0; j < n; ++j) {
        const float* vj = &v[(static_cast<size_t>(j) * l.n_head_kv + g) * D];
        for (int d = 0; d < D; ++d) oh[d] += p[j] * vj[d];
      }
    }
  }
}

// K and V of each layer with a cache of its own, for the shared-KV layers that read them.
struct LayerKv {
  Matrix k, v;
};

// x [n, n_embd] after the FFN residual of layer il, inp [n, n_pl] its per-layer input:
// x += RMSNorm(proj · (gelu(inp_gate · x) ⊙ inp)) ⊙ post_norm
Status per_layer_branch(const Model& m, const LayerWeights& w, const float* inp, int n, Matrix* x) {
  const ModelConfig& c = m.config;
  Matrix gate, branch;
  LF_RETURN_IF_ERROR(linear(w.inp_gate, *x, n, &gate));
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = gelu_exact(gate[i]) * inp[i];
  LF_RETURN_IF_ERROR(linear(w.proj, gate, n, &branch));
  rmsnorm_rows(branch.data(), w.post_norm.f32(), n, c.n_embd, c.norm_eps, branch.data());
  for (size_t i = 0; i < branch.size(); ++i) (*x)[i] += branch[i];
  return Status();
}

// f [n, n_in] -> out [n, n_out] = W_down · (gelu(W_gate · f) ⊙ (W_up · f))
Status geglu_ffn(const WeightView& gate_w, const WeightView& up_w, const WeightView& down_w, const Matrix& f, int n,
                 Matrix* out) {
  Matrix gate, up;
  LF_RETURN_IF_ERROR(linear(gate_w, f, n, &gate));
  LF_RETURN_IF_ERROR(linear(up_w, f, n, &up));
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = gelu_exact(gate[i]) * up[i];
  return linear(down_w, gate, n, out);
}

// x1 [n, n_embd] -> the routed experts' branch [n, n_embd] of MoE layer il: softmax router,
// the top n_used (ties to the lower index), weights renormalized, Σ weight · scale · expert(x).
Status moe_branch(const Model& m, int il, const Matrix& x1, int n, Matrix* out) {
  const ModelConfig& c = m.config;
  const LayerWeights& w = m.layer(il);
  const int n_embd = c.n_embd, n_expert = c.n_expert, k = c.n_expert_used;
  const int64_t F = c.n_ff_exp;
  Matrix router_in(x1.size()), exp_in(x1.size()), logits;
  rmsnorm_rows(x1.data(), nullptr, n, n_embd, c.norm_eps, router_in.data());
  for (size_t i = 0; i < router_in.size(); ++i) {
    router_in[i] *= w.ffn_gate_inp_scale.f32()[i % n_embd] / std::sqrt(static_cast<float>(n_embd));
  }
  LF_RETURN_IF_ERROR(linear(w.ffn_gate_inp, router_in, n, &logits));
  rmsnorm_rows(x1.data(), w.pre_ffw_norm_2.f32(), n, n_embd, c.norm_eps, exp_in.data());
  out->assign(x1.size(), 0.0f);
  for (int t = 0; t < n; ++t) {
    float* p = &logits[static_cast<size_t>(t) * n_expert];
    softmax(p, n_expert);
    std::vector<int> order(n_expert);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [p](int a, int b) { return p[a] > p[b]; });
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += p[order[j]];
    const Matrix x(exp_in.begin() + static_cast<size_t>(t) * n_embd, exp_in.begin() + static_cast<size_t>(t + 1) * n_embd);
    for (int j = 0; j < k; ++j) {
      const int e = order[j];
      Matrix y;
      if (c.fused_gate_up) {
        // Expert e's gate rows, then its up rows.
        const WeightView gate_up = expert_rows(w.ffn_gate_up_exps, e, 2 * F);
        LF_RETURN_IF_ERROR(geglu_ffn(expert_rows(gate_up, 0, F), expert_rows(gate_up, 1, F),
                                     expert_rows(w.ffn_down_exps, e, n_embd), x, 1, &y));
      } else {
        LF_RETURN_IF_ERROR(geglu_ffn(expert_rows(w.ffn_gate_exps, e, F), expert_rows(w.ffn_up_exps, e, F),
                                     expert_rows(w.ffn_down_exps, e, n_embd), x, 1, &y));
      }
      const double scale = w.ffn_down_exps_scale.present() ? w.ffn_down_exps_scale.f32()[e] : 1.0;
      const double weight = p[e] / std::max(sum, 6.103515625e-5);
      for (int i = 0; i < n_embd; ++i) (*out)[static_cast<size_t>(t) * n_embd + i] += static_cast<float>(weight * scale * y[i]);
    }
  }
  rmsnorm_rows(out->data(), w.post_ffw_norm_2.f32(), n, n_embd, c.norm_eps, out->data());
  return Status();
}

// x [n, n_embd] -> x after layer il
Status layer(const Model& m, int il, int n, Matrix* x, const float* per_layer_in, MediaSpan span, std::vector<LayerKv>* caches) {
  const ModelConfig& c = m.config;
  const LayerConfig& l = c.layers[il];
  const LayerWeights& w = m.layer(il);
  const int n_embd = c.n_embd, D = l.head_dim;
  const float eps = c.norm_eps;
  const float* freq_factors = l.use_freq_factors ? m.rope_freqs.f32() : nullptr;

  Matrix h(x->size());
  rmsnorm_rows(x->data(), w.attn_norm.f32(), n, n_embd, eps, h.data());

  Matrix q;
  LF_RETURN_IF_ERROR(linear(w.attn_q, h, n, &q));
  rmsnorm_rows(q.data(), w.attn_q_norm.f32(), n * l.n_head, D, eps, q.data());
  for (int t = 0; t < n; ++t) {
    rope_neox(&q[static_cast<size_t>(t) * l.q_dim()], l.n_head, D, l.n_rot, t, l.rope_base, l.rope_freq_scale, freq_factors);
  }
  if (c.arch == Arch::gemma3) {
    for (float& qi : q) qi *= c.query_scale;
  }
  // A shared-KV layer attends over the K and V its source layer computed.
  LayerKv& kv = (*caches)[l.kv_layer - m.range.begin];
  if (!l.shares_kv) {
    Matrix& k = kv.k;
    Matrix& v = kv.v;
    LF_RETURN_IF_ERROR(linear(w.attn_k, h, n, &k));
    if (l.has_v) {
      LF_RETURN_IF_ERROR(linear(w.attn_v, h, n, &v));
    } else {
      v = k;
    }
    rmsnorm_rows(k.data(), w.attn_k_norm.f32(), n * l.n_head_kv, D, eps, k.data());
    if (c.arch == Arch::gemma4) rmsnorm_rows(v.data(), nullptr, n * l.n_head_kv, D, eps, v.data());
    for (int t = 0; t < n; ++t) {
      rope_neox(&k[static_cast<size_t>(t) * l.kv_dim()], l.n_head_kv, D, l.n_rot, t, l.rope_base, l.rope_freq_scale,
                freq_factors);
    }
  }

  Matrix o, a;
  attend(q, kv.k, kv.v, n, l, l.sliding ? KeyMask(c.n_swa, span.begin, span.end) : KeyMask(), &o);
  LF_RETURN_IF_ERROR(linear(w.attn_output, o, n, &a));
  rmsnorm_rows(a.data(), w.post_attention_norm.f32(), n, n_embd, eps, a.data());
  for (size_t i = 0; i < a.size(); ++i) (*x)[i] += a[i];

  Matrix f(x->size()), down;
  rmsnorm_rows(x->data(), w.ffn_norm.f32(), n, n_embd, eps, f.data());
  LF_RETURN_IF_ERROR(geglu_ffn(w.ffn_gate, w.ffn_up, w.ffn_down, f, n, &down));
  if (l.moe) {
    rmsnorm_rows(down.data(), w.post_ffw_norm_1.f32(), n, n_embd, eps, down.data());
    Matrix experts;
    LF_RETURN_IF_ERROR(moe_branch(m, il, *x, n, &experts));
    for (size_t i = 0; i < down.size(); ++i) down[i] += experts[i];
  }
  rmsnorm_rows(down.data(), w.post_ffw_norm.f32(), n, n_embd, eps, down.data());
  for (size_t i = 0; i < down.size(); ++i) (*x)[i] += down[i];
  if (c.n_embd_per_layer > 0) {
    const size_t layer_floats = static_cast<size_t>(n) * c.n_embd_per_layer;
    LF_RETURN_IF_ERROR(per_layer_branch(m, w, per_layer_in + (il - m.range.begin) * layer_floats, n, x));
  }

  if (w.layer_output_scale.present()) {
    for (float& xi : *x) xi *= w.layer_output_scale.f32()[0];
  }
  return Status();
}

}  // namespace

Status reference_layers(const Model& m, const float* in, int n, std::vector<float>* out, const float* per_layer_in,
                        MediaSpan span) {
  if (n <= 0) return Status(Code::invalid_argument, "reference_layers needs n > 0");
  if (m.config.n_embd_per_layer > 0 && !per_layer_in) {
    return Status(Code::invalid_argument, "the model has per-layer embeddings: reference_layers needs their inputs");
  }
  if (!kv_layers_mirrored(m.config, m.range.begin, m.range.end).empty()) {
    return Status(Code::unsupported, "reference_layers runs a node only with the source layers of its shared-KV layers");
  }
  out->assign(in, in + static_cast<size_t>(n) * m.config.n_embd);
  std::vector<LayerKv> caches(static_cast<size_t>(m.range.end - m.range.begin));
  for (int il = m.range.begin; il < m.range.end; ++il) LF_RETURN_IF_ERROR(layer(m, il, n, out, per_layer_in, span, &caches));
  return Status();
}

Status reference_per_layer_inputs(const Model& m, const int32_t* tokens, int n, const float* x0, std::vector<float>* out) {
  const ModelConfig& c = m.config;
  if (c.n_embd_per_layer <= 0 || !m.per_layer_token_embd.present()) {
    return Status(Code::failed_precondition, "no per-layer embedding tensors loaded");
  }
  const int n_pl = c.n_embd_per_layer, n_layer = c.n_layer;
  const size_t n_pl_all = static_cast<size_t>(n_pl) * n_layer;
  Matrix x(x0, x0 + static_cast<size_t>(n) * c.n_embd), proj, token_rows(n_pl_all);
  LF_RETURN_IF_ERROR(linear(m.per_layer_model_proj, x, n, &proj));
  out->assign(static_cast<size_t>(n_layer) * n * n_pl, 0.0f);
  for (int t = 0; t < n; ++t) {
    float* q = proj.data() + static_cast<size_t>(t) * n_pl_all;
    for (size_t i = 0; i < n_pl_all; ++i) q[i] /= std::sqrt(static_cast<float>(c.n_embd));
    rmsnorm_rows(q, m.per_layer_proj_norm.f32(), n_layer, n_pl, c.norm_eps, q);
    LF_RETURN_IF_ERROR(dequantize_row(m.per_layer_token_embd.type, m.per_layer_token_embd.row(tokens[t]),
                                      token_rows.data(), static_cast<int64_t>(n_pl_all)));
    for (int l = 0; l < n_layer; ++l) {
      for (int j = 0; j < n_pl; ++j) {
        const size_t i = static_cast<size_t>(l) * n_pl + j;
        (*out)[(static_cast<size_t>(l) * n + t) * n_pl + j] =
            (q[i] + token_rows[i] * std::sqrt(static_cast<float>(n_pl))) / std::sqrt(2.0f);
      }
    }
  }
  return Status();
}

Status reference_head(const Model& m, const float* hidden, int n, std::vector<float>* logits) {
  if (!m.has_head) return Status(Code::failed_precondition, "this node has no output head loaded");
  const ModelConfig& c = m.config;
  Matrix normed(static_cast<size_t>(n) * c.n_embd);
  rmsnorm_rows(hidden, m.output_norm.f32(), n, c.n_embd, c.norm_eps, normed.data());
  LF_RETURN_IF_ERROR(linear(m.output, normed, n, logits));
  if (c.final_softcap != 0.0f) {
    for (float& z : *logits) z = c.final_softcap * std::tanh(z / c.final_softcap);
  }
  return Status();
}

}  // namespace lf
