// C ABI over the MTP drafter (model/drafter.h): placed and loaded like a node's model, beside one.
#include <map>
#include <memory>
#include <string>

#include "capi/capi_internal.h"
#include "layerfold/capi.h"
#include "model/drafter.h"

struct lf_drafter {
  std::map<std::string, const uint8_t*, std::less<>> placed;
  lf::Drafter drafter;
  bool loaded = false;
  int n_threads = 1;
};

namespace {

using lf::Code;
using lf::Status;

bool check_loaded(const lf_drafter* drafter) {
  if (drafter && drafter->loaded) return true;
  return lf::capi::record(Status(Code::failed_precondition, "drafter is not loaded: call lf_drafter_load first"));
}

}  // namespace

extern "C" {

lf_drafter* lf_drafter_create(void) { return new lf_drafter(); }

int lf_drafter_place_tensor(lf_drafter* drafter, const char* name, const uint8_t* data) {
  if (drafter->loaded) return lf::capi::record(Status(Code::failed_precondition, "tensors cannot be placed after lf_drafter_load"));
  drafter->placed[name] = data;
  return 1;
}

int lf_drafter_set_threads(lf_drafter* drafter, int n_threads) {
  if (drafter->loaded) return lf::capi::record(Status(Code::failed_precondition, "the drafter's threads are set before lf_drafter_load"));
  if (n_threads < 1 || n_threads > lf::kMaxThreads) {
    return lf::capi::record(Status(Code::invalid_argument, "thread count " + std::to_string(n_threads) + " is outside [1, " +
                                                               std::to_string(lf::kMaxThreads) + "]"));
  }
  drafter->n_threads = n_threads;
  return 1;
}

int lf_drafter_load(lf_drafter* drafter, lf_gguf* gguf, const lf_model* target) {
  if (!drafter || !gguf || !target || !target->loaded) {
    return lf::capi::record(Status(Code::invalid_argument, "lf_drafter_load needs a drafter, its header and a loaded target"));
  }
  if (drafter->loaded) return lf::capi::record(Status(Code::failed_precondition, "the drafter is already loaded"));
  auto locate = [drafter](const lf::GgufTensorInfo& info) -> const uint8_t* {
    auto it = drafter->placed.find(info.name);
    return it == drafter->placed.end() ? nullptr : it->second;
  };
  // The host placed each tensor in a buffer of the drafter's own (lf_drafter_place_tensor).
  if (!lf::capi::record(lf::load_drafter(gguf->file, locate, target->model, drafter->n_threads, &drafter->drafter, true))) return 0;
  drafter->loaded = true;
  return 1;
}

int lf_drafter_step(const lf_drafter* drafter, const lf_session* target_session, int32_t token, const float* h,
                    float* logits, float* h_next) {
  if (!check_loaded(drafter)) return 0;
  if (!target_session) return lf::capi::record(Status(Code::invalid_argument, "lf_drafter_step needs the target's session"));
  return lf::capi::record(lf::draft_step(drafter->drafter, target_session->session, token, h, logits, h_next));
}

int lf_drafter_draft(const lf_drafter* drafter, const lf_session* target_session, int pos, int32_t token,
                     const float* hidden, int n_draft, int32_t* ids) {
  if (!check_loaded(drafter)) return 0;
  if (!target_session) return lf::capi::record(Status(Code::invalid_argument, "lf_drafter_draft needs the target's session"));
  return lf::capi::record(lf::draft_greedy(drafter->drafter, target_session->session, pos, token, hidden, n_draft, ids));
}

void lf_drafter_free(lf_drafter* drafter) {
  // Stop the workers before the rest goes.
  if (drafter != nullptr) drafter->drafter.model.pool.reset();
  delete drafter;
}

}  // extern "C"
