#include "model/forward.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "layout/row_strips.h"
#include "model/forward_call.h"
#include "model/run_layers.h"
#include "quant/quant.h"

namespace lf {

Status check_vocab_tokens(const Model& m, const int32_t* tokens, int n) {
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < m.vocab_begin || tokens[i] >= m.vocab_end) {
      return Status(Code::invalid_argument, "token id " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                                                " is outside [" + std::to_string(m.vocab_begin) + ", " +
                                                std::to_string(m.vocab_end) + ")");
    }
  }
  return Status();
}

Status embed(const Model& m, const int32_t* tokens, int n, float* out) {
  if (!m.has_embedding) return Status(Code::failed_precondition, "this node has no token embedding loaded");
  if (n <= 0 || !tokens || !out) return Status(Code::invalid_argument, "embed needs n > 0 tokens and an output");
  const int n_embd = m.config.n_embd;
  LF_RETURN_IF_ERROR(check_vocab_tokens(m, tokens, n));
  const float scale = sqrtf(static_cast<float>(n_embd));
  for (int i = 0; i < n; ++i) {
    float* row = out + static_cast<size_t>(i) * n_embd;
    LF_RETURN_IF_ERROR(dequantize_weight_row(m.token_embd, tokens[i] - m.vocab_begin, row));
    for (int j = 0; j < n_embd; ++j) row[j] *= scale;
  }
  return Status();
}

namespace {

// The pool's job: every worker runs the call's layers.
ThreadPool::Job layers_job(const std::shared_ptr<ForwardCall>& call) {
  return [call](int worker) { run_layers(call->m, call->runs, call->top_k, *call->scratch, worker); };
}

Status start_forward(const Model& m, std::shared_ptr<ForwardCall> call, std::function<void(std::vector<Status>)> done) {
  if (call->runs.empty()) {
    done(finish_forward(*call));
    return Status();
  }
  if (!m.pool->start(layers_job(call), [call, done = std::move(done)] { done(finish_forward(*call)); })) {
    return Status(Code::failed_precondition, kPoolBusy);
  }
  return Status();
}

Status run_forward(const Model& m, const std::shared_ptr<ForwardCall>& call, std::vector<Status>* statuses) {
  if (!call->runs.empty() && !m.pool->run(layers_job(call))) return Status(Code::failed_precondition, kPoolBusy);
  *statuses = finish_forward(*call);
  return Status();
}

}  // namespace

Status forward_batch(const Model& m, std::span<const BatchEntry> entries, std::span<const float> in,
                     std::span<float> out, std::vector<Status>* statuses) {
  auto call = std::make_shared<ForwardCall>(m, out);
  LF_RETURN_IF_ERROR(prepare_forward(entries, in, call.get()));
  return run_forward(m, call, statuses);
}

Status forward_batch_async(const Model& m, std::span<const BatchEntry> entries, std::span<const float> in,
                           std::span<float> out, std::function<void(std::vector<Status>)> done) {
  auto call = std::make_shared<ForwardCall>(m, out);
  LF_RETURN_IF_ERROR(prepare_forward(entries, in, call.get()));
  return start_forward(m, std::move(call), std::move(done));
}

// A batch of one, refused at once when its one entry is.
Status forward_async(const Model& m, Session& s, int start_pos, std::span<const float> in, int n, std::span<float> out,
                     bool last_only, std::function<void(const Status&)> done) {
  const BatchEntry entry{&s, start_pos, n, last_only};
  auto call = std::make_shared<ForwardCall>(m, out);
  LF_RETURN_IF_ERROR(prepare_forward({&entry, 1}, in, call.get()));
  if (call->runs.empty()) return call->statuses[0];
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
