// C ABI over the engine: models placed by the host, sessions, embed / forward / head.
#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "capi/approx_json.h"
#include "capi/capi_internal.h"
#include "layerfold/capi.h"
#include "model/forward.h"
#include "model/per_layer_embd.h"
#include "gguf/gguf_reader.h"
#include "model/session.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/read_probe.h"


namespace {

using lf::Code;
using lf::Status;

bool check_loaded(const lf_model* model) {
  if (model != nullptr && model->loaded) return true;
  return lf::capi::record(Status(Code::failed_precondition, "model is not loaded: call lf_model_load first"));
}


}  // namespace

extern "C" {

lf_model* lf_model_create(void) { return new lf_model(); }

int lf_model_place_tensor(lf_model* model, const char* name, const uint8_t* data) {
  if (model->loaded) {
    return lf::capi::record(Status(Code::failed_precondition, "tensors cannot be placed after lf_model_load"));
  }
  model->placed[name] = data;
  return 1;
}

int lf_model_load(lf_model* model, lf_gguf* gguf, int layer_begin, int layer_end, int with_embedding,
                  int with_head) {
  lf::ModelLoadOptions options;
  options.range = {layer_begin, layer_end};
  options.with_embedding = with_embedding != 0;
  options.with_head = with_head != 0;
  options.n_threads = model->n_threads;
  // The host (js-glue) places every tensor in memory of its own for this model alone, so the
  // weights may be rewritten into the layout this build's kernels read where they lie.
  options.relayout_in_place = true;
  options.ffn_down_feature_major = model->ffn_down_feature_major;
  options.per_layer_rows_from_host = model->per_layer_rows_from_host;
  auto locate = [model](const lf::GgufTensorInfo& info) -> const uint8_t* {
    auto it = model->placed.find(info.name);
    return it == model->placed.end() ? nullptr : it->second;
  };
  if (!lf::capi::record(lf::load_model(gguf->file, locate, options, &model->model))) return 0;
  model->loaded = true;
  return 1;
}

int lf_model_set_threads(lf_model* model, int n_threads) {
  if (!model->loaded) {
    if (n_threads < 1 || n_threads > lf::kMaxThreads) {
      return lf::capi::record(Status(Code::invalid_argument, "thread count " + std::to_string(n_threads) +
                                                                 " is outside [1, " + std::to_string(lf::kMaxThreads) + "]"));
    }
    model->n_threads = n_threads;
    return 1;
  }
  return lf::capi::record(lf::set_threads(&model->model, n_threads));
}

int lf_model_set_ffn_down_layout(lf_model* model, const char* layout) {
  if (model->loaded) {
    return lf::capi::record(Status(Code::failed_precondition, "the ffn_down layout is chosen before lf_model_load"));
  }
  const std::string name = layout == nullptr ? "" : layout;
  if (name != "units" && name != "features") {
    return lf::capi::record(Status(Code::invalid_argument, "ffn_down layout \"" + name + "\": expected units or features"));
  }
  model->ffn_down_feature_major = name == "features";
  return 1;
}

int lf_model_set_per_layer_rows(lf_model* model, int from_host) {
  if (model->loaded) {
    return lf::capi::record(Status(Code::failed_precondition, "where per_layer_token_embd's rows come from is chosen before lf_model_load"));
  }
  model->per_layer_rows_from_host = from_host != 0;
  return 1;
}

int lf_model_set_kv_types(lf_model* model, const char* k_type, const char* v_type) {
  return lf::capi::record_kv_types(k_type, v_type, &model->kv_k_type, &model->kv_v_type);
}

int lf_model_set_max_span(lf_model* model, int max_span) {
  return lf::capi::record(lf::attn_chunk_for(max_span, &model->attn_chunk));
}

int lf_model_threads(const lf_model* model) {
  return model->loaded ? model->model.pool->size() : model->n_threads;
}

int lf_model_n_embd(const lf_model* model) { return model->model.config.n_embd; }
int lf_model_n_vocab(const lf_model* model) { return model->model.config.n_vocab; }
int lf_model_n_layer(const lf_model* model) { return model->model.config.n_layer; }
void lf_model_free(lf_model* model) {
  // Stop the workers first: a running job's completion still writes async_status.
  if (model != nullptr) model->model.pool.reset();
  delete model;
}

lf_session* lf_session_create(const lf_model* model, int max_ctx) {
  if (!check_loaded(model)) return nullptr;
  auto session = std::make_unique<lf_session>();
  lf::KvCacheOptions options;
  options.max_ctx = max_ctx;
  options.k_type = model->kv_k_type;
  options.v_type = model->kv_v_type;
  options.attn_chunk = model->attn_chunk;
  if (!lf::capi::record(lf::Session::create(model->model, options, &session->session))) return nullptr;
  return session.release();
}

int lf_session_n_past(const lf_session* session) { return session->session.n_past(); }
double lf_session_bytes(const lf_session* session) { return static_cast<double>(session->session.bytes()); }
void lf_session_free(lf_session* session) { delete session; }
double lf_session_kv_digest(const lf_session* session) { return static_cast<double>(session->session.kv.digest() >> 11); }

int lf_session_truncate(lf_session* session, int n_past) {
  if (!session) {
    lf::capi::record(Status(Code::invalid_argument, "lf_session_truncate needs a session"));
    return -1;
  }
  int reached = 0;
  return lf::capi::record(session->session.truncate(n_past, &reached)) ? reached : -1;
}

int lf_session_checkpoint(lf_session* session, int max_count) {
  if (!session) return lf::capi::record(Status(Code::invalid_argument, "lf_session_checkpoint needs a session"));
  return lf::capi::record(session->session.checkpoint(max_count));
}

const char* lf_session_timings_json(const lf_session* session) {
  const lf::ForwardReport& r = session->session.last;
  nlohmann::ordered_json out;
  out["layer_ms"] = r.layer_ms;
  out["attention_ms"] = r.attention_ms;
  out["ffn_ms"] = r.ffn_ms;
  out["serial_ms"] = r.serial_ms;
  session->timings_json = out.dump();
  return session->timings_json.c_str();
}

const char* lf_model_worker_timings_json(const lf_model* model) {
  if (!check_loaded(model)) return nullptr;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const lf::ThreadPool::WorkerTimes& w : model->model.pool->last_job_times()) {
    out.push_back({{"job_ms", w.job_ms}, {"barrier_ms", w.barrier_ms}});
  }
  model->timings_json = out.dump();
  return model->timings_json.c_str();
}

int lf_session_set_approx(lf_session* session, const char* json) {
  return lf::capi::record(lf::capi::parse_approx_options(json, &session->session.approx));
}

int lf_session_set_exit_state(lf_session* session, const char* json) {
  return lf::capi::record(lf::capi::parse_exit_state(json, &session->session.exit_in));
}

const char* lf_session_approx_stats(const lf_session* session) {
  session->approx_stats_json = lf::capi::approx_stats_json(session->session.last);
  return session->approx_stats_json.c_str();
}

int lf_embed(const lf_model* model, const int32_t* tokens, int n, float* out) {
  return check_loaded(model) && lf::capi::record(lf::embed(model->model, tokens, n, out));
}

int lf_per_layer_inputs(const lf_model* model, const int32_t* tokens, int n, const float* x0, float* out) {
  return check_loaded(model) && lf::capi::record(lf::per_layer_inputs(model->model, tokens, n, x0, out));
}

int lf_per_layer_inputs_from_rows(const lf_model* model, const int32_t* tokens, int n, const float* x0,
                                  const int32_t* row_ids, int n_rows, const uint8_t* rows, double row_bytes, float* out) {
  if (!check_loaded(model)) return 0;
  if (!(row_bytes >= 0 && row_bytes <= static_cast<double>(UINT32_MAX)) ||
      row_bytes != static_cast<double>(static_cast<uint64_t>(row_bytes))) {
    return lf::capi::record(Status(Code::invalid_argument, "per_layer_token_embd row_bytes must be a whole number of bytes"));
  }
  const lf::PerLayerRows given{row_ids, n_rows, rows, static_cast<uint64_t>(row_bytes)};
  return lf::capi::record(lf::per_layer_inputs_from_rows(model->model, tokens, n, x0, given, out));
}

int lf_session_set_per_layer_inputs(lf_session* session, const float* in, int n_floats) {
  if (n_floats < 0 || (n_floats > 0 && !in)) {
    return lf::capi::record(Status(Code::invalid_argument, "per-layer inputs need n_floats >= 0 and a buffer"));
  }
  session->session.per_layer_in.assign(in, in + n_floats);
  return 1;
}

void lf_session_set_span(lf_session* session, int span) { session->session.span_in = span != 0; }

int lf_session_set_kv_rows(lf_session* session, int layer, int pos0, int n, const uint8_t* bytes, double n_bytes) {
  if (n < 0 || !(n_bytes >= 0 && n_bytes <= static_cast<double>(SIZE_MAX)) || (n_bytes > 0 && !bytes)) {
    return lf::capi::record(Status(Code::invalid_argument, "K/V rows need n >= 0, n_bytes >= 0 and a buffer"));
  }
  std::vector<lf::KvRows>& given = session->session.kv_rows_in;
  auto it = std::find_if(given.begin(), given.end(), [layer](const lf::KvRows& r) { return r.layer == layer; });
  if (it == given.end()) it = given.insert(given.end(), lf::KvRows{});
  *it = lf::KvRows{layer, pos0, n, std::vector<uint8_t>(bytes, bytes + static_cast<size_t>(n_bytes))};
  return 1;
}

void lf_session_clear_kv_rows(lf_session* session) { session->session.kv_rows_in.clear(); }

namespace {

const lf::KvRows* kv_rows_out(const lf_session* session, int layer) {
  for (const lf::KvRows& rows : session->session.last.kv_rows_out) {
    if (rows.layer == layer) return &rows;
  }
  lf::capi::record(Status(Code::not_found, "the session's last forward handed out no K/V rows of layer " + std::to_string(layer)));
  return nullptr;
}

}  // namespace

double lf_session_kv_rows_bytes(const lf_session* session, int layer) {
  const lf::KvRows* rows = kv_rows_out(session, layer);
  return rows ? static_cast<double>(rows->bytes.size()) : -1;
}

const uint8_t* lf_session_kv_rows(const lf_session* session, int layer) {
  const lf::KvRows* rows = kv_rows_out(session, layer);
  return rows ? rows->bytes.data() : nullptr;
}

int lf_forward(const lf_model* model, lf_session* session, int start_pos, const float* in, int n, float* out,
               int last_only) {
  return check_loaded(model) &&
         lf::capi::record(lf::forward(model->model, session->session, start_pos, in, n, out, last_only != 0));
}

int lf_forward_async(lf_model* model, lf_session* session, int start_pos, const float* in, int n, float* out,
                     int last_only, int32_t* done_flag) {
  if (!check_loaded(model)) return 0;
  if (n <= 0 || !in || !out || !done_flag) {
    return lf::capi::record(Status(Code::invalid_argument, "lf_forward_async needs n > 0, buffers and a done flag"));
  }
  *done_flag = 0;
  const size_t n_embd = static_cast<size_t>(model->model.config.n_embd);
  return lf::capi::record(lf::forward_async(
      model->model, session->session, start_pos, std::span<const float>(in, n * n_embd), n,
      std::span<float>(out, (last_only ? 1 : n) * n_embd), last_only != 0, [model, done_flag](const Status& status) {
        model->async_status = status;
        lf::capi::publish(done_flag, status.ok() ? 1 : 2);
      }));
}

int lf_forward_async_result(const lf_model* model) { return lf::capi::record(model->async_status); }

namespace {

// The C arrays of lf_forward_batch as entries and buffers, or why they cannot be.
Status batch_args(const lf_model* model, int n_entries, lf_session* const* sessions, const int32_t* start_pos,
                  const int32_t* n, const int32_t* last_only, const float* in, float* out,
                  std::vector<lf::BatchEntry>* entries, std::span<const float>* in_rows, std::span<float>* out_rows) {
  if (n_entries < 1 || !sessions || !start_pos || !n || !last_only || !in || !out) {
    return Status(Code::invalid_argument, "a batched forward needs n_entries >= 1, its arrays and buffers");
  }
  size_t rows_in = 0, rows_out = 0;
  for (int i = 0; i < n_entries; ++i) {
    if (!sessions[i]) return Status(Code::invalid_argument, "entry " + std::to_string(i) + ": no session");
    if (n[i] <= 0) {
      return Status(Code::invalid_argument, "entry " + std::to_string(i) + ": n must be positive, got " + std::to_string(n[i]));
    }
    entries->push_back({&sessions[i]->session, start_pos[i], n[i], last_only[i] != 0});
    rows_in += static_cast<size_t>(n[i]);
    rows_out += last_only[i] ? 1 : static_cast<size_t>(n[i]);
  }
  const size_t n_embd = static_cast<size_t>(model->model.config.n_embd);
  *in_rows = std::span<const float>(in, rows_in * n_embd);
  *out_rows = std::span<float>(out, rows_out * n_embd);
  return Status();
}

}  // namespace

int lf_forward_batch(const lf_model* model, int n_entries, lf_session* const* sessions, const int32_t* start_pos,
                     const int32_t* n, const int32_t* last_only, const float* in, float* out) {
  if (!check_loaded(model)) return 0;
  std::vector<lf::BatchEntry> entries;
  std::span<const float> in_rows;
  std::span<float> out_rows;
  if (!lf::capi::record(batch_args(model, n_entries, sessions, start_pos, n, last_only, in, out, &entries, &in_rows, &out_rows))) {
    return 0;
  }
  std::vector<Status> statuses;
  if (!lf::capi::record(lf::forward_batch(model->model, entries, in_rows, out_rows, &statuses))) return 0;
  model->batch_statuses = std::move(statuses);
  return 1;
}

int lf_forward_batch_async(lf_model* model, int n_entries, lf_session* const* sessions, const int32_t* start_pos,
                           const int32_t* n, const int32_t* last_only, const float* in, float* out, int32_t* done_flag) {
  if (!check_loaded(model)) return 0;
  if (!done_flag) return lf::capi::record(Status(Code::invalid_argument, "lf_forward_batch_async needs a done flag"));
  std::vector<lf::BatchEntry> entries;
  std::span<const float> in_rows;
  std::span<float> out_rows;
  if (!lf::capi::record(batch_args(model, n_entries, sessions, start_pos, n, last_only, in, out, &entries, &in_rows, &out_rows))) {
    return 0;
  }
  *done_flag = 0;
  return lf::capi::record(lf::forward_batch_async(model->model, entries, in_rows, out_rows,
                                                  [model, done_flag](std::vector<Status> statuses) {
                                                    model->batch_statuses = std::move(statuses);
                                                    model->async_status = Status();
                                                    lf::capi::publish(done_flag, 1);
                                                  }));
}

const char* lf_forward_batch_result_json(const lf_model* model) {
  if (!model) {
    lf::capi::record(Status(Code::invalid_argument, "lf_forward_batch_result_json needs a model"));
    return nullptr;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const Status& status : model->batch_statuses) {
    nlohmann::json entry = {{"code", static_cast<int>(status.code())}};
    if (!status.ok()) entry["message"] = status.message();
    out.push_back(std::move(entry));
  }
  model->batch_json = out.dump();
  return model->batch_json.c_str();
}

int lf_model_read_probe_async(lf_model* model, int32_t* done_flag) {
  if (!check_loaded(model)) return 0;
  if (!done_flag) return lf::capi::record(Status(Code::invalid_argument, "lf_model_read_probe_async needs a done flag"));
  *done_flag = 0;
  return lf::capi::record(lf::read_probe_async(model->model, [model, done_flag](const lf::ReadProbe& probe) {
    model->probe = probe;
    model->probed = true;
    lf::capi::publish(done_flag, 1);
  }));
}

const char* lf_model_read_probe_json(const lf_model* model) {
  if (!check_loaded(model)) return nullptr;
  if (!model->probed) {
    lf::capi::record(Status(Code::failed_precondition, "no read probe has finished on this model"));
    return nullptr;
  }
  nlohmann::ordered_json out;
  out["bytes"] = model->probe.bytes;
  out["ms"] = model->probe.ms;
  out["checksum"] = model->probe.checksum;
  model->probe_json = out.dump();
  return model->probe_json.c_str();
}

int lf_head(const lf_model* model, const float* hidden, int n_rows, float* logits) {
  return check_loaded(model) && lf::capi::record(lf::head(model->model, hidden, n_rows, logits));
}

int lf_head_async(lf_model* model, const float* hidden, int n_rows, float* logits, int32_t* done_flag) {
  if (!check_loaded(model)) return 0;
  if (!done_flag) return lf::capi::record(Status(Code::invalid_argument, "lf_head_async needs a done flag"));
  *done_flag = 0;
  return lf::capi::record(lf::head_async(model->model, hidden, n_rows, logits, [model, done_flag](const Status& status) {
    model->async_status = status;
    lf::capi::publish(done_flag, status.ok() ? 1 : 2);
  }));
}

}  // extern "C"
