// One member of a tensor-parallel group: its slices of a layer range's weights
// (model/member_split.h), loaded as a Model whose configuration has the member's heads and FFN
// widths, so that its sessions hold only its KV heads' cache (docs/tensor-parallel.md).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "model/member_split.h"
#include "model/model.h"

namespace lf {

struct Member {
  int index = 0;       // i of the group's n_members
  ModelConfig full;    // the whole model's configuration (the gathered vectors' widths)
  MemberSplit split;   // every member's slices, to place their pieces
  Model model;         // this member's weights; model.config = member_config(full, split, index)
};

struct MemberLoadOptions {
  LayerRange range;
  int member = 0, n_members = 1;
  int n_threads = 1;  // workers of the member's pool
  // The located bytes are writable and this member's alone: its Q4_0 matmul slices are laid out
  // in row strips in place where the build's kernel reads them so (ModelLoadOptions).
  bool relayout_in_place = false;
  // Hold the model's ends the range touches, a vocabulary slice of them (MemberSplit::vocab).
  bool ends = false;
};

// The tensors member i of a group over `range` loads, each with the byte ranges of the file's
// tensor the host places for it (in order, one after another): the layers' tensors (the
// member's rows of its matrices, norms and the rest whole), rope_freqs when a layer reads it,
// and the model's ends the split holds (its rows of the vocabulary tables, the rest whole).
Status member_tensors(const GgufFile& file, const ModelConfig& full, const MemberSplit& split, int member,
                      std::vector<MemberTensor>* out);

// Loads member o.member of o.n_members over layers o.range. locate is handed each tensor's
// member shape (member_tensors' info) and returns where the host put its bytes: the
// concatenation of that tensor's ranges. Without o.ends a member has no embedding and no head:
// the group's input and output are the hidden states; with them, embed() takes the tokens of
// its vocabulary slice and head() gives their logits (Model::vocab_begin).
Status load_member(const GgufFile& file, const TensorLocator& locate, const MemberLoadOptions& o, Member* out);

}  // namespace lf
