#include "model/drafter_layer.h"

#include "kernels/attention.h"
#include "ops/ops.h"

namespace lf {
namespace {

// This worker's attention units: queries at pos, each KV head's query heads over the target's
// keys. The query sees positions (pos - n_swa, pos) in a sliding layer, [0, pos) in a global
// one: the target never stored position pos. Those are the keys a query at pos - 1 sees with a
// window of n_swa - 1 (none on global layers), visited in the same order, which is what the
// attention kernel is asked for.
void drafter_attention(const LayerCall& c, const KvCache& target_kv, int pos) {
  const Share units = c.my_share(c.plan().attn.n_units);
  if (units.begin == units.end) return;
  const LayerConfig& l = c.l();
  const int kv0 = static_cast<int>(units.begin) * c.plan().kv_per_unit;
  const int kv1 = static_cast<int>(units.end) * c.plan().kv_per_unit;
  const int group = l.n_head / l.n_head_kv;
  project_queries(c, kv0 * group, kv1 * group);
  const int64_t cols_per_kv = static_cast<int64_t>(group) * l.head_dim;
  const int n_swa = l.sliding ? c.c().n_swa - 1 : 0;
  // Over a quantized target cache, the queries and the output rotate as the target's do
  // (kv_rotation).
  const KvRotation rotation = target_kv.rotation(l.kv_layer);
  AttentionWorkspace workspace;
  for (int h = kv0; h < kv1; ++h) {
    float* q = c.b.q.data() + h * cols_per_kv;
    float* out = c.b.attn_out.data() + h * cols_per_kv;
    if (rotation.k > 0) hadamard_rotate(q, static_cast<int>(cols_per_kv), rotation.k);
    attention_tiled(q, 1, pos - 1, group, target_kv.view(l.kv_layer, h, pos), n_swa, 1.0f, out, &workspace);
    if (rotation.v > 0) hadamard_rotate(out, static_cast<int>(cols_per_kv), rotation.v);
  }
  c.check(convert_columns(c.w().attn_output, c.b.attn_out.data(), 1, kv0 * cols_per_kv, kv1 * cols_per_kv, c.b.xc_o.data()));
}

}  // namespace

void run_drafter_layer(const LayerCall& c, const KvCache& target_kv, int pos) {
  attention_input(c);  // a query-only layer converts for attn_q alone
  c.sync();
  drafter_attention(c, target_kv, pos);
  project_rows(c, c.w().attn_output, c.b.xc_o.data(), attention_residual);
  dense_ffn(c);
  project_rows(c, c.w().ffn_down, c.b.xc_down.data(), ffn_residual);
}

}  // namespace lf
