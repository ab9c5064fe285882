#include "model/read_probe.h"

#include <chrono>
#include <memory>
#include <vector>

#include "kernels/weight_checksum.h"

namespace lf {
namespace {

using Clock = std::chrono::steady_clock;

struct Span {
  const uint8_t* data;
  uint64_t bytes;
};

std::vector<Span> layer_tensors(const Model& m) {
  std::vector<Span> spans;
  for (const LayerWeights& l : m.layers) {
    for (const WeightView* w : {&l.attn_norm, &l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output, &l.attn_q_norm,
                                &l.attn_k_norm, &l.post_attention_norm, &l.ffn_norm, &l.ffn_gate, &l.ffn_up,
                                &l.ffn_down, &l.post_ffw_norm, &l.layer_output_scale, &l.ffn_gate_inp,
                                &l.ffn_gate_inp_scale, &l.pre_ffw_norm_2, &l.post_ffw_norm_1, &l.post_ffw_norm_2,
                                &l.ffn_gate_up_exps, &l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps,
                                &l.ffn_down_exps_scale}) {
      if (w->present()) spans.push_back({w->data, static_cast<uint64_t>(w->n_out) * w->column_bytes(w->n_in)});
    }
  }
  return spans;
}

// Worker w's share of a tensor: cut on 16-byte boundaries, the tail going to the last worker
uint32_t checksum_share(const Span& s, int w, int n_workers) {
  const uint64_t n16 = s.bytes / 16 * 16;
  const auto cut = [&](int part) { return n16 / 16 * static_cast<uint64_t>(part) / static_cast<uint64_t>(n_workers) * 16; };
  const uint64_t begin = cut(w), end = cut(w + 1);
  uint32_t sum = weight_checksum_vectors(s.data + begin, end - begin);
  if (w == n_workers - 1) sum += weight_checksum(s.data + n16, s.bytes - n16);
  return sum;
}

// One probe: the tensors, each worker's partial sum, the start time.
struct ProbeRun {
  std::vector<Span> spans;
  std::vector<uint32_t> sums;  // [worker]
  Clock::time_point start;

  explicit ProbeRun(const Model& model) : spans(layer_tensors(model)), sums(static_cast<size_t>(model.pool->size())) {}
  void work(int w) {
    uint32_t sum = 0;
    for (const Span& s : spans) sum += checksum_share(s, w, static_cast<int>(sums.size()));
    sums[static_cast<size_t>(w)] = sum;
  }
  ReadProbe result() const {
    ReadProbe r;
    r.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    for (const Span& s : spans) r.bytes += s.bytes;
    for (const uint32_t s : sums) r.checksum += s;
    r.checksum &= 0xFFFFu;  // the partial sums are whole halfword sums: only the total is reduced
    return r;
  }
};

constexpr const char* kBusy = "the model's threads are busy with a forward; probe after it";

}  // namespace

Status read_probe_async(const Model& model, std::function<void(const ReadProbe&)> done) {
  auto run = std::make_shared<ProbeRun>(model);
  run->start = Clock::now();
  const bool started = model.pool->start([run](int w) { run->work(w); },
                                         [run, done = std::move(done)] { done(run->result()); });
  return started ? Status() : Status(Code::failed_precondition, kBusy);
}

Status read_probe(const Model& model, ReadProbe* result) {
  ProbeRun run(model);
  run.start = Clock::now();
  if (!model.pool->run([&run](int w) { run.work(w); })) return Status(Code::failed_precondition, kBusy);
  *result = run.result();
  return Status();
}

}  // namespace lf
