#include "model/shard_plan.h"

#include <algorithm>
#include <string>

namespace lf {
namespace {

int64_t block_elems(GgmlType type) {
  TypeTraits traits{};
  return type_traits(static_cast<uint32_t>(type), &traits) ? traits.block_elems : 0;
}

}  // namespace

Status plan_layer_shards(const LayerConfig& l, GgmlType attn_output_type, GgmlType ffn_down_type, LayerShards* out) {
  const int64_t attn_block = block_elems(attn_output_type);
  const int64_t ffn_block = std::max<int64_t>(32, block_elems(ffn_down_type));
  if (attn_block == 0 || block_elems(ffn_down_type) == 0) {
    return Status(Code::unsupported, "no block size known for the attention output or FFN down weight type");
  }
  LayerShards s;
  // A tensor-parallel member may hold none of a layer's heads or features (member_split.h):
  // then it has no units of that half.
  if (l.n_head_kv > 0) {
    const int heads_per_kv = l.n_head / l.n_head_kv;
    // The fewest KV heads per unit whose query columns fill whole blocks of attn_output; with
    // today's head dims (multiples of 32) and type blocks of at most 256 this is nearly always 1.
    s.kv_per_unit = l.n_head_kv;
    for (int k = 1; k <= l.n_head_kv; ++k) {
      if (l.n_head_kv % k == 0 && (static_cast<int64_t>(k) * heads_per_kv * l.head_dim) % attn_block == 0) {
        s.kv_per_unit = k;
        break;
      }
    }
    s.attn.n_units = l.n_head_kv / s.kv_per_unit;
    s.attn.width = s.kv_per_unit * heads_per_kv * l.head_dim;
    s.attn.n_in = l.q_dim();
    for (int k = 1; k <= l.n_head; ++k) {
      if (l.n_head % k == 0 && (static_cast<int64_t>(k) * l.head_dim) % attn_block == 0) {
        s.query_parts = l.n_head / k;
        break;
      }
    }
  }

  if (l.n_ff % block_elems(ffn_down_type) != 0) {
    return Status(Code::unsupported, "n_ff " + std::to_string(l.n_ff) + " is not a multiple of the FFN down block");
  }
  if (l.n_ff > 0) {
    const int64_t target = (l.n_ff + kFfnUnitTarget - 1) / kFfnUnitTarget;
    const int64_t width = (target + ffn_block - 1) / ffn_block * ffn_block;
    s.ffn.width = static_cast<int>(width);
    s.ffn.n_units = static_cast<int>((l.n_ff + width - 1) / width);
    s.ffn.n_in = l.n_ff;
  }
  *out = s;
  return Status();
}

}  // namespace lf
