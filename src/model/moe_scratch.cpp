#include "model/moe_scratch.h"

#include <algorithm>
#include <type_traits>

#include "quant/quant.h"

namespace lf {
namespace {

// Each buffer with its element count, listed once for resize() and bytes().
template <typename Visit>
void for_each_buffer(const MoeLayerShape& s, size_t rows, size_t E, Visit visit) {
  const size_t slots = rows * static_cast<size_t>(s.n_used), F = static_cast<size_t>(s.n_ff_exp);
  const size_t n_expert = static_cast<size_t>(s.n_expert);
  visit(&MoeScratch::router_in, rows * E);
  visit(&MoeScratch::xc_router, rows * s.router_row);
  visit(&MoeScratch::probs, rows * n_expert);
  visit(&MoeScratch::chosen, slots);
  visit(&MoeScratch::weights, slots);
  visit(&MoeScratch::exp_in, rows * E);
  visit(&MoeScratch::first_slot, n_expert + 1);
  visit(&MoeScratch::next_slot, n_expert);
  visit(&MoeScratch::slot_token, slots);
  visit(&MoeScratch::slot_of, slots);
  visit(&MoeScratch::xc_exp, slots * s.exps_row);
  visit(&MoeScratch::xc_exp_up, slots * s.up_row);
  visit(&MoeScratch::gate_up, slots * 2 * F);
  visit(&MoeScratch::act, slots * F);
  visit(&MoeScratch::xc_act, slots * s.down_row);
  visit(&MoeScratch::down, slots * E);
  visit(&MoeScratch::out, rows * E);
}

}  // namespace

void MoeLayerShape::widen(const MoeLayerShape& o) {
  n_expert = std::max(n_expert, o.n_expert);
  n_used = std::max(n_used, o.n_used);
  n_ff_exp = std::max(n_ff_exp, o.n_ff_exp);
  router_row = std::max(router_row, o.router_row);
  exps_row = std::max(exps_row, o.exps_row);
  up_row = std::max(up_row, o.up_row);
  down_row = std::max(down_row, o.down_row);
}

uint64_t MoeLayerShape::bytes(size_t rows, size_t n_embd) const {
  if (n_expert == 0) return 0;
  uint64_t total = 0;
  for_each_buffer(*this, rows, n_embd, [&](auto member, size_t n) {
    using Vector = std::remove_reference_t<decltype(MoeScratch{}.*member)>;
    total += n * sizeof(typename Vector::value_type);
  });
  return total;
}

bool up_needs_own_activations(GgmlType gate, GgmlType up) { return vec_dot_type(gate) != vec_dot_type(up); }

MoeLayerShape moe_layer_shape(const ModelConfig& c, int il, GgmlType router, GgmlType exps, GgmlType up, GgmlType down) {
  MoeLayerShape s;
  if (!c.layers[il].moe) return s;
  s.n_expert = c.n_expert;
  s.n_used = c.n_expert_used;
  s.n_ff_exp = c.n_ff_exp;
  s.router_row = activation_row_bytes(router, c.n_embd);
  s.exps_row = activation_row_bytes(exps, c.n_embd);
  if (up_needs_own_activations(exps, up)) s.up_row = activation_row_bytes(up, c.n_embd);
  s.down_row = activation_row_bytes(down, c.n_ff_exp);
  return s;
}

void MoeScratch::resize(const MoeLayerShape& shape, size_t rows, size_t n_embd) {
  if (shape.n_expert == 0) return;
  for_each_buffer(shape, rows, n_embd, [&](auto member, size_t n) { (this->*member).resize(n); });
}

}  // namespace lf
