#include "model/forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "approx/early_exit.h"
#include "base/thread_pool.h"
#include "model/layer.h"
#include "model/per_layer_embd.h"
#include "model/scratch.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// x [rows, n_embd] -> invalid_argument naming `what`, the row and element of the first NaN or infinity.
Status check_finite(std::span<const float> x, int n_embd, const std::string& what) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      return Status(Code::invalid_argument, what + " is not finite at row " + std::to_string(i / n_embd) +
                                                ", element " + std::to_string(i % n_embd));
    }
  }
  return Status();
}

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
  return check_finite(s.per_layer_in, std::max(1, m.config.n_embd_per_layer), "per-layer input");
}

Status validate_forward(const Model& m, const Session& s, int start_pos, std::span<const float> in, int n,
                        std::span<float> out, bool last_only) {
  const int n_embd = m.config.n_embd;
  if (s.range().begin != m.range.begin || s.range().end != m.range.end) {
    return Status(Code::invalid_argument, "session was created for another layer range");
  }
  if (n <= 0) return Status(Code::invalid_argument, "n must be positive, got " + std::to_string(n));
  const uint64_t in_needed = static_cast<uint64_t>(n) * static_cast<uint64_t>(n_embd);
  if (in.size() != in_needed) {
    return Status(Code::invalid_argument, "input has " + std::to_string(in.size()) + " floats, expected n * n_embd = " +
                                              std::to_string(in_needed));
  }
  const uint64_t out_needed = static_cast<uint64_t>(last_only ? 1 : n) * static_cast<uint64_t>(n_embd);
  if (out.size() != out_needed) {
    return Status(Code::invalid_argument, "output has room for " + std::to_string(out.size()) + " floats, expected " +
                                              std::to_string(out_needed));
  }
  if (start_pos != s.n_past()) {
    return Status(Code::failed_precondition, "start_pos " + std::to_string(start_pos) +
                                                 " does not match the session's n_past " + std::to_string(s.n_past()));
  }
  if (static_cast<int64_t>(start_pos) + n > s.max_ctx()) {
    return Status(Code::resource_exhausted, "context overflow: " + std::to_string(start_pos) + " + " +
                                                std::to_string(n) + " positions exceed max_ctx " + std::to_string(s.max_ctx()));
  }
  if (s.approx.top_k_ffn_on()) {
    for (int il = m.range.begin; il < m.range.end; ++il) {
      if (m.config.layers[il].moe) {
        return Status(Code::unsupported, "the top-K gate FFN is not supported on mixture-of-experts layers (layer " +
                                             std::to_string(il) + " routes to experts)");
      }
    }
  }
  LF_RETURN_IF_ERROR(check_finite(in, n_embd, "input"));
  return check_per_layer_inputs(m, s, n);
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

// A validated forward call as the pool runs it: job on every worker, then finish once.
struct ForwardCall {
  ThreadPool::Job job;
  std::function<Status()> finish;  // collects errors, copies the output out, moves n_past
};

Status prepare_forward(const Model& m, Session& s, int start_pos, std::span<const float> in, int n,
                       std::span<float> out, bool last_only, ForwardCall* call) {
  const Clock::time_point t_call = Clock::now();
  if (!m.pool) return Status(Code::failed_precondition, "the model has no threads: load it with load_model");
  LF_RETURN_IF_ERROR(validate_forward(m, s, start_pos, in, n, out, last_only));
  ThreadPool* pool = m.pool.get();
  auto scratch = std::make_shared<Scratch>(scratch_shape(m, n, s.approx.top_k_ffn_on()), pool->size());
  std::copy(in.begin(), in.end(), scratch->x.begin());
  auto job_ms = std::make_shared<double>(0.0);

  call->job = [&m, &s, pool, scratch, job_ms, start_pos, n, last_only](int worker) {
    const Clock::time_point t_job = Clock::now();
    Scratch& b = *scratch;
    // Only once the job runs: a call refused as busy leaves the session untouched.
    if (worker == 0) {
      s.last.layer_ms.assign(m.range.end - m.range.begin, 0.0);
      s.last.row_updates.assign(m.range.end - m.range.begin, -1.0f);
    }
    // Every worker follows the last row's early exit on its own copy, making the same decisions
    // from the same bytes, so no barrier is spent sharing them.
    ExitState exit = s.exit_in;
    for (int il = m.range.begin; il < m.range.end; ++il) {
      const Clock::time_point t0 = Clock::now();
      // The final layer carries only the last row past attention, as llama.cpp does for its
      // output rows.
      const int row0 = last_only && il == m.range.end - 1 ? n - 1 : 0;
      // The residual stream alternates between the two buffers; a layer ends on a barrier.
      const bool even = (il - m.range.begin) % 2 == 0;
      const std::vector<float>& x = even ? b.x : b.x_next;
      std::vector<float>& x_next = even ? b.x_next : b.x;
      const bool exited = exit.exited();
      const LayerCall call{m, s, b, *pool, x, x_next, worker, il, start_pos, n, row0, exited};
      run_layer(call, m.config.layers[il].moe ? moe_ffn : s.approx.top_k_ffn_on() ? top_k_ffn : dense_ffn);
      if (!exited) {
        const int E = m.config.n_embd;
        const float update = relative_update(x.data() + static_cast<size_t>(n - 1) * E,
                                             x_next.data() + static_cast<size_t>(n - 1 - row0) * E, E,
                                             m.layer(il).layer_output_scale);
        advance_exit(s.approx, il, update, &exit);
        if (worker == 0) s.last.row_updates[il - m.range.begin] = update;
      }
      if (worker == 0) s.last.layer_ms[il - m.range.begin] = ms_since(t0);
    }
    if (worker == 0) {
      b.exit = std::move(exit);
      *job_ms = ms_since(t_job);
    }
  };
  // The sliding rings' slots this call overwrites, put back if it is refused after running.
  auto undo = std::make_shared<KvUndo>();
  s.kv.save_overwritten(start_pos, n, undo.get());
  call->finish = [&m, &s, scratch, job_ms, undo, t_call, start_pos, n, out] {
    // n_past stays put on any failure, so the caller never sees positions counted that did not
    // run, and the cache holds what it held.
    auto refuse = [&](const Status& e) {
      s.kv.restore(*undo);
      return e;
    };
    for (const Status& e : scratch->errors) {
      if (!e.ok()) return refuse(e);  // after validation only an internal fault
    }
    // With last_only the final layer left its one row first; a node without layers passes its
    // input through, the last row of it.
    const bool odd = (m.range.end - m.range.begin) % 2 == 1;
    const std::vector<float>& x = odd ? scratch->x_next : scratch->x;
    const size_t skip = m.range.end > m.range.begin ? 0 : x.size() - out.size();
    const std::span<const float> result(x.data() + skip, out.size());
    if (const Status finite = check_finite(result, m.config.n_embd, "output of layers [" + std::to_string(m.range.begin) +
                                                                        ", " + std::to_string(m.range.end) + ")");
        !finite.ok()) {
      return refuse(Status(finite.code(), finite.message() + " (an input too large for float32, or weights that "
                                                             "overflow): the call is refused and the session is as it was"));
    }
    std::copy(result.begin(), result.end(), out.begin());
    s.set_n_past(start_pos + n);
    s.per_layer_in.clear();
    s.last.exit_out = std::move(scratch->exit);
    s.exit_in = ExitState();
    s.last.ffn_approx = ApproxStats();
    for (const ApproxStats& worker : scratch->ffn_stats) s.last.ffn_approx.merge(worker);
    s.last.attention_ms = scratch->attention_ms;
    s.last.ffn_ms = scratch->ffn_ms;
    s.last.serial_ms = ms_since(t_call) - *job_ms;
    return Status();
  };
  return Status();
}

const char* const kBusy = "a forward is already running on this model's threads";

}  // namespace

Status forward_async(const Model& m, Session& s, int start_pos, std::span<const float> in, int n, std::span<float> out,
                     bool last_only, std::function<void(const Status&)> done) {
  ForwardCall call;
  LF_RETURN_IF_ERROR(prepare_forward(m, s, start_pos, in, n, out, last_only, &call));
  if (!m.pool->start(std::move(call.job), [finish = std::move(call.finish), done = std::move(done)] { done(finish()); })) {
    return Status(Code::failed_precondition, kBusy);
  }
  return Status();
}

Status forward(const Model& m, Session& s, int start_pos, std::span<const float> in, int n, std::span<float> out,
               bool last_only) {
  ForwardCall call;
  LF_RETURN_IF_ERROR(prepare_forward(m, s, start_pos, in, n, out, last_only, &call));
  if (!m.pool->run(std::move(call.job))) return Status(Code::failed_precondition, kBusy);
  return call.finish();
}

Status forward(const Model& m, Session& s, int start_pos, const float* in, int n, float* out, bool last_only) {
  if (n <= 0 || !in || !out) return Status(Code::invalid_argument, "forward needs n > 0 and input/output buffers");
  const size_t n_embd = static_cast<size_t>(m.config.n_embd);
  return forward(m, s, start_pos, std::span<const float>(in, n * n_embd), n,
                 std::span<float>(out, (last_only ? 1 : n) * n_embd), last_only);
}

Status head(const Model& m, const float* hidden, int n_rows, float* logits) {
  if (!m.has_head) return Status(Code::failed_precondition, "this node has no output head loaded");
  if (n_rows <= 0 || !hidden || !logits) return Status(Code::invalid_argument, "head needs n_rows > 0 and buffers");
  const ModelConfig& c = m.config;
  LF_RETURN_IF_ERROR(check_finite(std::span<const float>(hidden, static_cast<size_t>(n_rows) * c.n_embd), c.n_embd, "hidden"));
  std::vector<float> out_norm(static_cast<size_t>(n_rows) * static_cast<size_t>(c.n_embd));
  rmsnorm_rows(hidden, m.output_norm.f32(), n_rows, c.n_embd, c.norm_eps, out_norm.data());
  LF_RETURN_IF_ERROR(matmul(m.output, out_norm.data(), n_rows, logits));
  if (c.final_softcap != 0.0f) {
    for (int r = 0; r < n_rows; ++r) softcap(logits + static_cast<size_t>(r) * c.n_vocab, c.n_vocab, c.final_softcap);
  }
  return check_finite(std::span<const float>(logits, static_cast<size_t>(n_rows) * c.n_vocab), c.n_vocab, "logits");
}

}  // namespace lf
