#include "model/member_split.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "model/shard_plan.h"
#include "model/tensor_table.h"

namespace lf {
namespace {

int64_t block_elems(GgmlType type) {
  TypeTraits traits{};
  return type_traits(static_cast<uint32_t>(type), &traits) ? traits.block_elems : 1;
}

GgmlType tensor_type(const GgufFile& file, const std::string& name) {
  const GgufTensorInfo* t = file.tensor(name);
  return t ? t->type : GgmlType::F32;
}

// Member i's share of n rows dealt in grains (the last grain may be narrower).
RowRange grain_share(int64_t n, int64_t grain, int member, int n_members) {
  const Share s = share((n + grain - 1) / grain, member, n_members);
  return {std::min(n, s.begin * grain), std::min(n, s.end * grain)};
}

// Rows of a tensor of layer il a member holds: what it multiplies by, by the tensor's short name.
// Whole (false) for norms, the router, the per-layer branch and anything else.
bool member_rows(const LayerConfig& l, const MemberLayerSlice& s, const std::string& short_name, RowRange* rows,
                 bool* per_expert) {
  const int64_t D = l.head_dim, group = l.n_head_kv > 0 ? l.n_head / l.n_head_kv : 0;
  *per_expert = false;
  if (short_name == "attn_q") *rows = {s.kv_heads.begin * group * D, s.kv_heads.end * group * D};
  else if (short_name == "attn_k" || short_name == "attn_v") *rows = {s.kv_heads.begin * D, s.kv_heads.end * D};
  else if (short_name == "attn_output" || short_name == "ffn_down") *rows = s.embd;
  else if (short_name == "ffn_gate" || short_name == "ffn_up") *rows = s.ff;
  else if (short_name == "ffn_gate_exps" || short_name == "ffn_up_exps" || short_name == "ffn_gate_up_exps") {
    *rows = s.ff_exp;
    *per_expert = true;
  } else if (short_name == "ffn_down_exps") {
    *rows = s.embd;
    *per_expert = true;
  } else {
    return false;
  }
  return true;
}

// The first layer of `range` that reads layer `source`'s KV cache (one does, when asked).
int first_reader(const ModelConfig& c, LayerRange range, int source) {
  int il = range.begin;
  while (il < range.end && !(c.layers[il].shares_kv && c.layers[il].kv_layer == source)) ++il;
  return il;
}

bool is_vocab_table(const std::string& name) {
  return name == "token_embd.weight" || name == "output.weight" || name == "per_layer_token_embd.weight";
}

// A vocabulary table's rows [rows): one byte range, the tensor as [ne0, rows].
Status vocab_rows(RowRange rows, const GgufTensorInfo& t, MemberTensor* out) {
  TypeTraits traits{};
  if (!type_traits(static_cast<uint32_t>(t.type), &traits)) {
    return Status(Code::unsupported, "tensor '" + t.name + "' has an unknown type");
  }
  if (t.n_dims != 2 || rows.end > t.ne[1]) {
    return Status(Code::malformed, "tensor '" + t.name + "' is not a matrix of a row per token");
  }
  const uint64_t row_bytes = lf::row_bytes(traits, static_cast<uint64_t>(t.ne[0]));
  MemberTensor mt;
  mt.info = t;
  mt.info.ne[1] = rows.size();
  mt.info.n_bytes = static_cast<uint64_t>(rows.size()) * row_bytes;
  mt.ranges = {ByteRange{static_cast<uint64_t>(rows.begin) * row_bytes, mt.info.n_bytes}};
  *out = std::move(mt);
  return Status();
}

}  // namespace

Status split_members(const GgufFile& file, const ModelConfig& c, LayerRange range, int n_members, MemberSplit* out,
                     bool ends) {
  if (n_members < 1 || n_members > kMaxMembers) {
    return Status(Code::invalid_argument, "member count " + std::to_string(n_members) + " is outside [1, " +
                                              std::to_string(kMaxMembers) + "]");
  }
  if (range.begin < 0 || range.end > c.n_layer || range.begin >= range.end) {
    return Status(Code::invalid_argument, "layer range [" + std::to_string(range.begin) + ", " +
                                              std::to_string(range.end) + ") is not a non-empty part of [0, " +
                                              std::to_string(c.n_layer) + ")");
  }
  MemberSplit split;
  split.n_members = n_members;
  split.range = range;
  split.slices.assign(static_cast<size_t>(n_members), std::vector<MemberLayerSlice>(static_cast<size_t>(range.end - range.begin)));
  for (int il = range.begin; il < range.end; ++il) {
    const LayerConfig& l = c.layers[il];
    const GgmlType down = tensor_type(file, layer_tensor_name(il, "ffn_down"));
    LayerShards plan;
    LF_RETURN_IF_ERROR(plan_layer_shards(l, tensor_type(file, layer_tensor_name(il, "attn_output")), down, &plan));
    const int64_t ff_grain = std::max(kMemberRowGrain, block_elems(down));
    const int64_t exp_grain = std::max(kMemberRowGrain, block_elems(tensor_type(file, layer_tensor_name(il, "ffn_down_exps"))));
    for (int i = 0; i < n_members; ++i) {
      MemberLayerSlice& s = split.slices[i][il - range.begin];
      const Share units = share(plan.attn.n_units, i, n_members);
      s.kv_heads = {units.begin * plan.kv_per_unit, units.end * plan.kv_per_unit};
      s.embd = grain_share(c.n_embd, kMemberRowGrain, i, n_members);
      s.ff = grain_share(l.n_ff, ff_grain, i, n_members);
      if (l.moe) s.ff_exp = grain_share(c.n_ff_exp, exp_grain, i, n_members);
    }
    // A shared-KV layer reads its source's cache slice (or its mirror's, a source before the
    // range: member_config): the same heads must be the member's as the source's, or as every
    // other reader's of a source outside.
    if (!l.shares_kv) continue;
    const int other = l.kv_layer >= range.begin ? l.kv_layer : first_reader(c, range, l.kv_layer);
    for (int i = 0; i < n_members && other != il; ++i) {
      const RowRange a = split.slice(i, il).kv_heads, b = split.slice(i, other).kv_heads;
      if (a.begin != b.begin || a.end != b.end) {
        return Status(Code::unsupported, "layers " + std::to_string(il) + " and " + std::to_string(other) + " read layer " +
                                             std::to_string(l.kv_layer) + "'s KV cache but their KV heads split differently over " +
                                             std::to_string(n_members) + " members");
      }
    }
  }
  split.with_embedding = ends && range.begin == 0;
  split.with_head = ends && range.end == c.n_layer;
  if (split.with_embedding || split.with_head) {
    for (int i = 0; i < n_members; ++i) split.vocab.push_back(grain_share(c.n_vocab, kMemberRowGrain, i, n_members));
  }
  *out = std::move(split);
  return Status();
}

ModelConfig member_config(const ModelConfig& c, const MemberSplit& split, int member) {
  ModelConfig m = c;
  // Layer il with only the KV heads (and their query heads) `kv_heads`.
  const auto keep_heads = [&c, &m](int il, RowRange kv_heads) {
    const LayerConfig& whole = c.layers[il];
    m.layers[il].n_head_kv = static_cast<int>(kv_heads.size());
    m.layers[il].n_head = m.layers[il].n_head_kv * (whole.n_head / whole.n_head_kv);
  };
  for (int il = split.range.begin; il < split.range.end; ++il) {
    LayerConfig& l = m.layers[il];
    const MemberLayerSlice& s = split.slice(member, il);
    // A source before the range is mirrored with the heads its readers here read (split_members).
    if (l.shares_kv && l.kv_layer < split.range.begin) keep_heads(l.kv_layer, member_kv_heads(c, split, member, l.kv_layer));
    keep_heads(il, s.kv_heads);
    l.n_ff = static_cast<int>(s.ff.size());
    if (l.moe) m.n_ff_exp = static_cast<int>(s.ff_exp.size());
  }
  return m;
}

RowRange member_kv_heads(const ModelConfig& c, const MemberSplit& split, int member, int il) {
  if (il >= split.range.begin) return split.slice(member, il).kv_heads;
  const int reader = first_reader(c, split.range, il);
  return reader < split.range.end ? split.slice(member, reader).kv_heads : RowRange{};
}

Status member_tensor(const ModelConfig& c, const MemberSplit& split, int member, const GgufTensorInfo& t,
                     MemberTensor* out) {
  MemberTensor mt;
  mt.info = t;
  mt.ranges = {ByteRange{0, t.n_bytes}};
  if (!split.vocab.empty() && is_vocab_table(t.name)) return vocab_rows(split.vocab[member], t, out);
  int il = -1;
  char rest[64] = {}, suffix[16] = {};
  if (std::sscanf(t.name.c_str(), "blk.%d.%63[^.].%15s", &il, rest, suffix) != 3 || suffix != std::string("weight") ||
      il < split.range.begin || il >= split.range.end) {
    *out = std::move(mt);
    return Status();
  }
  RowRange rows;
  bool per_expert = false;
  if (!member_rows(c.layers[il], split.slice(member, il), rest, &rows, &per_expert)) {
    *out = std::move(mt);
    return Status();
  }
  TypeTraits traits{};
  if (!type_traits(static_cast<uint32_t>(t.type), &traits)) {
    return Status(Code::unsupported, "tensor '" + t.name + "' has an unknown type");
  }
  const uint64_t row_bytes = lf::row_bytes(traits, static_cast<uint64_t>(t.ne[0]));
  const int64_t n_matrices = per_expert ? t.ne[2] : 1;
  const int64_t n_out = per_expert ? t.ne[1] : t.ne[1] * t.ne[2];
  // A fused gate/up expert is [gate rows | up rows]: the member's rows of each half.
  const bool fused = rest == std::string("ffn_gate_up_exps");
  const int64_t half = fused ? n_out / 2 : n_out;
  if (rows.end > half) return Status(Code::malformed, "tensor '" + t.name + "' has fewer rows than its layer's split");
  mt.ranges.clear();
  for (int64_t e = 0; e < n_matrices; ++e) {
    for (int64_t h = 0; h < (fused ? 2 : 1); ++h) {
      const uint64_t first = static_cast<uint64_t>(e * n_out + h * half + rows.begin);
      if (rows.size() > 0) mt.ranges.push_back({first * row_bytes, static_cast<uint64_t>(rows.size()) * row_bytes});
    }
  }
  const int64_t member_rows_per_matrix = rows.size() * (fused ? 2 : 1);
  mt.info.ne[1] = member_rows_per_matrix;
  if (!per_expert && t.ne[2] != 1) return Status(Code::malformed, "tensor '" + t.name + "' is not a matrix");
  mt.info.n_bytes = static_cast<uint64_t>(member_rows_per_matrix * n_matrices) * row_bytes;
  *out = std::move(mt);
  return Status();
}

}  // namespace lf
