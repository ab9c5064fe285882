#include "model/read_probe.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/simd.h"

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

// The halfwords of p [n] (n a multiple of 16) with 128-bit loads, two cache lines per step
// into independent sums so that the loads, not the adds, set the pace: one wrapping i16 add per
// vector, no constant (V8 would build one anew inside the loop)
uint32_t checksum_vectors(const uint8_t* p, uint64_t n) {
  const auto at = [p](uint64_t i) { return simd::load_i16x8(p + i); };
  simd::I16x8 s[4] = {simd::splat_i16(0), simd::splat_i16(0), simd::splat_i16(0), simd::splat_i16(0)};
  uint64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    for (int k = 0; k < 8; ++k) s[k % 4] = simd::add(s[k % 4], at(i + 16 * k));
  }
  for (; i < n; i += 16) s[0] = simd::add(s[0], at(i));
  const simd::I16x8 total = simd::add(simd::add(s[0], s[1]), simd::add(s[2], s[3]));
  uint16_t lanes[8];
  std::memcpy(lanes, &total.v, sizeof lanes);
  uint32_t sum = 0;
  for (const uint16_t lane : lanes) sum += lane;
  return sum;
}

// Worker w's share of a tensor: cut on 16-byte boundaries, the tail going to the last worker
uint32_t checksum_share(const Span& s, int w, int n_workers) {
  const uint64_t n16 = s.bytes / 16 * 16;
  const auto cut = [&](int part) { return n16 / 16 * static_cast<uint64_t>(part) / static_cast<uint64_t>(n_workers) * 16; };
  const uint64_t begin = cut(w), end = cut(w + 1);
  uint32_t sum = checksum_vectors(s.data + begin, end - begin);
  if (w == n_workers - 1) sum += weight_checksum(s.data + n16, s.bytes - n16);
  return sum;
}

}  // namespace

uint32_t weight_checksum(const uint8_t* p, uint64_t n) {
  uint32_t sum = 0;
  for (uint64_t i = 0; i < n; i += 2) sum += static_cast<uint32_t>(p[i] | (i + 1 < n ? p[i + 1] << 8 : 0));
  return sum & 0xFFFFu;
}

namespace {

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
