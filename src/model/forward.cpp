#include "model/forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "approx/early_exit.h"
#include "base/thread_pool.h"
#include "model/batch_rows.h"
#include "model/layer.h"
#include "model/per_layer_embd.h"
#include "model/scratch.h"
#include "ops/ops.h"
#include "quant/finite_check.h"
#include "quant/quant.h"

namespace lf {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The session's per-layer inputs for this call (per_layer_embd.h): exactly the node's layers'
// for n tokens when the model has them, none otherwise.
Status check_per_layer_inputs(const Model& m, const Session& s, int n) {
  const uint64_t needed = per_layer_input_floats(m.config, m.range.begin, m.range.end, n);
  if (s.per_layer_in.size() != needed) {
    return Status(Code::invalid_argument,
                  "the session holds " + std::to_string(s.per_layer_in.size()) +
                      " per-layer input floats, expected layers x n x n_embd_per_layer = " + std::to_string(needed) +
                      (needed > 0 ? " (set them before each forward of a model with per-layer embeddings)" : ""));
  }
  return check_finite_rows(s.per_layer_in, std::max(1, m.config.n_embd_per_layer), "per-layer input");
}

// The session's shipped K/V rows for this call: one KvRows per layer its cache mirrors, each of
// positions [start_pos, start_pos + n), of the source's size, finite.
Status check_kv_rows(const Model& m, const Session& s, int start_pos, int n) {
  const std::vector<int>& mirrored = s.kv.mirrored();
  const std::string node = "layers [" + std::to_string(m.range.begin) + ", " + std::to_string(m.range.end) + ")";
  if (mirrored.empty() && !s.kv_rows_in.empty()) {
    return Status(Code::invalid_argument, "K/V rows of layer " + std::to_string(s.kv_rows_in.front().layer) +
                                              " were given, but " + node + " read no other node's KV cache");
  }
  for (const KvRows& rows : s.kv_rows_in) {
    if (std::find(mirrored.begin(), mirrored.end(), rows.layer) == mirrored.end()) {
      return Status(Code::invalid_argument, "K/V rows of layer " + std::to_string(rows.layer) + " were given, but " + node +
                                                " read no cache of that layer from another node");
    }
  }
  for (int il : mirrored) {
    const std::string which = "layer " + std::to_string(il) + "'s K/V rows";
    const auto rows = std::find_if(s.kv_rows_in.begin(), s.kv_rows_in.end(), [il](const KvRows& r) { return r.layer == il; });
    if (rows == s.kv_rows_in.end()) {
      return Status(Code::invalid_argument, which + " are missing: shared-KV layers of " + node +
                                                " attend over its cache, which the node of layer " + std::to_string(il) +
                                                " hands out with each forward");
    }
    if (rows->pos0 != start_pos || rows->n != n) {
      return Status(Code::failed_precondition,
                    which + " are for positions [" + std::to_string(rows->pos0) + ", " + std::to_string(rows->pos0 + rows->n) +
                        "), but the call runs positions [" + std::to_string(start_pos) + ", " + std::to_string(start_pos + n) + ")");
    }
    const uint64_t expected = 2 * static_cast<uint64_t>(n) * static_cast<uint64_t>(m.config.layers[il].kv_dim());
    if (rows->values.size() != expected) {
      return Status(Code::invalid_argument, which + " hold " + std::to_string(rows->values.size()) +
                                                " f16 values, expected n x 2 x n_head_kv x head_dim = " + std::to_string(expected));
    }
    for (size_t i = 0; i < rows->values.size(); ++i) {
      if ((rows->values[i] & 0x7c00) == 0x7c00) {
        return Status(Code::invalid_argument, which + " hold a non-finite value at position " +
                                                  std::to_string(rows->pos0 + static_cast<int>(i / (expected / n))));
      }
    }
  }
  return Status();
}

// An entry as forward() would take it alone: its session's range, position and room, the mode
// it asks for, its input rows and per-layer inputs.
Status validate_entry(const Model& m, const BatchEntry& e, std::span<const float> in) {
  const Session& s = *e.session;
  if (s.range().begin != m.range.begin || s.range().end != m.range.end) {
    return Status(Code::invalid_argument, "session was created for another layer range");
  }
  if (e.start_pos != s.n_past()) {
    return Status(Code::failed_precondition, "start_pos " + std::to_string(e.start_pos) +
                                                 " does not match the session's n_past " + std::to_string(s.n_past()));
  }
  if (static_cast<int64_t>(e.start_pos) + e.n > s.max_ctx()) {
    return Status(Code::resource_exhausted, "context overflow: " + std::to_string(e.start_pos) + " + " +
                                                std::to_string(e.n) + " positions exceed max_ctx " + std::to_string(s.max_ctx()));
  }
  if (s.approx.top_k_ffn_on()) {
    for (int il = m.range.begin; il < m.range.end; ++il) {
      if (m.config.layers[il].moe) {
        return Status(Code::unsupported, "the top-K gate FFN is not supported on mixture-of-experts layers (layer " +
                                             std::to_string(il) + " routes to experts)");
      }
    }
  }
  LF_RETURN_IF_ERROR(check_norm_input_rows(in, m.config.n_embd, "input"));
  LF_RETURN_IF_ERROR(check_kv_rows(m, s, e.start_pos, e.n));
  return check_per_layer_inputs(m, s, e.n);
}

int out_rows(const BatchEntry& e) { return e.last_only ? 1 : e.n; }

// The call as a whole: entries with rows, distinct sessions, buffers of the rows' sizes.
Status validate_batch(const Model& m, std::span<const BatchEntry> entries, std::span<const float> in,
                      std::span<float> out) {
  if (entries.empty()) return Status(Code::invalid_argument, "a forward needs at least one session");
  uint64_t rows_in = 0, rows_out = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const BatchEntry& e = entries[i];
    const std::string which = entries.size() > 1 ? "entry " + std::to_string(i) + ": " : "";
    if (!e.session) return Status(Code::invalid_argument, which + "no session");
    if (e.n <= 0) return Status(Code::invalid_argument, which + "n must be positive, got " + std::to_string(e.n));
    for (size_t j = 0; j < i; ++j) {
      if (entries[j].session == e.session) {
        return Status(Code::invalid_argument, which + "the session of entry " + std::to_string(j) +
                                                  " again: a session runs once per forward call");
      }
    }
    rows_in += static_cast<uint64_t>(e.n);
    rows_out += static_cast<uint64_t>(out_rows(e));
  }
  const uint64_t n_embd = static_cast<uint64_t>(m.config.n_embd);
  if (in.size() != rows_in * n_embd) {
    return Status(Code::invalid_argument, "input has " + std::to_string(in.size()) + " floats, expected n * n_embd = " +
                                              std::to_string(rows_in * n_embd));
  }
  if (out.size() != rows_out * n_embd) {
    return Status(Code::invalid_argument, "output has room for " + std::to_string(out.size()) + " floats, expected " +
                                              std::to_string(rows_out * n_embd));
  }
  return Status();
}

}  // namespace

Status embed(const Model& m, const int32_t* tokens, int n, float* out) {
  if (!m.has_embedding) return Status(Code::failed_precondition, "this node has no token embedding loaded");
  if (n <= 0 || !tokens || !out) return Status(Code::invalid_argument, "embed needs n > 0 tokens and an output");
  const int n_embd = m.config.n_embd;
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= m.config.n_vocab) {
      return Status(Code::invalid_argument, "token id " + std::to_string(tokens[i]) + " at position " +
                                                std::to_string(i) + " is outside [0, " + std::to_string(m.config.n_vocab) + ")");
    }
  }
  const float scale = sqrtf(static_cast<float>(n_embd));
  for (int i = 0; i < n; ++i) {
    float* row = out + static_cast<size_t>(i) * n_embd;
    LF_RETURN_IF_ERROR(dequantize_row(m.token_embd.type, m.token_embd.row(tokens[i]), row, n_embd));
    for (int j = 0; j < n_embd; ++j) row[j] *= scale;
  }
  return Status();
}

namespace {

// A validated forward call as the pool runs it: job on every worker (none when no entry passed
// validation), then finish once.
struct ForwardCall {
  ThreadPool::Job job;
  std::function<std::vector<Status>()> finish;  // collects errors, copies outputs out, moves n_past
};

// Where an entry's rows start among every entry's rows laid end to end, in `in` and in `out`.
struct EntryRows {
  size_t in = 0, out = 0;
};

Status prepare_forward(const Model& m, std::span<const BatchEntry> entries, std::span<const float> in,
                       std::span<float> out, ForwardCall* call) {
  const Clock::time_point t_call = Clock::now();
  if (!m.pool) return Status(Code::failed_precondition, "the model has no threads: load it with load_model");
  LF_RETURN_IF_ERROR(validate_batch(m, entries, in, out));
  const size_t E = static_cast<size_t>(m.config.n_embd);
  // Each entry is refused or kept on its own; the kept ones run, in entry order.
  auto statuses = std::make_shared<std::vector<Status>>(entries.size());
  std::vector<EntryRows> at(entries.size());
  std::vector<size_t> kept;
  int n = 0;
  bool top_k = false;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) at[i] = {at[i - 1].in + entries[i - 1].n, at[i - 1].out + out_rows(entries[i - 1])};
    const std::span<const float> rows = in.subspan(at[i].in * E, static_cast<size_t>(entries[i].n) * E);
    (*statuses)[i] = validate_entry(m, entries[i], rows);
    if (!(*statuses)[i].ok()) continue;
    kept.push_back(i);
    n += entries[i].n;
    top_k = top_k || entries[i].session->approx.top_k_ffn_on();
  }
  if (kept.empty()) {
    call->finish = [statuses] { return *statuses; };
    return Status();
  }
  ThreadPool* pool = m.pool.get();
  auto scratch = std::make_shared<Scratch>(scratch_shape(m, n, top_k), pool->size());
  scratch->ffn_stats.assign(static_cast<size_t>(pool->size()), std::vector<ApproxStats>(kept.size()));
  scratch->exit.resize(kept.size());
  auto runs = std::make_shared<std::vector<BatchEntry>>();
  for (size_t k = 0, x = 0; k < kept.size(); ++k) {
    const BatchEntry& e = entries[kept[k]];
    runs->push_back(e);
    // Mirrored caches take the call's positions before its shared layers attend. Slots past
    // n_past hold nothing live, so a call refused later leaves nothing to put back.
    for (const KvRows& rows : e.session->kv_rows_in) e.session->kv.store_rows(rows);
    std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(at[kept[k]].in * E), static_cast<size_t>(e.n) * E,
                scratch->x.begin() + static_cast<std::ptrdiff_t>(x * E));
    x += static_cast<size_t>(e.n);
  }
  auto job_ms = std::make_shared<double>(0.0);

  call->job = [&m, pool, scratch, runs, job_ms, top_k](int worker) {
    const Clock::time_point t_job = Clock::now();
    Scratch& b = *scratch;
    const int n_layers = m.range.end - m.range.begin;
    // Only once the job runs: a call refused as busy leaves the sessions untouched.
    if (worker == 0) {
      for (const BatchEntry& e : *runs) {
        e.session->last.layer_ms.assign(n_layers, 0.0);
        e.session->last.row_updates.assign(n_layers, -1.0f);
      }
    }
    // Every worker follows each session's early exit of its last row on its own copy, making
    // the same decisions from the same bytes, so no barrier is spent sharing them.
    std::vector<ExitState> exits;
    BatchRows rows;
    for (const BatchEntry& e : *runs) {
      exits.push_back(e.session->exit_in);
      rows.segments.push_back(Segment{e.session, e.start_pos, e.n});
    }
    const int E = m.config.n_embd;
    for (int il = m.range.begin; il < m.range.end; ++il) {
      const Clock::time_point t0 = Clock::now();
      // The final layer carries only a last_only entry's last row past attention, as llama.cpp
      // does for its output rows.
      for (size_t k = 0; k < runs->size(); ++k) {
        rows.segments[k].row0 = (*runs)[k].last_only && il == m.range.end - 1 ? (*runs)[k].n - 1 : 0;
        rows.segments[k].exited = exits[k].exited();
      }
      rows.lay_out();
      // The residual stream alternates between the two buffers; a layer ends on a barrier.
      const bool even = (il - m.range.begin) % 2 == 0;
      const std::vector<float>& x = even ? b.x : b.x_next;
      std::vector<float>& x_next = even ? b.x_next : b.x;
      const LayerCall call{m, b, *pool, x, x_next, worker, il, rows};
      run_layer(call, m.config.layers[il].moe ? moe_ffn : top_k ? top_k_ffn : dense_ffn);
      const double ms = ms_since(t0);
      for (size_t k = 0; k < runs->size(); ++k) {
        const Segment& g = rows.segments[k];
        Session& s = *g.s;
        if (!g.exited) {
          const float update = relative_update(x.data() + static_cast<size_t>(g.x0 + g.n - 1) * E,
                                               x_next.data() + static_cast<size_t>(g.o0 + g.n_q() - 1) * E, E,
                                               m.layer(il).layer_output_scale);
          advance_exit(s.approx, il, update, &exits[k]);
          if (worker == 0) s.last.row_updates[il - m.range.begin] = update;
        }
        if (worker == 0) s.last.layer_ms[il - m.range.begin] = ms;
      }
    }
    if (worker == 0) {
      b.exit = std::move(exits);
      *job_ms = ms_since(t_job);
    }
  };
  // The sliding rings' slots each session's rows overwrite, put back if it is refused after running.
  auto undo = std::make_shared<std::vector<KvUndo>>(runs->size());
  for (size_t k = 0; k < runs->size(); ++k) {
    const BatchEntry& e = (*runs)[k];
    e.session->kv.save_overwritten(e.start_pos, e.n, &(*undo)[k]);
  }
  call->finish = [&m, scratch, runs, statuses, kept = std::move(kept), at = std::move(at), job_ms, undo, t_call,
                  out] {
    const size_t E = static_cast<size_t>(m.config.n_embd);
    // A refused session's n_past stays put, so the caller never sees positions counted that did
    // not run, and its cache holds what it held.
    auto refuse = [&](size_t k, const Status& e) {
      (*runs)[k].session->kv.restore((*undo)[k]);
      (*statuses)[kept[k]] = e;
    };
    const Status* fault = nullptr;  // after validation only an internal fault
    for (const Status& e : scratch->errors) fault = fault == nullptr && !e.ok() ? &e : fault;
    // The final layer's output holds each session's out rows in order; a node without layers
    // passes its input through (a last_only entry's last row of it).
    const bool odd = (m.range.end - m.range.begin) % 2 == 1;
    const std::vector<float>& x = odd ? scratch->x_next : scratch->x;
    const bool no_layers = m.range.end == m.range.begin;
    const std::vector<int> shipped = kv_layers_shipped(m.config, m.range.begin, m.range.end);
    size_t row_in = 0, row_out = 0;
    for (size_t k = 0; k < runs->size(); ++k) {
      const BatchEntry& e = (*runs)[k];
      Session& s = *e.session;
      const size_t n_out = static_cast<size_t>(out_rows(e));
      const size_t first = no_layers ? row_in + static_cast<size_t>(e.n) - n_out : row_out;
      row_in += static_cast<size_t>(e.n);
      row_out += n_out;
      if (fault) {
        refuse(k, *fault);
        continue;
      }
      const std::span<const float> result(x.data() + first * E, n_out * E);
      if (const Status finite = check_norm_input_rows(result, m.config.n_embd, "output of layers [" + std::to_string(m.range.begin) +
                                                                          ", " + std::to_string(m.range.end) + ")");
          !finite.ok()) {
        refuse(k, Status(finite.code(), finite.message() + " (an input too large for float32, or weights that "
                                                           "overflow): the call is refused and the session is as it was"));
        continue;
      }
      std::copy(result.begin(), result.end(), out.begin() + static_cast<std::ptrdiff_t>(at[kept[k]].out * E));
      s.set_n_past(e.start_pos + e.n);
      s.per_layer_in.clear();
      s.kv_rows_in.clear();
      s.last.kv_rows_out.resize(shipped.size());
      for (size_t j = 0; j < shipped.size(); ++j) s.kv.read_rows(shipped[j], e.start_pos, e.n, &s.last.kv_rows_out[j]);
      s.last.exit_out = std::move(scratch->exit[k]);
      s.exit_in = ExitState();
      s.last.ffn_approx = ApproxStats();
      for (const std::vector<ApproxStats>& worker : scratch->ffn_stats) s.last.ffn_approx.merge(worker[k]);
      s.last.attention_ms = scratch->attention_ms;
      s.last.ffn_ms = scratch->ffn_ms;
      s.last.serial_ms = ms_since(t_call) - *job_ms;
    }
    return *statuses;
  };
  return Status();
}

Status start_forward(const Model& m, ForwardCall call, std::function<void(std::vector<Status>)> done) {
  if (!call.job) {
    done(call.finish());
    return Status();
  }
  if (!m.pool->start(std::move(call.job), [finish = std::move(call.finish), done = std::move(done)] { done(finish()); })) {
    return Status(Code::failed_precondition, kPoolBusy);
  }
  return Status();
}

Status run_forward(const Model& m, ForwardCall call, std::vector<Status>* statuses) {
  if (call.job && !m.pool->run(std::move(call.job))) return Status(Code::failed_precondition, kPoolBusy);
  *statuses = call.finish();
  return Status();
}

}  // namespace

Status forward_batch(const Model& m, std::span<const BatchEntry> entries, std::span<const float> in,
                     std::span<float> out, std::vector<Status>* statuses) {
  ForwardCall call;
  LF_RETURN_IF_ERROR(prepare_forward(m, entries, in, out, &call));
  return run_forward(m, std::move(call), statuses);
}

Status forward_batch_async(const Model& m, std::span<const BatchEntry> entries, std::span<const float> in,
                           std::span<float> out, std::function<void(std::vector<Status>)> done) {
  ForwardCall call;
  LF_RETURN_IF_ERROR(prepare_forward(m, entries, in, out, &call));
  return start_forward(m, std::move(call), std::move(done));
}

// A batch of one, refused at once when its one entry is.
Status forward_async(const Model& m, Session& s, int start_pos, std::span<const float> in, int n, std::span<float> out,
                     bool last_only, std::function<void(const Status&)> done) {
  const BatchEntry entry{&s, start_pos, n, last_only};
  ForwardCall call;
  LF_RETURN_IF_ERROR(prepare_forward(m, {&entry, 1}, in, out, &call));
  if (!call.job) return call.finish()[0];
  return start_forward(m, std::move(call), [done = std::move(done)](std::vector<Status> statuses) { done(statuses[0]); });
}

Status forward(const Model& m, Session& s, int start_pos, std::span<const float> in, int n, std::span<float> out,
               bool last_only) {
  const BatchEntry entry{&s, start_pos, n, last_only};
  std::vector<Status> statuses;
  LF_RETURN_IF_ERROR(forward_batch(m, {&entry, 1}, in, out, &statuses));
  return statuses[0];
}

Status forward(const Model& m, Session& s, int start_pos, const float* in, int n, float* out, bool last_only) {
  if (n <= 0 || !in || !out) return Status(Code::invalid_argument, "forward needs n > 0 and input/output buffers");
  const size_t n_embd = static_cast<size_t>(m.config.n_embd);
  return forward(m, s, start_pos, std::span<const float>(in, n * n_embd), n,
                 std::span<float>(out, (last_only ? 1 : n) * n_embd), last_only);
}

}  // namespace lf
