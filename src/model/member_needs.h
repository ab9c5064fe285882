// What member i of a tensor-parallel group of S over layers [begin, end) needs, known from the
// GGUF header before any tensor is read (docs/tensor-parallel.md): its slices of the layers'
// tensors, one session's KV cache (its KV heads only, f16 as a member's sessions hold it) and a
// call's buffers. From the code that allocates them, as node_needs is for a node, so that a host
// or plan can size a member for a budget (an edge isolate) before loading it.
#pragma once

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "model/member_split.h"
#include "model/model.h"
#include "model/node_needs.h"

namespace lf {

struct MemberShape {
  LayerRange range;
  int member = 0, n_members = 1;
  int max_ctx = 0;     // positions of a session; 0: the model's n_ctx_train
  int max_tokens = 1;  // rows of one call
  GgmlType k_type = GgmlType::F16, v_type = GgmlType::F16;  // the cache's (KvCacheOptions)
  bool ends = false;   // MemberLoadOptions::ends
};

struct MemberNeeds {
  // tensors, tensor_bytes, kv_bytes_per_session, scratch_bytes (the call's Scratch without
  // workers, its gathered vectors and pieces, a session's per-layer inputs and K/V rows, the
  // ends' calls) and scratch_bytes_per_worker; kv_rows_in / kv_rows_out of its heads.
  NodeNeeds node;
  // What a host hands the member in a call of max_tokens rows: the largest piece of any member
  // (one phase's), and the per-layer inputs of an E-model's range.
  uint64_t piece_floats = 0, per_layer_floats = 0;
  // Shared KV across the group's edge (docs/tensor-parallel.md, "Shared KV across the group's
  // edge"): the source layers before the range it mirrors, and those of the range whose readers
  // follow it, with the KV heads of each whose rows it takes or hands out of the layer's
  // n_head_kv, and a head's K and V row bytes. A position's rows of all heads are the K rows of
  // heads 0 .. n_head_kv, then their V rows; the member's are its heads' of each.
  struct KvHeads {
    int layer = 0;
    RowRange heads;
    int n_head_kv = 0;
    uint64_t k_row = 0, v_row = 0;
    uint64_t bytes_per_token() const { return static_cast<uint64_t>(heads.size()) * (k_row + v_row); }
  };
  std::vector<KvHeads> kv_in, kv_out;
};
Status member_needs(const GgufFile& file, const MemberShape& shape, MemberNeeds* out);

}  // namespace lf
