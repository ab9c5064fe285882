// C ABI over a tensor-parallel member (docs/tensor-parallel.md): what it places, its load, its
// sessions, and its forward call driven phase by phase.
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "capi/capi_internal.h"
#include "layerfold/capi.h"
#include "model/forward.h"
#include "model/member.h"
#include "model/member_forward.h"
#include "model/member_needs.h"
#include "model/per_layer_embd.h"

struct lf_member {
  std::map<std::string, const uint8_t*, std::less<>> placed;
  lf::Member member;
  bool loaded = false;
  lf::GgmlType kv_k_type = lf::GgmlType::F16, kv_v_type = lf::GgmlType::F16;  // lf_member_set_kv_types
};

struct lf_member_call {
  std::unique_ptr<lf::MemberForward> forward;
};

namespace {

using lf::Code;
using lf::Status;

bool check_loaded(const lf_member* member) {
  if (member->loaded) return true;
  return lf::capi::record(Status(Code::failed_precondition, "member is not loaded: call lf_member_load first"));
}

}  // namespace

extern "C" {

const char* lf_member_tensors_json(lf_gguf* gguf, int layer_begin, int layer_end, int member, int n_members, int ends) {
  lf::ModelConfig full;
  lf::MemberSplit split;
  std::vector<lf::MemberTensor> tensors;
  if (!lf::capi::record(lf::load_model_config(gguf->file, &full)) ||
      !lf::capi::record(lf::split_members(gguf->file, full, {layer_begin, layer_end}, n_members, &split, ends != 0))) {
    return nullptr;
  }
  if (member < 0 || member >= n_members) {
    lf::capi::record(Status(Code::invalid_argument, "member " + std::to_string(member) + " is not one of " + std::to_string(n_members)));
    return nullptr;
  }
  if (!lf::capi::record(lf::member_tensors(gguf->file, full, split, member, &tensors))) return nullptr;
  nlohmann::ordered_json out, list = nlohmann::ordered_json::array();
  uint64_t total = 0;
  for (const lf::MemberTensor& t : tensors) {
    nlohmann::ordered_json ranges = nlohmann::ordered_json::array();
    for (const lf::ByteRange& r : t.ranges) ranges.push_back({r.offset, r.size});
    list.push_back({{"name", t.info.name}, {"n_bytes", t.info.n_bytes}, {"ranges", ranges}});
    total += t.info.n_bytes;
  }
  out["tensors"] = list;
  out["weight_bytes"] = total;
  gguf->json = out.dump();
  return gguf->json.c_str();
}

const char* lf_member_needs_json(lf_gguf* gguf, int layer_begin, int layer_end, int member, int n_members, int max_ctx,
                                 int max_tokens, const char* k_type, const char* v_type, int ends) {
  lf::MemberNeeds needs;
  lf::MemberShape shape{{layer_begin, layer_end}, member, n_members, max_ctx, max_tokens};
  shape.ends = ends != 0;
  if (!lf::capi::record_kv_types(k_type, v_type, &shape.k_type, &shape.v_type)) return nullptr;
  if (!lf::capi::record(lf::member_needs(gguf->file, shape, &needs))) return nullptr;
  nlohmann::ordered_json out;
  out["tensor_bytes"] = needs.node.tensor_bytes;
  out["kv_bytes_per_session"] = needs.node.kv_bytes_per_session;
  out["scratch_bytes"] = needs.node.scratch_bytes;
  out["scratch_bytes_per_worker"] = needs.node.scratch_bytes_per_worker;
  out["relayout_bytes"] = needs.node.relayout_bytes;
  out["piece_floats"] = needs.piece_floats;
  out["per_layer_floats"] = needs.per_layer_floats;
  for (const auto& [key, layers] : {std::pair{"kv_rows_in", &needs.kv_in}, std::pair{"kv_rows_out", &needs.kv_out}}) {
    out[key] = nlohmann::ordered_json::array();
    for (const lf::MemberNeeds::KvHeads& l : *layers) {
      out[key].push_back({{"layer", l.layer}, {"bytes_per_token", l.bytes_per_token()},
                          {"heads", {l.heads.begin, l.heads.end}}, {"n_head_kv", l.n_head_kv}, {"k_row", l.k_row}, {"v_row", l.v_row}});
    }
  }
  out["tensors"] = needs.node.tensors;
  gguf->json = out.dump();
  return gguf->json.c_str();
}

lf_member* lf_member_create(void) { return new lf_member(); }

int lf_member_place_tensor(lf_member* member, const char* name, const uint8_t* data) {
  if (member->loaded) return lf::capi::record(Status(Code::failed_precondition, "tensors cannot be placed after lf_member_load"));
  member->placed[name] = data;
  return 1;
}

int lf_member_load(lf_member* member, lf_gguf* gguf, int layer_begin, int layer_end, int index, int n_members,
                   int n_threads, int ends) {
  if (member->loaded) return lf::capi::record(Status(Code::failed_precondition, "the member is loaded already"));
  auto locate = [member](const lf::GgufTensorInfo& info) -> const uint8_t* {
    auto it = member->placed.find(info.name);
    return it == member->placed.end() ? nullptr : it->second;
  };
  // The host placed each tensor in a buffer of the member's own (lf_member_place_tensor).
  const lf::MemberLoadOptions options{{layer_begin, layer_end}, index, n_members, n_threads, true, ends != 0};
  if (!lf::capi::record(lf::load_member(gguf->file, locate, options, &member->member))) return 0;
  member->loaded = true;
  return 1;
}

int lf_member_vocab_begin(const lf_member* member) {
  const lf::Model& m = member->member.model;
  return m.has_embedding || m.has_head ? static_cast<int>(m.vocab_begin) : 0;
}

int lf_member_vocab_end(const lf_member* member) {
  const lf::Model& m = member->member.model;
  return m.has_embedding || m.has_head ? static_cast<int>(m.vocab_end) : 0;
}

int lf_member_embed(const lf_member* member, const int32_t* tokens, int n, float* out) {
  return check_loaded(member) && lf::capi::record(lf::embed(member->member.model, tokens, n, out));
}

int lf_member_per_layer_inputs(const lf_member* member, const int32_t* tokens, int n, const float* x0, float* out) {
  return check_loaded(member) && lf::capi::record(lf::per_layer_inputs(member->member.model, tokens, n, x0, out));
}

int lf_member_head(const lf_member* member, const float* hidden, int n_rows, float* logits) {
  return check_loaded(member) && lf::capi::record(lf::head(member->member.model, hidden, n_rows, logits));
}

int lf_member_set_kv_types(lf_member* member, const char* k_type, const char* v_type) {
  return lf::capi::record_kv_types(k_type, v_type, &member->kv_k_type, &member->kv_v_type);
}

lf_session* lf_member_session_create(const lf_member* member, int max_ctx) {
  if (!check_loaded(member)) return nullptr;
  auto session = std::make_unique<lf_session>();
  lf::KvCacheOptions options;
  options.max_ctx = max_ctx;
  options.k_type = member->kv_k_type;
  options.v_type = member->kv_v_type;
  if (!lf::capi::record(lf::Session::create(member->member.model, options, &session->session))) return nullptr;
  return session.release();
}

void lf_member_free(lf_member* member) { delete member; }

lf_member_call* lf_member_begin(const lf_member* member, lf_session* session, int start_pos, const float* in, int n) {
  if (!check_loaded(member)) return nullptr;
  if (!in || n <= 0) {
    lf::capi::record(Status(Code::invalid_argument, "a member call needs n > 0 rows of input"));
    return nullptr;
  }
  auto call = std::make_unique<lf_member_call>();
  const size_t floats = static_cast<size_t>(n) * static_cast<size_t>(member->member.full.n_embd);
  if (!lf::capi::record(lf::MemberForward::begin(member->member, session->session, start_pos, {in, floats}, n, &call->forward))) {
    return nullptr;
  }
  return call.release();
}

lf_member_call* lf_member_begin_async(const lf_member* member, lf_session* session, int start_pos, const float* in, int n,
                                      int32_t* done_flag) {
  if (!check_loaded(member)) return nullptr;
  if (!in || n <= 0 || !done_flag) {
    lf::capi::record(Status(Code::invalid_argument, "an async member call needs n > 0 rows of input and a done flag"));
    return nullptr;
  }
  *done_flag = 0;
  auto call = std::make_unique<lf_member_call>();
  const size_t floats = static_cast<size_t>(n) * static_cast<size_t>(member->member.full.n_embd);
  if (!lf::capi::record(lf::MemberForward::begin_async(member->member, session->session, start_pos, {in, floats}, n,
                                                       [done_flag] { lf::capi::publish(done_flag, 1); }, &call->forward))) {
    return nullptr;
  }
  return call.release();
}

int lf_member_step_async(lf_member_call* call, int32_t* done_flag) {
  if (!done_flag) return lf::capi::record(Status(Code::invalid_argument, "an async step needs a done flag"));
  *done_flag = 0;
  return lf::capi::record(call->forward->step_async([done_flag] { lf::capi::publish(done_flag, 1); }));
}

int lf_member_phase_end(lf_member_call* call) { return lf::capi::record(call->forward->end_phase()); }

int lf_member_call_layer(const lf_member_call* call) { return call->forward->done() ? -1 : call->forward->layer(); }
int lf_member_call_phase(const lf_member_call* call) {
  return call->forward->done() ? -1 : static_cast<int>(call->forward->phase());
}

const float* lf_member_piece(const lf_member_call* call) { return call->forward->piece().data(); }

int lf_member_piece_floats(const lf_member_call* call, int member) {
  if (call->forward->done()) return 0;
  return static_cast<int>(call->forward->piece_floats(member));
}

int lf_member_put_piece(lf_member_call* call, int member, const float* piece, int n_floats) {
  if (!piece && n_floats > 0) return lf::capi::record(Status(Code::invalid_argument, "no piece given"));
  return lf::capi::record(call->forward->put_piece(member, {piece, static_cast<size_t>(n_floats < 0 ? 0 : n_floats)}));
}

int lf_member_step(lf_member_call* call) { return lf::capi::record(call->forward->step()); }

const float* lf_member_output(const lf_member_call* call) {
  return call->forward->done() ? call->forward->output().data() : nullptr;
}

void lf_member_call_free(lf_member_call* call) { delete call; }

}  // extern "C"
