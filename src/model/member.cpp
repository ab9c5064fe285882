#include "model/member.h"

#include <cstdio>
#include <string>

namespace lf {
namespace {

bool in_range(const std::string& name, LayerRange range) {
  int il = -1;
  return std::sscanf(name.c_str(), "blk.%d.", &il) == 1 && il >= range.begin && il < range.end;
}

// The tensors of the model's ends a split holds (MemberSplit::with_embedding, with_head).
bool at_end(const std::string& name, const ModelConfig& c, const MemberSplit& split) {
  const bool embedding = name == "token_embd.weight" || name == "per_layer_token_embd.weight" ||
                         name == "per_layer_model_proj.weight" || name == "per_layer_proj_norm.weight";
  const bool head = name == "output_norm.weight" || name == (c.tied_output ? "token_embd.weight" : "output.weight");
  return (split.with_embedding && embedding) || (split.with_head && head);
}

}  // namespace

Status member_tensors(const GgufFile& file, const ModelConfig& full, const MemberSplit& split, int member,
                      std::vector<MemberTensor>* out) {
  bool needs_freq_factors = false;
  for (int il = split.range.begin; il < split.range.end; ++il) needs_freq_factors = needs_freq_factors || full.layers[il].use_freq_factors;
  out->clear();
  for (const GgufTensorInfo& t : file.tensors) {
    if (!in_range(t.name, split.range) && !(needs_freq_factors && t.name == "rope_freqs.weight") &&
        !at_end(t.name, full, split)) {
      continue;
    }
    LF_RETURN_IF_ERROR(member_tensor(full, split, member, t, &out->emplace_back()));
  }
  return Status();
}

Status load_member(const GgufFile& file, const TensorLocator& locate, const MemberLoadOptions& o, Member* out) {
  Member m;
  m.index = o.member;
  LF_RETURN_IF_ERROR(load_model_config(file, &m.full));
  LF_RETURN_IF_ERROR(split_members(file, m.full, o.range, o.n_members, &m.split, o.ends));
  if (o.member < 0 || o.member >= o.n_members) {
    return Status(Code::invalid_argument, "member " + std::to_string(o.member) + " is not one of " +
                                              std::to_string(o.n_members));
  }
  // The file as this member sees it: its tensors with the member's shapes.
  GgufFile mine = file;
  for (GgufTensorInfo& t : mine.tensors) {
    MemberTensor mt;
    LF_RETURN_IF_ERROR(member_tensor(m.full, m.split, o.member, t, &mt));
    t = mt.info;
  }
  ModelLoadOptions options;
  options.range = o.range;
  options.n_threads = o.n_threads;
  options.relayout_in_place = o.relayout_in_place;
  options.with_embedding = m.split.with_embedding;
  options.with_head = m.split.with_head;
  if (!m.split.vocab.empty()) {
    options.vocab_begin = m.split.vocab[o.member].begin;
    options.vocab_end = m.split.vocab[o.member].end;
  }
  LF_RETURN_IF_ERROR(load_model_with_config(mine, locate, member_config(m.full, m.split, o.member), options, &m.model));
  *out = std::move(m);
  return Status();
}

}  // namespace lf
