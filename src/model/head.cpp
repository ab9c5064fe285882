// The LM head on the model's pool: output_norm and the activations' conversion once, then each
// worker's share of the vocabulary rows, soft-capped where the model has a final soft-cap.
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/forward.h"
#include "ops/ops.h"
#include "quant/finite_check.h"

namespace lf {
namespace {

// A validated head call: the normalized rows converted for the head's matmul, and the job that
// computes a worker's share of the vocabulary rows of every row.
struct HeadCall {
  std::shared_ptr<std::vector<uint8_t>> xc;
  std::function<void(int worker, int n_workers)> share;
};

Status prepare_head(const Model& m, const float* hidden, int n_rows, float* logits, HeadCall* call) {
  if (!m.has_head) return Status(Code::failed_precondition, "this node has no output head loaded");
  if (n_rows <= 0 || !hidden || !logits) return Status(Code::invalid_argument, "head needs n_rows > 0 and buffers");
  const ModelConfig& c = m.config;
  LF_RETURN_IF_ERROR(check_norm_input_rows({hidden, static_cast<size_t>(n_rows) * c.n_embd}, c.n_embd, "hidden"));
  std::vector<float> out_norm(static_cast<size_t>(n_rows) * static_cast<size_t>(c.n_embd));
  rmsnorm_rows(hidden, m.output_norm.f32(), n_rows, c.n_embd, c.norm_eps, out_norm.data());
  call->xc = std::make_shared<std::vector<uint8_t>>();
  LF_RETURN_IF_ERROR(convert_activations(m.output, out_norm.data(), n_rows, call->xc.get()));
  call->share = [&m, xc = call->xc, n_rows, logits](int worker, int n_workers) {
    const ModelConfig& c = m.config;
    const int64_t n_vocab = m.vocab_end - m.vocab_begin;
    const Share rows = share(n_vocab, worker, n_workers);
    if (rows.begin == rows.end) return;
    matmul_rows(m.output, xc->data(), n_rows, logits, rows.begin, rows.end);
    if (c.final_softcap == 0.0f) return;
    for (int r = 0; r < n_rows; ++r) {
      float* y = logits + static_cast<size_t>(r) * n_vocab + rows.begin;
      softcap(y, static_cast<int>(rows.end - rows.begin), c.final_softcap);
    }
  };
  return Status();
}

Status check_logits(const Model& m, int n_rows, const float* logits) {
  const auto n_vocab = static_cast<int>(m.vocab_end - m.vocab_begin);
  return check_logit_rows({logits, static_cast<size_t>(n_rows) * static_cast<size_t>(n_vocab)}, n_vocab);
}

}  // namespace

Status head(const Model& m, const float* hidden, int n_rows, float* logits) {
  HeadCall call;
  LF_RETURN_IF_ERROR(prepare_head(m, hidden, n_rows, logits, &call));
  ThreadPool* pool = m.pool.get();
  const int n_workers = pool ? pool->size() : 1;
  if (!pool || !pool->run([&call, n_workers](int worker) { call.share(worker, n_workers); })) call.share(0, 1);
  return check_logits(m, n_rows, logits);
}

Status head_async(const Model& m, const float* hidden, int n_rows, float* logits,
                  std::function<void(const Status&)> done) {
  HeadCall call;
  LF_RETURN_IF_ERROR(prepare_head(m, hidden, n_rows, logits, &call));
  if (!m.pool) return Status(Code::failed_precondition, "the model has no threads: load it with load_model");
  const int n_workers = m.pool->size();
  auto share = std::make_shared<std::function<void(int, int)>>(std::move(call.share));
  if (!m.pool->start([share, n_workers](int worker) { (*share)(worker, n_workers); },
                     [&m, n_rows, logits, done = std::move(done)] { done(check_logits(m, n_rows, logits)); })) {
    return Status(Code::failed_precondition, kPoolBusy);
  }
  return Status();
}

}  // namespace lf
