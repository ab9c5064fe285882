// Shared by the C ABI translation units: the handles behind the opaque pointers, and how a
// Status becomes the per-thread last error.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "base/status.h"
#include "model/model.h"
#include "model/read_probe.h"
#include "model/session.h"

// Handle behind lf_gguf*: the parsed header and the last JSON handed out from it.
struct lf_gguf {
  lf::GgufFile file;
  std::string json;
};

struct lf_model {
  std::map<std::string, const uint8_t*, std::less<>> placed;
  lf::Model model;
  bool loaded = false;
  int n_threads = 1;
  bool ffn_down_feature_major = false;
  bool per_layer_rows_from_host = false;
  lf::GgmlType kv_k_type = lf::GgmlType::F16, kv_v_type = lf::GgmlType::F16;  // lf_model_set_kv_types
  int attn_chunk = lf::kAttnChunk;  // of its sessions: lf_model_set_max_span
  lf::Status async_status;  // outcome of the last lf_forward_async, written before its flag flips
  mutable std::vector<lf::Status> batch_statuses;  // the entries' outcomes of the last finished batch
  lf::ReadProbe probe;      // the last finished lf_model_read_probe_async, written before its flag flips
  bool probed = false;
  mutable std::string timings_json, probe_json, batch_json;  // the last answers of the JSON getters
};

struct lf_session {
  lf::Session session;
  mutable std::string approx_stats_json, timings_json;  // the last answers of the JSON getters
};

namespace lf::capi {

// Records status as the calling thread's last error; returns status.ok().
bool record(const Status& status);

// The K and V cache types named k_type and v_type (NULL: f16), or the error recorded.
bool record_kv_types(const char* k_type, const char* v_type, GgmlType* k, GgmlType* v);

// *flag = value, seen by a host thread waiting on it (JS: Atomics.waitAsync on wasm memory).
void publish(int32_t* flag, int32_t value);

}  // namespace lf::capi
