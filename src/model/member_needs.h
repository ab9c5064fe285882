// What member i of a tensor-parallel group of S over layers [begin, end) needs, known from the
// GGUF header before any tensor is read (docs/tensor-parallel.md): its slices of the layers'
// tensors, one session's KV cache (its KV heads only, f16 as a member's sessions hold it) and a
// call's buffers. From the code that allocates them, as node_needs is for a node, so that a host
// or plan can size a member for a budget (an edge isolate) before loading it.
#pragma once

#include "base/status.h"
#include "gguf/gguf_reader.h"
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
  // workers, its gathered vectors and pieces, a session's per-layer inputs, the ends' calls) and
  // scratch_bytes_per_worker; a member lays out nothing in place and ships no K/V rows.
  NodeNeeds node;
  // What a host hands the member in a call of max_tokens rows: the largest piece of any member
  // (one phase's), and the per-layer inputs of an E-model's range.
  uint64_t piece_floats = 0, per_layer_floats = 0;
};
Status member_needs(const GgufFile& file, const MemberShape& shape, MemberNeeds* out);

}  // namespace lf
