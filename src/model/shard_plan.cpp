#include "model/shard_plan.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace lf {
namespace {

int64_t block_elems(GgmlType type) {
  TypeTraits traits{};
  return type_traits(static_cast<uint32_t>(type), &traits) ? traits.block_elems : 0;
}

// Calls copy(file offset, unit-major offset, bytes) once for each row of each unit: the pieces
// both layouts are made of.
template <typename Copy>
void for_each_unit_row(const WeightView& W, const ColumnUnits& units, Copy copy) {
  uint64_t unit_major = 0;
  for (int u = 0; u < units.n_units; ++u) {
    const uint64_t skip = W.column_bytes(units.begin(u));
    const uint64_t bytes = W.column_bytes(units.end(u) - units.begin(u));
    for (int64_t r = 0; r < W.n_out; ++r, unit_major += bytes) copy(static_cast<uint64_t>(r) * W.row_bytes + skip, unit_major, bytes);
  }
}

}  // namespace

void to_unit_major(const WeightView& W, const ColumnUnits& units, const uint8_t* src, uint8_t* dst) {
  for_each_unit_row(W, units, [&](uint64_t file, uint64_t unit_major, uint64_t n) { std::memcpy(dst + unit_major, src + file, n); });
}

void from_unit_major(const WeightView& W, const ColumnUnits& units, const uint8_t* src, uint8_t* dst) {
  for_each_unit_row(W, units, [&](uint64_t file, uint64_t unit_major, uint64_t n) { std::memcpy(dst + file, src + unit_major, n); });
}

Status plan_layer_shards(const LayerConfig& l, GgmlType attn_output_type, GgmlType ffn_down_type, LayerShards* out) {
  const int64_t attn_block = block_elems(attn_output_type);
  const int64_t ffn_block = std::max<int64_t>(32, block_elems(ffn_down_type));
  if (attn_block == 0 || block_elems(ffn_down_type) == 0) {
    return Status(Code::unsupported, "no block size known for the attention output or FFN down weight type");
  }
  const int heads_per_kv = l.n_head / l.n_head_kv;
  LayerShards s;
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

  const int64_t target = (l.n_ff + kFfnUnitTarget - 1) / kFfnUnitTarget;
  const int64_t width = (target + ffn_block - 1) / ffn_block * ffn_block;
  if (l.n_ff % block_elems(ffn_down_type) != 0) {
    return Status(Code::unsupported, "n_ff " + std::to_string(l.n_ff) + " is not a multiple of the FFN down block");
  }
  s.ffn.width = static_cast<int>(width);
  s.ffn.n_units = static_cast<int>((l.n_ff + width - 1) / width);
  s.ffn.n_in = l.n_ff;
  *out = s;
  return Status();
}

}  // namespace lf
