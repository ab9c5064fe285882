// The steps of the mixture-of-experts FFN (model/ffn_moe.cpp), which moe_ffn runs in order
// between barriers and a tensor-parallel member runs around its exchanges
// (model/member_forward.cpp). Each works on this worker's share of Scratch::moe.
#pragma once

#include <cstdint>
#include <vector>

#include "model/layer.h"

namespace lf {

// This worker's rows t: the router's probabilities, choices and weights, and the experts' input.
void route(const LayerCall& c);
// Worker 0: the slots grouped by expert, each expert's in token order.
void group_slots(const LayerCall& c);
// This worker's share of the slots: x row -> Xc row s in W's vec_dot type, where x is per token
// (by_token: slot s reads its token's row, the experts' input) or per slot (their activations,
// [slots, W.n_in]).
void convert_slots(const LayerCall& c, const WeightView& W, const std::vector<float>& x, bool by_token,
                   std::vector<uint8_t>* xc);
// This worker's expert rows of gate and up -> act [slots, n_ff_exp] = gelu(gate) · up for the
// same features.
void gate_up(const LayerCall& c);
// This worker's expert rows of ffn_down -> down [slots, rows], rows = each expert's rows of the
// loaded ffn_down_exps (n_embd, or a member's share of them).
void down(const LayerCall& c);
// Token t's experts' outputs summed in the router's order, as llama.cpp adds its expert views:
// out [width] = Σ_j (down[slot_j] · scale[e_j]) · weight_j, over down's rows of that width.
void weigh_experts(const LayerCall& c, int64_t t, int64_t width, float* out);
// Token t's Scratch::moe.out row: post_ffw_norm_2 in place.
void norm_experts(const LayerCall& c, int64_t t);

}  // namespace lf
