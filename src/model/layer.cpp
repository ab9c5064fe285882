// The decoder layer's walk: attention block, FFN block, their residuals and the output scale.
#include "model/layer.h"

#include <algorithm>
#include <chrono>

#include "model/per_layer_embd.h"
#include "ops/ops.h"

namespace lf {
namespace {

using Clock = std::chrono::steady_clock;

// The taps of the attention heads need every worker's heads: a barrier only when debugging.
void tap_attention_heads(const LayerCall& c) {
  bool hooked = false;
  for (const Segment& g : c.rows.segments) hooked = hooked || static_cast<bool>(g.s->debug_hook);
  if (!hooked) return;
  c.sync();
  c.tap("q_rope", c.b.q.data(), LayerCall::Space::act, c.l().q_dim());
  if (!c.l().shares_kv) {  // a shared-KV layer computes no K or V
    c.tap("k_rope", c.b.k.data(), LayerCall::Space::x, c.l().kv_dim());
    c.tap("v_normed", c.b.v.data(), LayerCall::Space::x, c.l().kv_dim());
  }
  c.tap("attn_out", c.b.attn_out.data(), LayerCall::Space::act, c.l().q_dim());
}

// An exited last row skips straight to the output scale: what the full layer gives when its
// attention output and FFN add nothing.
void exited_rows_out(const LayerCall& c) {
  const int E = c.E();
  for (const Segment& g : c.rows.segments) {
    if (!g.exited) continue;
    const float* x = row(c.x, g.x0 + g.n - 1, E);
    float* y = row(c.x_next, g.o0 + g.n_q() - 1, E);
    std::copy(x, x + E, y);
    apply_output_scale(c.w().layer_output_scale, E, y);
  }
}

}  // namespace

void run_layer(const LayerCall& c, FfnVariant ffn) {
  const Clock::time_point t0 = Clock::now();
  const LayerWeights& w = c.w();
  attention_input(c);
  c.sync();
  c.tap("attn_norm", c.b.attn_norm.data(), LayerCall::Space::x, c.E());
  attention_heads(c);
  tap_attention_heads(c);
  project_rows(c, w.attn_output, c.b.xc_o.data(), attention_residual);
  c.tap("attn_residual", c.b.x1.data(), LayerCall::Space::act, c.E());
  const Clock::time_point t1 = Clock::now();

  if (c.worker == c.n_workers() - 1) exited_rows_out(c);
  ffn(c);
  project_rows(c, w.ffn_down, c.b.xc_down.data(), c.l().moe ? moe_residual : ffn_residual);
  c.tap("ffn_out", c.b.proj.data(), LayerCall::Space::act, c.E());
  c.tap("layer_out", c.x_next.data(), LayerCall::Space::out, c.E());

  if (c.worker == 0) {
    c.b.attention_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
    c.b.ffn_ms += std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  }
}

// Token t: x_next = post_ffw_norm(proj) + x1, then gemma4's layer_output_scale on the whole
// residual stream.
void ffn_residual(const LayerCall& c, int64_t t) {
  const int E = c.E();
  float* y = row(c.x_next, c.rows.act_out(t), E);
  const float* x1 = row(c.b.x1, t, E);
  rmsnorm(row(c.b.proj, t, E), c.w().post_ffw_norm.f32(), E, c.c().norm_eps, y);
  for (int j = 0; j < E; ++j) y[j] += x1[j];
  if (c.c().n_embd_per_layer > 0) add_per_layer_branch(c, t, y);
  apply_output_scale(c.w().layer_output_scale, E, y);
}

void apply_output_scale(const WeightView& layer_output_scale, int n, float* y) {
  if (!layer_output_scale.present()) return;
  const float scale = layer_output_scale.f32()[0];
  for (int j = 0; j < n; ++j) y[j] *= scale;
}

}  // namespace lf
