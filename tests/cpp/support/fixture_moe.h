// Mixture-of-experts layers added to the gemma4 fixture (fixture_model.h) through its edit hook:
// the expert keys and, per MoE layer, the router, the experts (fused or separate gate/up), the
// optional per-expert down scale and the branch norms (docs/gguf.md, "MoE tensors and keys").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fixture_model.h"

namespace lf::test {

struct MoeFixture {
  int n_expert = 5, n_used = 2, n_ff_exp = 96;
  bool fused = true;
  bool down_scale = true;
  bool zero_router = false;        // every router logit 0: all experts tie
  GgmlType exps_type = GgmlType::F32;  // gate/up (fused, or separate gate)
  std::optional<GgmlType> up_type;    // separate up experts; unset: exps_type
  std::optional<GgmlType> down_type;  // unset: exps_type. K-quants need n_ff_exp % 256 == 0
  std::vector<int> layers = {0, 1, 2};
};

// o's edit hook gains the MoE keys and tensors of moe (after any edit o already has).
inline void add_moe(const MoeFixture& moe, FixtureOptions* o) {
  auto previous = o->edit;
  o->edit = [moe, previous, seed = o->seed](GgufWriter& w) {
    w.set_u32("gemma4.expert_count", static_cast<uint32_t>(moe.n_expert));
    w.set_u32("gemma4.expert_used_count", static_cast<uint32_t>(moe.n_used));
    w.set_u32("gemma4.expert_feed_forward_length", static_cast<uint32_t>(moe.n_ff_exp));
    FixtureRng rng(seed + 1000);
    const int64_t E = kFixtureEmbd, F = moe.n_ff_exp, X = moe.n_expert;
    auto values = [&](int64_t n, float scale, float center) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = center + scale * rng.uniform();
      return v;
    };
    auto add = [&](const std::string& name, GgmlType type, std::vector<int64_t> ne, std::vector<float> v) {
      const Status s = w.add_tensor(name, type, ne, detail::fill_with(type, std::move(v), ne[0]));
      (void)s;  // a tensor it could not add is missing, and the load then refuses the file by name
    };
    for (int il : moe.layers) {
      const std::string p = "blk." + std::to_string(il) + ".";
      // Router logits of a few nats: the choice depends on the token, far from ties.
      add(p + "ffn_gate_inp.weight", GgmlType::F32, {E, X}, values(E * X, moe.zero_router ? 0.0f : 3.0f, 0.0f));
      add(p + "ffn_gate_inp.scale", GgmlType::F32, {E}, values(E, 0.2f, 1.0f));
      add(p + "pre_ffw_norm_2.weight", GgmlType::F32, {E}, values(E, 0.2f, 1.0f));
      add(p + "post_ffw_norm_1.weight", GgmlType::F32, {E}, values(E, 0.2f, 1.0f));
      add(p + "post_ffw_norm_2.weight", GgmlType::F32, {E}, values(E, 0.2f, 1.0f));
      const float a_in = std::sqrt(3.0f / static_cast<float>(E)), a_ff = std::sqrt(3.0f / static_cast<float>(F));
      if (moe.fused) {
        add(p + "ffn_gate_up_exps.weight", moe.exps_type, {E, 2 * F, X}, values(E * 2 * F * X, a_in, 0.0f));
      } else {
        add(p + "ffn_gate_exps.weight", moe.exps_type, {E, F, X}, values(E * F * X, a_in, 0.0f));
        const GgmlType up = moe.up_type.value_or(moe.exps_type);
        add(p + "ffn_up_exps.weight", up, {E, F, X}, values(E * F * X, a_in, 0.0f));
      }
      const GgmlType down = moe.down_type.value_or(moe.exps_type);
      add(p + "ffn_down_exps.weight", down, {F, E, X}, values(F * E * X, a_ff, 0.0f));
      if (moe.down_scale) add(p + "ffn_down_exps.scale", GgmlType::F32, {X}, values(X, 0.4f, 1.0f));
    }
    if (previous) previous(w);
  };
}

}  // namespace lf::test
