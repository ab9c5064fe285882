#include "layerfold/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "layerfold/ops.h"
#include "layerfold/quant.h"

namespace lf {
namespace {

using Rows = std::vector<float>;  // [n_rows, width], row-major

Rows rows(int n_rows, int width) { return Rows(static_cast<size_t>(n_rows) * static_cast<size_t>(width)); }

void add_rows(const float* a, const float* b, size_t n, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

// Names an intermediate for the session's debug hook (if any).
class Tap {
 public:
  Tap(const Session& s, int il) : hook_(s.debug_hook), il_(il) {}
  void operator()(const char* name, const Rows& x, int n_rows) const {
    if (hook_) hook_(name, il_, x.data(), n_rows, static_cast<int>(x.size() / static_cast<size_t>(n_rows)));
  }

 private:
  const DebugHook& hook_;
  int il_;
};

// Rotates every row of x [n_rows, n_head, D]; row t sits at position pos0 + t.
void rope_rows(float* x, int n_rows, int n_head, const LayerConfig& l, int pos0, const float* freq_factors) {
  for (int t = 0; t < n_rows; ++t) {
    rope_neox(x + static_cast<int64_t>(t) * n_head * l.head_dim, n_head, l.head_dim, l.n_rot, pos0 + t, l.rope_base,
              l.rope_freq_scale, freq_factors);
  }
}

// One transformer block on x [n, n_embd] at positions pos0 .. pos0+n-1 (spec §3.2 / §3.3).
// Rows before row0 only feed the KV cache; x comes back as [n - row0, n_embd].
Status run_layer(const Model& m, Session& s, int il, int pos0, int n, int row0, Rows* x_io) {
  const ModelConfig& c = m.config;
  const LayerConfig& l = c.layers[il];
  const LayerWeights& w = m.layer(il);
  const int n_embd = c.n_embd, D = l.head_dim, n_q = n - row0;
  const float eps = c.norm_eps;
  const float* freq_factors = l.use_freq_factors ? m.rope_freqs.f32() : nullptr;
  const Tap tap(s, il);
  const Rows& x = *x_io;

  // Pre-attention norm, for all rows: K and V of every position go to the cache.
  Rows attn_norm = rows(n, n_embd);
  rmsnorm_rows(x.data(), w.attn_norm.f32(), n, n_embd, eps, attn_norm.data());
  tap("attn_norm", attn_norm, n);
  const float* attn_norm_q = attn_norm.data() + static_cast<size_t>(row0) * n_embd;

  // q [n_q, n_head, D]: per-head norm, RoPE; gemma3 folds the attention scale into Q here.
  Rows q = rows(n_q, l.q_dim());
  LF_RETURN_IF_ERROR(matmul(w.attn_q, attn_norm_q, n_q, q.data()));
  rmsnorm_rows(q.data(), w.attn_q_norm.f32(), n_q * l.n_head, D, eps, q.data());
  rope_rows(q.data(), n_q, l.n_head, l, pos0 + row0, freq_factors);
  if (c.arch == Arch::gemma3) {
    for (float& qi : q) qi *= c.query_scale;
  }
  tap("q_rope", q, n_q);

  // k, v [n, n_kv, D]. Without attn_v, V is the K projection before its norm and RoPE.
  Rows k = rows(n, l.kv_dim());
  LF_RETURN_IF_ERROR(matmul(w.attn_k, attn_norm.data(), n, k.data()));
  Rows v = k;
  if (l.has_v) LF_RETURN_IF_ERROR(matmul(w.attn_v, attn_norm.data(), n, v.data()));
  rmsnorm_rows(k.data(), w.attn_k_norm.f32(), n * l.n_head_kv, D, eps, k.data());
  rope_rows(k.data(), n, l.n_head_kv, l, pos0, freq_factors);
  if (c.arch == Arch::gemma4) rmsnorm_rows(v.data(), nullptr, n * l.n_head_kv, D, eps, v.data());
  tap("k_rope", k, n);
  tap("v_normed", v, n);

  // attn_out [n_q, n_head, D]. Chunks of at most attn_chunk positions are stored and then
  // attended, so a sliding ring never loses a key a query of the chunk still needs.
  Rows attn_out = rows(n_q, l.q_dim());
  const int n_swa = l.sliding ? c.n_swa : 0;
  for (int c0 = 0; c0 < n; c0 += s.attn_chunk()) {
    const int c1 = std::min(n, c0 + s.attn_chunk());
    for (int t = c0; t < c1; ++t) {
      s.store(il, pos0 + t, k.data() + static_cast<size_t>(t) * l.kv_dim(), v.data() + static_cast<size_t>(t) * l.kv_dim());
    }
    const int q0 = std::max(c0, row0);
    if (q0 >= c1) continue;
    const size_t off = static_cast<size_t>(q0 - row0) * l.q_dim();
    attention(q.data() + off, c1 - q0, pos0 + q0, l.n_head, s.view(il, pos0 + c1), n_swa, 1.0f, attn_out.data() + off);
  }
  tap("attn_out", attn_out, n_q);

  // Output projection, post-norm, residual.
  Rows attn_post = rows(n_q, n_embd);
  LF_RETURN_IF_ERROR(matmul(w.attn_output, attn_out.data(), n_q, attn_post.data()));
  rmsnorm_rows(attn_post.data(), w.post_attention_norm.f32(), n_q, n_embd, eps, attn_post.data());
  Rows x1 = rows(n_q, n_embd);
  add_rows(attn_post.data(), x.data() + static_cast<size_t>(row0) * n_embd, x1.size(), x1.data());
  tap("attn_residual", x1, n_q);

  // Feed-forward: GeGLU between gate/up and down, post-norm, residual.
  Rows ffn_in = rows(n_q, n_embd);
  rmsnorm_rows(x1.data(), w.ffn_norm.f32(), n_q, n_embd, eps, ffn_in.data());
  Rows gate = rows(n_q, l.n_ff), up = rows(n_q, l.n_ff);
  LF_RETURN_IF_ERROR(matmul(w.ffn_gate, ffn_in.data(), n_q, gate.data()));
  LF_RETURN_IF_ERROR(matmul(w.ffn_up, ffn_in.data(), n_q, up.data()));
  Rows ffn_act = rows(n_q, l.n_ff);
  geglu(gate.data(), up.data(), static_cast<int>(ffn_act.size()), ffn_act.data());
  Rows ffn_out = rows(n_q, n_embd);
  LF_RETURN_IF_ERROR(matmul(w.ffn_down, ffn_act.data(), n_q, ffn_out.data()));
  tap("ffn_out", ffn_out, n_q);
  rmsnorm_rows(ffn_out.data(), w.post_ffw_norm.f32(), n_q, n_embd, eps, ffn_out.data());
  Rows x2 = rows(n_q, n_embd);
  add_rows(ffn_out.data(), x1.data(), x2.size(), x2.data());

  // gemma4 scales the whole residual stream after the residual add.
  if (w.layer_output_scale.present()) {
    const float scale = w.layer_output_scale.f32()[0];
    for (float& xi : x2) xi *= scale;
  }
  tap("layer_out", x2, n_q);
  *x_io = std::move(x2);
  return Status();
}

Status check_finite(std::span<const float> in, int n_embd) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (!std::isfinite(in[i])) {
      return Status(Code::invalid_argument, "input is not finite at position " + std::to_string(i / n_embd) +
                                                ", element " + std::to_string(i % n_embd));
    }
  }
  return Status();
}

Status validate_forward(const Model& m, const Session& s, int start_pos, std::span<const float> in, int n,
                        std::span<float> out, bool last_only) {
  const int n_embd = m.config.n_embd;
  if (s.range().begin != m.range.begin || s.range().end != m.range.end) {
    return Status(Code::invalid_argument, "session was created for another layer range");
  }
  if (n <= 0) return Status(Code::invalid_argument, "n must be positive, got " + std::to_string(n));
  const uint64_t in_needed = static_cast<uint64_t>(n) * static_cast<uint64_t>(n_embd);
  if (in.size() != in_needed) {
    return Status(Code::invalid_argument, "input has " + std::to_string(in.size()) + " floats, expected n * n_embd = " +
                                              std::to_string(in_needed));
  }
  const uint64_t out_needed = static_cast<uint64_t>(last_only ? 1 : n) * static_cast<uint64_t>(n_embd);
  if (out.size() != out_needed) {
    return Status(Code::invalid_argument, "output has room for " + std::to_string(out.size()) + " floats, expected " +
                                              std::to_string(out_needed));
  }
  if (start_pos != s.n_past()) {
    return Status(Code::failed_precondition, "start_pos " + std::to_string(start_pos) +
                                                 " does not match the session's n_past " + std::to_string(s.n_past()));
  }
  if (static_cast<int64_t>(start_pos) + n > s.max_ctx()) {
    return Status(Code::resource_exhausted, "context overflow: " + std::to_string(start_pos) + " + " +
                                                std::to_string(n) + " positions exceed max_ctx " + std::to_string(s.max_ctx()));
  }
  return check_finite(in, n_embd);
}

}  // namespace

Status embed(const Model& m, const int32_t* tokens, int n, float* out) {
  if (!m.has_embedding) return Status(Code::failed_precondition, "this node has no token embedding loaded");
  if (n <= 0 || !tokens || !out) return Status(Code::invalid_argument, "embed needs n > 0 tokens and an output");
  const int n_embd = m.config.n_embd;
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= m.config.n_vocab) {
      return Status(Code::invalid_argument, "token id " + std::to_string(tokens[i]) + " at position " +
                                                std::to_string(i) + " is outside [0, " + std::to_string(m.config.n_vocab) + ")");
    }
  }
  const float scale = sqrtf(static_cast<float>(n_embd));
  for (int i = 0; i < n; ++i) {
    float* row = out + static_cast<size_t>(i) * n_embd;
    LF_RETURN_IF_ERROR(dequantize_row(m.token_embd.type, m.token_embd.row(tokens[i]), row, n_embd));
    for (int j = 0; j < n_embd; ++j) row[j] *= scale;
  }
  return Status();
}

Status forward(const Model& m, Session& s, int start_pos, std::span<const float> in, int n, std::span<float> out,
               bool last_only) {
  LF_RETURN_IF_ERROR(validate_forward(m, s, start_pos, in, n, out, last_only));
  Rows x(in.begin(), in.end());  // [n, n_embd], shrinks to one row in the final layer when last_only
  s.layer_ms.assign(m.range.end - m.range.begin, 0.0);
  for (int il = m.range.begin; il < m.range.end; ++il) {
    const bool final_layer = il == m.range.end - 1;
    const int row0 = last_only && final_layer ? n - 1 : 0;
    const auto t0 = std::chrono::steady_clock::now();
    // After validation only an internal fault can fail here; n_past stays put so the caller
    // never sees positions counted that did not run.
    LF_RETURN_IF_ERROR(run_layer(m, s, il, start_pos, n, row0, &x));
    s.layer_ms[il - m.range.begin] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  // A node without layers passes its input through.
  const size_t skip = x.size() - out.size();
  std::copy(x.begin() + static_cast<std::ptrdiff_t>(skip), x.end(), out.begin());
  s.set_n_past(start_pos + n);
  return Status();
}

Status forward(const Model& m, Session& s, int start_pos, const float* in, int n, float* out, bool last_only) {
  if (n <= 0 || !in || !out) return Status(Code::invalid_argument, "forward needs n > 0 and input/output buffers");
  const size_t n_embd = static_cast<size_t>(m.config.n_embd);
  return forward(m, s, start_pos, std::span<const float>(in, n * n_embd), n,
                 std::span<float>(out, (last_only ? 1 : n) * n_embd), last_only);
}

Status head(const Model& m, const float* hidden, int n_rows, float* logits) {
  if (!m.has_head) return Status(Code::failed_precondition, "this node has no output head loaded");
  if (n_rows <= 0 || !hidden || !logits) return Status(Code::invalid_argument, "head needs n_rows > 0 and buffers");
  const ModelConfig& c = m.config;
  Rows out_norm = rows(n_rows, c.n_embd);
  rmsnorm_rows(hidden, m.output_norm.f32(), n_rows, c.n_embd, c.norm_eps, out_norm.data());
  LF_RETURN_IF_ERROR(matmul(m.output, out_norm.data(), n_rows, logits));
  if (c.final_softcap != 0.0f) {
    for (int r = 0; r < n_rows; ++r) softcap(logits + static_cast<size_t>(r) * c.n_vocab, c.n_vocab, c.final_softcap);
  }
  return Status();
}

}  // namespace lf
