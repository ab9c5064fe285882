#include "model/member_needs.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/gemm.h"
#include "layout/row_strips.h"
#include "model/kv_cache.h"
#include "model/kv_shipping.h"
#include "model/member.h"
#include "model/member_forward.h"
#include "model/per_layer_embd.h"
#include "model/tensor_table.h"

namespace lf {

Status member_needs(const GgufFile& file, const MemberShape& shape, MemberNeeds* out) {
  ModelConfig full;
  LF_RETURN_IF_ERROR(load_model_config(file, &full));
  MemberSplit split;
  LF_RETURN_IF_ERROR(split_members(file, full, shape.range, shape.n_members, &split, shape.ends));
  if (shape.member < 0 || shape.member >= shape.n_members) {
    return Status(Code::invalid_argument, "member " + std::to_string(shape.member) + " is not one of " +
                                              std::to_string(shape.n_members));
  }
  if (shape.max_tokens < 1) {
    return Status(Code::invalid_argument, "max_tokens must be positive, got " + std::to_string(shape.max_tokens));
  }
  NodeNeeds needs;
  std::vector<MemberTensor> tensors;
  LF_RETURN_IF_ERROR(member_tensors(file, full, split, shape.member, &tensors));
  for (const MemberTensor& t : tensors) {
    needs.tensors.push_back(t.info.name);
    needs.tensor_bytes += t.info.n_bytes;
    // The load lays a matrix out in row strips through one strip's bytes (ModelLoadOptions).
    if (t.info.n_dims >= 2 && gemm_uses_row_strips(t.info.type)) {
      const auto rows = static_cast<uint64_t>(t.info.ne[1] * (t.info.n_dims == 3 ? t.info.ne[2] : 1));
      if (rows > 0) needs.relayout_bytes = std::max(needs.relayout_bytes, kStripRows * (t.info.n_bytes / rows));
    }
  }
  const ModelConfig c = member_config(full, split, shape.member);
  KvCacheOptions kv;
  kv.max_ctx = shape.max_ctx;
  kv.k_type = shape.k_type;
  kv.v_type = shape.v_type;
  LF_RETURN_IF_ERROR(KvCache::bytes_for(c, shape.range, kv, &needs.kv_bytes_per_session));

  // The call's Scratch as MemberForward::begin sizes it: the member's layers, its experts'
  // activations at their full width.
  std::vector<LayerScratchShape> layers(static_cast<size_t>(shape.range.end - shape.range.begin));
  for (int il = shape.range.begin; il < shape.range.end; ++il) {
    LF_RETURN_IF_ERROR(layer_scratch_shape(file, c, il, &layers[il - shape.range.begin]));
  }
  ScratchShape scratch = scratch_shape(c, shape.range, layers, shape.max_tokens, false);
  for (int il = shape.range.begin; il < shape.range.end; ++il) {
    const GgufTensorInfo* down_exps = file.tensor(layer_tensor_name(il, "ffn_down_exps"));
    if (down_exps != nullptr) scratch.moe.down_row = member_down_exps_row(down_exps->type, full);
  }
  MemberNeeds member;
  // The K/V rows across the group's edge, of its heads, in a session's two copies of a call's
  // (Session::kv_rows_in, ForwardReport::kv_rows_out), as a node's.
  for (const auto& [layers, heads, rows] :
       {std::tuple{kv_layers_mirrored(c, shape.range.begin, shape.range.end), &member.kv_in, &needs.kv_rows_in},
        std::tuple{kv_layers_shipped(c, shape.range.begin, shape.range.end), &member.kv_out, &needs.kv_rows_out}}) {
    for (int il : layers) {
      const int D = full.layers[il].head_dim;
      const MemberNeeds::KvHeads h{il, member_kv_heads(full, split, shape.member, il), full.layers[il].n_head_kv,
                                   kv_row_bytes(shape.k_type, D), kv_row_bytes(shape.v_type, D)};
      heads->push_back(h);
      rows->push_back({il, h.bytes_per_token()});
      needs.scratch_bytes += static_cast<uint64_t>(shape.max_tokens) * h.bytes_per_token();
    }
  }
  member.per_layer_floats = per_layer_input_floats(c, shape.range.begin, shape.range.end, shape.max_tokens);
  for (int j = 0; j < shape.n_members; ++j) {
    member.piece_floats = std::max<uint64_t>(member.piece_floats, member_call_floats(full, split, j, shape.max_tokens).piece);
  }
  const MemberCallFloats floats = member_call_floats(full, split, shape.member, shape.max_tokens);
  // The ends' calls: an embedding's rows and every layer's per-layer inputs (twice, as on a first
  // node), the head's normalized rows and its slice's logits.
  const auto rows = static_cast<uint64_t>(shape.max_tokens);
  uint64_t end_floats = 0;
  if (split.with_embedding) end_floats += rows * full.n_embd + 2 * per_layer_input_floats(full, 0, full.n_layer, shape.max_tokens);
  if (split.with_head) end_floats += rows * static_cast<uint64_t>(full.n_embd + split.vocab[shape.member].size());
  needs.scratch_bytes += scratch.bytes(0) + sizeof(float) * (floats.total() + member.per_layer_floats + end_floats);
  needs.scratch_bytes_per_worker = scratch.bytes(1) - scratch.bytes(0);
  member.node = std::move(needs);
  *out = std::move(member);
  return Status();
}

}  // namespace lf
