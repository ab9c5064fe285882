#include "model/forward_call.h"

#include <algorithm>
#include <string>

#include "model/forward_checks.h"
#include "model/run_layers.h"
#include "quant/finite_check.h"
#include "model/kv_shipping.h"

namespace lf {
namespace {

// A refused run's n_past stays put, so the caller never sees positions counted that did not
// run, and its cache holds what it held.
void refuse_run(ForwardCall& call, size_t k, const Status& why) {
  call.runs[k].session->kv.restore(call.undo[k]);
  call.statuses[call.entry_of[k]] = why;
}

// The run's out rows `result` leave the node and its session moves on by its positions, with
// the report of what the call did for it.
void commit_run(ForwardCall& call, size_t k, std::span<const float> result) {
  const BatchEntry& e = call.runs[k];
  Session& s = *e.session;
  Scratch& b = *call.scratch;
  const size_t E = static_cast<size_t>(call.m.config.n_embd);
  std::copy(result.begin(), result.end(), call.out.begin() + static_cast<std::ptrdiff_t>(call.out_at[k] * E));
  s.set_n_past(e.start_pos + e.n);
  s.per_layer_in.clear();
  s.kv_rows_in.clear();
  s.span_in = false;
  const std::vector<int> shipped = kv_layers_shipped(call.m.config, call.m.range.begin, call.m.range.end);
  s.last.kv_rows_out.resize(shipped.size());
  for (size_t j = 0; j < shipped.size(); ++j) s.kv.read_rows(shipped[j], e.start_pos, e.n, &s.last.kv_rows_out[j]);
  s.last.exit_out = std::move(b.exit[k]);
  s.exit_in = ExitState();
  s.last.ffn_approx = ApproxStats();
  for (const std::vector<ApproxStats>& worker : b.ffn_stats) s.last.ffn_approx.merge(worker[k]);
  s.last.attention_ms = b.attention_ms;
  s.last.ffn_ms = b.ffn_ms;
  s.last.serial_ms = ms_since(call.t_call) - b.layers_ms;
}

}  // namespace

Status prepare_forward(std::span<const BatchEntry> entries, std::span<const float> in, ForwardCall* call) {
  const Model& m = call->m;
  if (!m.pool) return Status(Code::failed_precondition, "the model has no threads: load it with load_model");
  LF_RETURN_IF_ERROR(validate_batch(m, entries, in, call->out));
  const size_t E = static_cast<size_t>(m.config.n_embd);
  call->statuses.resize(entries.size());
  std::vector<size_t> in_at;  // [runs] the first of its rows in `in`
  int n = 0;
  for (size_t i = 0, row_in = 0, row_out = 0; i < entries.size(); ++i) {
    const BatchEntry& e = entries[i];
    call->statuses[i] = validate_entry(m, e, in.subspan(row_in * E, static_cast<size_t>(e.n) * E));
    if (call->statuses[i].ok()) {
      call->runs.push_back(e);
      call->entry_of.push_back(i);
      in_at.push_back(row_in);
      call->out_at.push_back(row_out);
      n += e.n;
      call->top_k = call->top_k || e.session->approx.top_k_ffn_on();
    }
    row_in += static_cast<size_t>(e.n);
    row_out += static_cast<size_t>(out_rows(e));
  }
  if (call->runs.empty()) return Status();
  call->scratch = call->spare ? call->spare->take(static_cast<size_t>(n)) : std::make_unique<Scratch>();
  call->scratch->reshape(scratch_shape(m, n, call->top_k), m.pool->size());
  Scratch& b = *call->scratch;
  b.ffn_stats.assign(static_cast<size_t>(m.pool->size()), std::vector<ApproxStats>(call->runs.size()));
  b.exit.resize(call->runs.size());
  call->undo.resize(call->runs.size());
  for (size_t k = 0, x = 0; k < call->runs.size(); ++k) {
    const BatchEntry& e = call->runs[k];
    // Mirrored caches take the call's positions before its shared layers attend. Slots past
    // n_past hold nothing live, so a call refused later leaves nothing to put back.
    for (const KvRows& rows : e.session->kv_rows_in) e.session->kv.store_rows(rows);
    e.session->kv.save_overwritten(e.start_pos, e.n, &call->undo[k]);
    std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(in_at[k] * E), static_cast<size_t>(e.n) * E,
                b.x.begin() + static_cast<std::ptrdiff_t>(x * E));
    x += static_cast<size_t>(e.n);
  }
  return Status();
}

std::vector<Status> finish_forward(ForwardCall& call) {
  if (call.runs.empty()) return call.statuses;
  const Model& m = call.m;
  Scratch& b = *call.scratch;
  const size_t E = static_cast<size_t>(m.config.n_embd);
  const Status* fault = nullptr;  // after validation only an internal fault
  for (const Status& e : b.errors) fault = fault == nullptr && !e.ok() ? &e : fault;
  // The final layer's output holds each run's out rows in order; a node without layers passes
  // its input through (a last_only run's last row of it).
  const int n_layers = m.range.end - m.range.begin;
  const std::vector<float>& x = residual(b, n_layers);
  const std::string where = "output of layers [" + std::to_string(m.range.begin) + ", " + std::to_string(m.range.end) + ")";
  size_t row_in = 0, row_out = 0;
  for (size_t k = 0; k < call.runs.size(); ++k) {
    const BatchEntry& e = call.runs[k];
    const size_t n_out = static_cast<size_t>(out_rows(e));
    const size_t first = n_layers == 0 ? row_in + static_cast<size_t>(e.n) - n_out : row_out;
    row_in += static_cast<size_t>(e.n);
    row_out += n_out;
    if (fault) {
      refuse_run(call, k, *fault);
      continue;
    }
    const std::span<const float> result(x.data() + first * E, n_out * E);
    if (const Status finite = check_norm_input_rows(result, m.config.n_embd, where); !finite.ok()) {
      refuse_run(call, k, Status(finite.code(), finite.message() + " (an input too large for float32, or weights that "
                                                                   "overflow): the call is refused and the session is as it was"));
      continue;
    }
    commit_run(call, k, result);
  }
  return call.statuses;
}

}  // namespace lf
