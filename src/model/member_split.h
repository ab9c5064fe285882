// How a layer range is cut across the S members of a tensor-parallel group
// (docs/tensor-parallel.md). Member i of S holds, in every layer, a contiguous run of whole
// attention units (KV heads with their query heads, norms and cache), and contiguous rows of
// attn_output, ffn_gate / ffn_up, ffn_down and of each expert's matrices. Every output value is
// then one whole dot product computed by one member, so a group's bytes are a single node's for
// every S. The split depends on the model and S alone; uneven S leaves some members a grain more.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "model/model.h"
#include "model/model_config.h"

namespace lf {

// Half-open rows [begin, end) of one axis.
struct RowRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Member i's slice of layer il.
struct MemberLayerSlice {
  RowRange kv_heads;  // of the layer's n_head_kv; may be empty
  RowRange embd;      // rows of attn_output, ffn_down and each expert's ffn_down_exps (n_embd axis)
  RowRange ff;        // rows of ffn_gate and ffn_up (the layer's n_ff axis)
  RowRange ff_exp;    // rows of each expert's gate and up (n_ff_exp axis); empty on a dense layer
};

struct MemberSplit {
  int n_members = 0;
  LayerRange range;
  std::vector<std::vector<MemberLayerSlice>> slices;  // [member][layer of range]
  // A group at a pipeline's end holds the model's end of its range, vocabulary-parallel: the
  // token embedding (and an E-model's per-layer embedding) when the range begins at layer 0,
  // output_norm and the head when it ends at the last layer; member i holds the rows vocab[i] of
  // token_embd, output and per_layer_token_embd, and per_layer_model_proj whole. Each token's
  // embedding and each logit is then computed whole by one member. Empty vocab: no end held.
  bool with_embedding = false, with_head = false;
  std::vector<RowRange> vocab;  // [member]

  const MemberLayerSlice& slice(int member, int il) const { return slices[member][il - range.begin]; }
};

// Rows of n_embd, n_ff and n_ff_exp are dealt in grains of this many (the row strips' width),
// or of the block of the weight they feed where that is wider: a member's FFN width is then a
// whole number of ffn_down's blocks, as a layer's FFN units are.
constexpr int64_t kMemberRowGrain = 4;

// The split of c's layers [range) over n_members (1 .. kMaxMembers): all members' slices; with
// ends, the model's ends the range touches too (MemberSplit::vocab).
// Refused by name: a shared-KV layer whose KV heads would not be split as its source layer's.
constexpr int kMaxMembers = 64;
Status split_members(const GgufFile& file, const ModelConfig& c, LayerRange range, int n_members, MemberSplit* out,
                     bool ends = false);

// The configuration member i runs: each layer of the range with the member's query and KV heads
// and FFN width, n_ff_exp its expert rows, and a source layer before the range that a shared-KV
// layer of it reads with the heads the member mirrors (member_kv_heads). Widths of the whole
// model stay in the full one.
ModelConfig member_config(const ModelConfig& c, const MemberSplit& split, int member);

// The KV heads of layer il whose cache member i keeps: its own, or, for a source before the
// range, those its shared-KV layers there read.
RowRange member_kv_heads(const ModelConfig& c, const MemberSplit& split, int member, int il);

// Where member i's bytes of a tensor lie in the file's tensor: the byte ranges, in order, whose
// concatenation the host places as that tensor (one range for a whole tensor or a row slice,
// one or two per expert for expert tensors), and the tensor as the member sees it (its shape
// with the member's rows). The vocabulary tables of a split with ends are the member's rows of
// them; other tensors outside the range's layers are the file's, whole.
struct ByteRange {
  uint64_t offset = 0, size = 0;  // relative to the tensor's first byte
};
struct MemberTensor {
  GgufTensorInfo info;            // the member's shape; n_bytes its bytes
  std::vector<ByteRange> ranges;  // into the file's tensor
};
Status member_tensor(const ModelConfig& c, const MemberSplit& split, int member, const GgufTensorInfo& t,
                     MemberTensor* out);

}  // namespace lf
