// The mixture-of-experts FFN of a gemma4 MoE layer (docs/gemma-architecture.md, "Mixture of
// experts"): beside the shared MLP (the dense FFN's units, then post_ffw_norm_1), a router on
// the attention output x1 picks n_used of n_expert experts per token; each chosen expert runs
// its GeGLU FFN, and their outputs, weighted by the renormalized router probabilities, sum in
// the order the router ranked them, then post_ffw_norm_2. The two branches' sum takes the dense
// FFN's place before post_ffw_norm and the residual.
//
// Threads (docs/threads.md): rows are shared out for routing and the final sum; the experts'
// GEMMs are shared out as rows of the chosen experts' matrices, weighted by how many tokens
// each expert has, so prompts read each chosen expert's weights once per call (its tokens are
// one block of rows) and decode reads only the chosen experts. Each output value is one dot
// product computed whole by one worker, and the weighted sum runs in a fixed order, so the bytes
// do not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "model/layer.h"
#include "model/moe_steps.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {
namespace {

MoeScratch& moe(const LayerCall& c) { return c.b.moe; }
int n_used(const LayerCall& c) { return c.c().n_expert_used; }
int n_slots(const LayerCall& c) { return c.n_act() * n_used(c); }

// p [n_expert] -> chosen [k], most probable first; equal probabilities in index order
// (docs/gemma-architecture.md, "Mixture of experts", on llama.cpp's argsort and ties).
void choose_experts(const float* p, int n_expert, int k, int32_t* chosen) {
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < n_expert; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || chosen[i] == e;
      if (!taken && (best < 0 || p[e] > p[best])) best = e;
    }
    chosen[j] = best;
  }
}

}  // namespace

void route(const LayerCall& c) {
  const LayerWeights& w = c.w();
  MoeScratch& b = moe(c);
  const int E = c.E(), n_expert = c.c().n_expert, k = n_used(c);
  const float eps = c.c().norm_eps, inv_sqrt_embd = 1.0f / sqrtf(static_cast<float>(E));
  const uint64_t xc_row = activation_row_bytes(w.ffn_gate_inp.type, E);
  const Share rows = c.my_share(c.n_act());
  for (int64_t t = rows.begin; t < rows.end; ++t) {
    const float* x1 = row(c.b.x1, t, E);
    float* r = row(b.router_in, t, E);
    rmsnorm(x1, nullptr, E, eps, r);
    const float* scale = w.ffn_gate_inp_scale.f32();
    for (int i = 0; i < E; ++i) r[i] = r[i] * inv_sqrt_embd * scale[i];
    uint8_t* xc = b.xc_router.data() + xc_row * static_cast<uint64_t>(t);
    c.check(convert_activation_row(w.ffn_gate_inp.type, r, xc, E));
    float* p = b.probs.data() + t * n_expert;
    matmul_rows_strided(w.ffn_gate_inp, xc, xc_row, 1, p, 0, n_expert);
    softmax(p, n_expert);
    int32_t* chosen = b.chosen.data() + t * k;
    choose_experts(p, n_expert, k, chosen);
    // llama.cpp sums the chosen probabilities in double (ggml_vec_sum_f32) and clamps the sum
    // below at the smallest normal f16.
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += p[chosen[j]];
    const float total = std::max(static_cast<float>(sum), 6.103515625e-5f);
    for (int j = 0; j < k; ++j) b.weights[t * k + j] = p[chosen[j]] / total;
    rmsnorm(x1, w.pre_ffw_norm_2.f32(), E, eps, row(b.exp_in, t, E));
  }
}

void group_slots(const LayerCall& c) {
  if (c.worker != 0) return;
  MoeScratch& b = moe(c);
  const int n_expert = c.c().n_expert, k = n_used(c), n_act = c.n_act();
  std::fill(b.first_slot.begin(), b.first_slot.end(), 0);
  for (int s = 0; s < n_act * k; ++s) b.first_slot[b.chosen[s] + 1] += 1;
  for (int e = 0; e < n_expert; ++e) b.first_slot[e + 1] += b.first_slot[e];
  std::copy(b.first_slot.begin(), b.first_slot.end() - 1, b.next_slot.begin());
  for (int t = 0; t < n_act; ++t) {
    for (int j = 0; j < k; ++j) {
      const int s = b.next_slot[b.chosen[t * k + j]]++;
      b.slot_token[s] = t;
      b.slot_of[t * k + j] = s;
    }
  }
}

// A slot of the same token as the slot before it copies that slot's bytes: in decode all n_used
// slots are the one token's, converted once.
void convert_slots(const LayerCall& c, const WeightView& W, const std::vector<float>& x, bool by_token,
                   std::vector<uint8_t>* xc) {
  const MoeScratch& b = moe(c);
  const uint64_t xc_row = activation_row_bytes(W.type, W.n_in);
  const Share slots = c.my_share(n_slots(c));
  for (int64_t s = slots.begin; s < slots.end; ++s) {
    uint8_t* dst = xc->data() + xc_row * static_cast<uint64_t>(s);
    if (by_token && s > slots.begin && b.slot_token[s] == b.slot_token[s - 1]) {
      std::copy(dst - xc_row, dst, dst);
      continue;
    }
    const int64_t src = by_token ? b.slot_token[s] : s;
    c.check(convert_activation_row(W.type, x.data() + src * W.n_in, dst, W.n_in));
  }
}

namespace {

// Calls fn(e, slot0, count, r0, r1) for this worker's rows [r0, r1) of each chosen expert's
// n_rows-row matrix: every expert's rows weighted by its slot count, laid end to end in expert
// order and shared out, so workers get equal work for 1 token and for many.
template <typename Fn>
void for_my_expert_rows(const LayerCall& c, int64_t n_rows, Fn fn) {
  const MoeScratch& b = moe(c);
  const Share mine = c.my_share(static_cast<int64_t>(n_slots(c)) * n_rows);
  // The row r of expert e starts at cost first_slot[e]·n_rows + r·count: the first row starting
  // at or after a cost c is ceil((c - base) / count).
  auto first_row_from = [n_rows](int64_t cost, int64_t base, int64_t count) {
    if (cost <= base) return int64_t{0};
    return std::min(n_rows, (cost - base + count - 1) / count);
  };
  for (int e = 0; e < c.c().n_expert; ++e) {
    const int64_t slot0 = b.first_slot[e], count = b.first_slot[e + 1] - slot0;
    if (count == 0) continue;
    const int64_t base = slot0 * n_rows;
    const int64_t r0 = first_row_from(mine.begin, base, count), r1 = first_row_from(mine.end, base, count);
    if (r0 < r1) fn(e, slot0, count, r0, r1);
  }
}

}  // namespace

void gate_up(const LayerCall& c) {
  const LayerWeights& w = c.w();
  MoeScratch& b = moe(c);
  const int64_t F = c.c().n_ff_exp;
  const bool fused = c.c().fused_gate_up;
  const WeightView& exps = fused ? w.ffn_gate_up_exps : w.ffn_gate_exps;
  const uint64_t xc_row = activation_row_bytes(exps.type, c.E());
  // Separate up experts read the gate's converted input unless their vec_dot type differs.
  const bool own_up = !fused && up_needs_own_activations(exps.type, w.ffn_up_exps.type);
  const std::vector<uint8_t>& xc_up_rows = own_up ? b.xc_exp_up : b.xc_exp;
  const uint64_t xc_up_row = own_up ? activation_row_bytes(w.ffn_up_exps.type, c.E()) : xc_row;
  // Fused: row s of gate_up is [gate | up] of slot s. Separate: gate for all slots, then up.
  float* gate_base = b.gate_up.data();
  float* up_base = fused ? b.gate_up.data() + F : b.gate_up.data() + static_cast<size_t>(n_slots(c)) * F;
  const int64_t stride = fused ? 2 * F : F;
  for_my_expert_rows(c, F, [&](int e, int64_t slot0, int64_t count, int64_t r0, int64_t r1) {
    const uint8_t* xc = b.xc_exp.data() + xc_row * static_cast<uint64_t>(slot0);
    const int n_tok = static_cast<int>(count);
    if (fused) {
      const WeightView W = expert_rows(w.ffn_gate_up_exps, e, 2 * F);
      float* Y = gate_base + slot0 * stride;
      matmul_rows_strided(W, xc, xc_row, n_tok, Y, r0, r1);
      matmul_rows_strided(W, xc, xc_row, n_tok, Y, F + r0, F + r1);
    } else {
      matmul_rows_strided(expert_rows(w.ffn_gate_exps, e, F), xc, xc_row, n_tok, gate_base + slot0 * stride, r0, r1);
      const uint8_t* xc_up = xc_up_rows.data() + xc_up_row * static_cast<uint64_t>(slot0);
      matmul_rows_strided(expert_rows(w.ffn_up_exps, e, F), xc_up, xc_up_row, n_tok, up_base + slot0 * stride, r0, r1);
    }
    for (int64_t s = slot0; s < slot0 + count; ++s) {
      geglu(gate_base + s * stride + r0, up_base + s * stride + r0, static_cast<int>(r1 - r0), b.act.data() + s * F + r0);
    }
  });
}

void down(const LayerCall& c) {
  const LayerWeights& w = c.w();
  MoeScratch& b = moe(c);
  const int64_t rows = w.ffn_down_exps.n_out / c.c().n_expert;
  const uint64_t xc_row = activation_row_bytes(w.ffn_down_exps.type, w.ffn_down_exps.n_in);
  for_my_expert_rows(c, rows, [&](int e, int64_t slot0, int64_t count, int64_t r0, int64_t r1) {
    matmul_rows_strided(expert_rows(w.ffn_down_exps, e, rows), b.xc_act.data() + xc_row * static_cast<uint64_t>(slot0),
                        xc_row, static_cast<int>(count), b.down.data() + slot0 * rows, r0, r1);
  });
}

void weigh_experts(const LayerCall& c, int64_t t, int64_t width, float* out) {
  const LayerWeights& w = c.w();
  const MoeScratch& b = moe(c);
  const int k = n_used(c);
  const float* scale = w.ffn_down_exps_scale.present() ? w.ffn_down_exps_scale.f32() : nullptr;
  for (int j = 0; j < k; ++j) {
    const int e = b.chosen[t * k + j];
    const float weight = b.weights[t * k + j];
    const float* y = b.down.data() + b.slot_of[t * k + j] * width;
    for (int64_t i = 0; i < width; ++i) {
      const float v = (scale ? y[i] * scale[e] : y[i]) * weight;
      out[i] = j == 0 ? v : out[i] + v;
    }
  }
}

void norm_experts(const LayerCall& c, int64_t t) {
  float* out = row(moe(c).out, t, c.E());
  rmsnorm(out, c.w().post_ffw_norm_2.f32(), c.E(), c.c().norm_eps, out);
}

namespace {

// This worker's rows t: out = post_ffw_norm_2(the experts' weighted sum).
void combine(const LayerCall& c) {
  const Share rows = c.my_share(c.n_act());
  for (int64_t t = rows.begin; t < rows.end; ++t) {
    weigh_experts(c, t, c.E(), row(moe(c).out, t, c.E()));
    norm_experts(c, t);
  }
}

}  // namespace

void moe_ffn(const LayerCall& c) {
  dense_ffn(c);  // the shared MLP's units; project_rows runs its ffn_down
  route(c);
  c.sync();
  group_slots(c);
  c.sync();
  const LayerWeights& w = c.w();
  MoeScratch& b = moe(c);
  const WeightView& gate = c.c().fused_gate_up ? w.ffn_gate_up_exps : w.ffn_gate_exps;
  convert_slots(c, gate, b.exp_in, true, &b.xc_exp);
  if (!c.c().fused_gate_up && up_needs_own_activations(gate.type, w.ffn_up_exps.type)) {
    convert_slots(c, w.ffn_up_exps, b.exp_in, true, &b.xc_exp_up);
  }
  c.sync();
  gate_up(c);
  c.sync();
  convert_slots(c, w.ffn_down_exps, b.act, false, &b.xc_act);
  c.sync();
  down(c);
  c.sync();
  combine(c);
}

void moe_residual(const LayerCall& c, int64_t t) {
  const int E = c.E();
  float* mlp = row(c.b.proj, t, E);
  rmsnorm(mlp, c.w().post_ffw_norm_1.f32(), E, c.c().norm_eps, mlp);
  const float* experts = row(c.b.moe.out, t, E);
  for (int i = 0; i < E; ++i) mlp[i] += experts[i];
  ffn_residual(c, t);
}

}  // namespace lf
