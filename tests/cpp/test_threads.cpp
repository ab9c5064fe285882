// The thread pool (barrier reuse, more workers than work, start/stop, refusal while busy) and the
// engine's promise that output bytes do not depend on the thread count (docs/threads.md). Built
// natively and under Emscripten (tests are not built for wasm32-wasi, whose pool is one inline
// worker).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_pool.h"
#include "support/engine_checks.h"
#include "support/fixture_model.h"
#include "support/fixture_moe.h"
#include "model/forward.h"
#include "model/scratch.h"

namespace {

using lf::Arch;
using lf::Model;
using lf::Session;
using lf::Status;
using lf::ThreadPool;
using lf::test::FixtureModel;
using lf::test::Layout;
using lf::test::WeightFormat;
using lf::test::embed_tokens;
using lf::test::fixture;
using lf::test::forward_rows;
using lf::test::kModelContext;
using lf::test::require_ok;
using lf::test::session;

const int kThreadCounts[] = {1, 2, 3, 4, 8};

// Waits (yielding: the machine may have fewer cores than threads) until flag is set.
void spin_until(const std::atomic<bool>& flag) {
  while (!flag.load()) std::this_thread::yield();
}

TEST_CASE("share cuts [0, n) into contiguous parts that cover it once", "[threads]") {
  for (int64_t n : {0, 1, 3, 5, 7, 32, 33, 100}) {
    for (int parts : {1, 2, 3, 5, 6, 7, 8, 64}) {
      int64_t next = 0;
      for (int p = 0; p < parts; ++p) {
        const lf::Share s = lf::share(n, p, parts);
        REQUIRE(s.begin == next);
        REQUIRE(s.end >= s.begin);
        REQUIRE(s.end - s.begin <= n / parts + 1);
        next = s.end;
      }
      REQUIRE(next == n);
    }
  }
}

TEST_CASE("a pool runs a job once on every worker", "[threads]") {
  for (int n : {1, 2, 3, 5, 6, 7, 8}) {
    ThreadPool pool(n);
    REQUIRE(pool.size() == n);
    std::vector<std::atomic<int>> calls(static_cast<size_t>(pool.size()));
    for (int round = 0; round < 20; ++round) REQUIRE(pool.run([&](int w) { calls[static_cast<size_t>(w)]++; }));
    for (const std::atomic<int>& c : calls) REQUIRE(c.load() == 20);
  }
}

TEST_CASE("the barrier can be reused thousands of times", "[threads]") {
  for (int n : {2, 3, 5, 8}) {
    ThreadPool pool(n);
    const int size = pool.size();
    constexpr int kRounds = 3000;
    std::atomic<int> arrived{0};
    std::atomic<int> wrong{0};
    REQUIRE(pool.run([&](int) {
      for (int i = 0; i < kRounds; ++i) {
        arrived.fetch_add(1);
        pool.barrier();
        // Nobody may be counted for round i + 1 before everyone checked round i.
        if (arrived.load() != size * (i + 1)) wrong.fetch_add(1);
        pool.barrier();
      }
    }));
    REQUIRE(wrong.load() == 0);
    REQUIRE(arrived.load() == size * kRounds);
  }
}

TEST_CASE("more workers than work: every item is done exactly once", "[threads]") {
  ThreadPool pool(8);
  for (int64_t n_items : {1, 3, 7}) {
    std::vector<std::atomic<int>> done(static_cast<size_t>(n_items));
    REQUIRE(pool.run([&](int w) {
      const lf::Share mine = lf::share(n_items, w, pool.size());
      for (int64_t i = mine.begin; i < mine.end; ++i) done[static_cast<size_t>(i)]++;
      pool.barrier();
    }));
    for (const std::atomic<int>& d : done) REQUIRE(d.load() == 1);
  }
}

TEST_CASE("pools start and stop repeatedly, idle or after work", "[threads]") {
  // At most 9 threads at once: the Emscripten test build pre-spawns 8 Web Workers.
  for (int round = 0; round < 30; ++round) {
    ThreadPool idle(1 + round % 4);
    ThreadPool used(1 + (round * 3) % 5);
    std::atomic<int> sum{0};
    REQUIRE(used.run([&](int w) { sum.fetch_add(w + 1); }));
    const int k = used.size();
    REQUIRE(sum.load() == k * (k + 1) / 2);
  }
}

TEST_CASE("start returns at once, refuses a second job, and calls done once", "[threads]") {
  ThreadPool pool(3);
  std::atomic<bool> release{false};
  std::atomic<int> done_calls{0};
  std::atomic<bool> finished{false};
  REQUIRE(pool.start([&](int) { spin_until(release); }, [&] {
    done_calls++;
    finished = true;
  }));
  REQUIRE_FALSE(pool.start([](int) {}, [] {}));
  REQUIRE_FALSE(pool.run([](int) {}));
  release = true;
  spin_until(finished);
  REQUIRE(done_calls.load() == 1);
  REQUIRE(pool.run([](int) {}));
}

// --- the engine ---

// gemma3 with counts that divide by none of 2, 3, 4, 8: 5 query and 5 KV heads (5 attention
// units) and n_ff 224 (7 FFN units of 32), 2 layers [sliding, global].
Status build_odd_model(FixtureModel* out) {
  lf::test::FixtureOptions o;
  o.arch = Arch::gemma3;
  o.seed = 11;
  lf::test::detail::Builder b(o);
  const int n_embd = 64, n_head = 5, n_ff = 224, D = 32, n_layer = 2, n_vocab = 40;
  b.w.set_string("general.architecture", "gemma3");
  b.u32("context_length", 128);
  b.u32("embedding_length", n_embd);
  b.u32("block_count", n_layer);
  b.u32("feed_forward_length", n_ff);
  b.u32("attention.head_count", n_head);
  b.u32("attention.head_count_kv", n_head);
  b.u32("attention.key_length", D);
  b.u32("attention.value_length", D);
  b.f32("attention.layer_norm_rms_epsilon", 1e-6f);
  b.u32("attention.sliding_window", 4);
  b.u32("attention.sliding_window_pattern", 2);
  b.f32("rope.freq_base", 1e6f);
  std::vector<std::string> tokens;
  for (int i = 0; i < n_vocab; ++i) tokens.push_back("t" + std::to_string(i));
  b.w.set_array_string("tokenizer.ggml.tokens", tokens);
  b.matrix("token_embd.weight", n_embd, n_vocab, lf::GgmlType::Q8_0);
  b.norm("output_norm.weight", n_embd);
  b.matrix("output.weight", n_embd, n_vocab, lf::GgmlType::Q8_0);
  for (int il = 0; il < n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    b.norm(p + "attn_norm.weight", n_embd);
    b.matrix(p + "attn_q.weight", n_embd, n_head * D, lf::GgmlType::Q8_0);
    b.matrix(p + "attn_k.weight", n_embd, n_head * D, lf::GgmlType::Q8_0);
    b.matrix(p + "attn_v.weight", n_embd, n_head * D, lf::GgmlType::Q8_0);
    b.matrix(p + "attn_output.weight", n_head * D, n_embd, lf::GgmlType::Q4_0);
    b.norm(p + "attn_q_norm.weight", D);
    b.norm(p + "attn_k_norm.weight", D);
    b.norm(p + "post_attention_norm.weight", n_embd);
    b.norm(p + "ffn_norm.weight", n_embd);
    b.matrix(p + "ffn_gate.weight", n_embd, n_ff, lf::GgmlType::Q4_0);
    b.matrix(p + "ffn_up.weight", n_embd, n_ff, lf::GgmlType::F16);
    b.matrix(p + "ffn_down.weight", n_ff, n_embd, lf::GgmlType::Q8_0);
    b.norm(p + "post_ffw_norm.weight", n_embd);
  }
  return b.finish(out);
}

// Every output byte of a prompt (whole and in chunks, last_only) and decode steps, in order, on
// a node of every layer with the given layout.
std::vector<float> trace(const FixtureModel& file, int n_threads, Layout layout = Layout::file) {
  const auto node = lf::test::load_copy(file, {{0, -1}, n_threads, layout});
  const Model& m = node->m;
  const int E = m.config.n_embd, n_prompt = 11;
  const std::vector<float> x = embed_tokens(m, lf::test::token_sequence(n_prompt + 3, 5, 2, m.config.n_vocab)).x;

  std::vector<float> all;
  auto step = [&](Session& s, int start, int n, bool last_only) {
    const std::vector<float> out = forward_rows(m, s, x, start, n, last_only);
    all.insert(all.end(), out.begin(), out.end());
  };
  // attn_chunk 3 makes several store/attend chunks and a sliding ring smaller than the prompt.
  Session whole = session(m, 64, 3), chunked = session(m, 64, 3);
  step(whole, 0, n_prompt, false);
  step(chunked, 0, 4, false);
  step(chunked, 4, n_prompt - 4, true);
  for (int t = n_prompt; t < n_prompt + 3; ++t) {
    step(whole, t, 1, false);
    step(chunked, t, 1, true);
  }
  std::vector<float> logits(static_cast<size_t>(m.config.n_vocab));
  require_ok(lf::head(m, all.data() + all.size() - E, 1, logits.data()));
  all.insert(all.end(), logits.begin(), logits.end());
  return all;
}

void require_same_bytes_for_all_counts(const FixtureModel& f) {
  const std::vector<float> one = trace(f, 1);
  for (float v : one) REQUIRE(std::isfinite(v));
  for (int n : kThreadCounts) {
    for (Layout layout : {Layout::file, Layout::relaid, Layout::feature_major}) {
      INFO("threads " << n << ", layout " << static_cast<int>(layout));
      const std::vector<float> other = trace(f, n, layout);
      REQUIRE(other.size() == one.size());
      REQUIRE(std::memcmp(other.data(), one.data(), one.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("engine output is byte-identical for 1, 2, 3, 4, 8 threads: gemma4", "[threads]") {
  require_same_bytes_for_all_counts(fixture(Arch::gemma4, WeightFormat::f32));
  require_same_bytes_for_all_counts(fixture(Arch::gemma4, WeightFormat::mixed));
}

TEST_CASE("engine output is byte-identical for 1, 2, 3, 4, 8 threads: mixture of experts", "[threads][moe]") {
  // Odd expert counts, top-1 and top-k > 1, fused and separate gate/up, F32, Q8_0/Q4_0 and
  // K-quant experts.
  lf::test::MoeFixture wide;
  wide.n_expert = 11;
  wide.n_used = 4;
  wide.n_ff_exp = 160;
  wide.exps_type = lf::GgmlType::Q8_0;
  lf::test::MoeFixture top1;
  top1.n_expert = 3;
  top1.n_used = 1;
  top1.fused = false;
  top1.exps_type = lf::GgmlType::Q4_0;
  // K-quant down experts beside gate and up of two activation formats (Q4_0's Q8_0, F16's F16).
  lf::test::MoeFixture k_down;
  k_down.n_expert = 6;
  k_down.n_used = 3;
  k_down.n_ff_exp = 256;
  k_down.fused = false;
  k_down.exps_type = lf::GgmlType::Q4_0;
  k_down.up_type = lf::GgmlType::F16;
  k_down.down_type = lf::GgmlType::Q5_K;
  for (const lf::test::MoeFixture& moe : {lf::test::MoeFixture{}, wide, top1, k_down}) {
    lf::test::FixtureOptions o;
    o.format = WeightFormat::mixed;
    lf::test::add_moe(moe, &o);
    require_same_bytes_for_all_counts(fixture(o));
  }
}

TEST_CASE("engine output is byte-identical for 1, 2, 3, 4, 8 threads: gemma3", "[threads]") {
  require_same_bytes_for_all_counts(fixture(Arch::gemma3, WeightFormat::mixed));
}

TEST_CASE("engine output is byte-identical for 1, 2, 3, 4, 8 threads: counts no thread count divides", "[threads]") {
  FixtureModel f;
  require_ok(build_odd_model(&f));
  Model m;
  require_ok(f.load({0, 2}, true, true, &m));
  REQUIRE(m.shard(0).attn.n_units == 5);
  REQUIRE(m.shard(0).ffn.n_units == 7);
  require_same_bytes_for_all_counts(f);
}

// name, layer and bytes of every intermediate the debug hook sees in a 6-token prompt.
std::vector<std::string> taps(const FixtureModel& f, int n_threads) {
  Model m;
  require_ok(f.load_all(&m));
  require_ok(lf::set_threads(&m, n_threads));
  Session s = session(m, kModelContext);
  std::vector<std::string> seen;
  s.debug_hook = [&](const char* name, int il, const float* x, int n_rows, int n_cols) {
    const char* raw = reinterpret_cast<const char*>(x);
    seen.push_back(std::string(name) + "/" + std::to_string(il) + "/" +
                   std::string(raw, raw + static_cast<size_t>(n_rows) * static_cast<size_t>(n_cols) * sizeof(float)));
  };
  forward_rows(m, s, embed_tokens(m, {1, 2, 3, 4, 5, 6}).x, 0, 6);
  return seen;
}

TEST_CASE("the debug hook sees the same intermediates whatever the thread count", "[threads]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const std::vector<std::string> one = taps(f, 1);
  REQUIRE(one.size() == 8 * lf::test::kFixtureLayers);
  REQUIRE(taps(f, 3) == one);
}

TEST_CASE("a forward in the buffers of an earlier, larger call gives a fresh node's bytes", "[threads]") {
  // Calls of 40, 33, 64 and 35 rows, each from position 0 of its own session: the 33-row call runs
  // in the buffers the 40-row one left, the 35-row call in those of the 64-row one (which got
  // fresh buffers, 40 rows being too few, and then kept them), each holding the earlier call's
  // values; every output must be the one a freshly loaded node gives.
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const auto node = lf::test::load_copy(f, {{0, -1}, 2});
  const Model& m = node->m;
  for (const int n : {40, 33, 64, 35}) {
    INFO(n << " rows");
    const std::vector<float> x = embed_tokens(m, lf::test::token_sequence(n, 7 + n, 3, m.config.n_vocab)).x;
    Session kept = session(m, 80, 16);
    const std::vector<float> got = forward_rows(m, kept, x, 0, n);
    const auto fresh = lf::test::load_copy(f, {{0, -1}, 2});
    Session s = session(fresh->m, 80, 16);
    const std::vector<float> want = forward_rows(fresh->m, s, x, 0, n);
    REQUIRE(got.size() == want.size());
    REQUIRE(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("a model keeps the buffers of its largest call of many rows, for calls of about as many", "[threads]") {
  lf::ScratchSpare spare;
  const lf::ScratchShape shape40 = [] { lf::ScratchShape s; s.rows = 40; s.n_embd = 8; return s; }();
  std::unique_ptr<lf::Scratch> a = spare.take(40);
  a->reshape(shape40, 2);
  const lf::Scratch* kept = a.get();
  spare.give_back(std::move(a));
  CHECK(spare.take(8).get() != kept);   // a call of few rows: fresh buffers
  CHECK(spare.take(80).get() != kept);  // twice as many rows: fresh too, the 40 kept
  std::unique_ptr<lf::Scratch> b = spare.take(33);  // past half of 40: the kept ones
  CHECK(b.get() == kept);
  CHECK(spare.take(40).get() != kept);  // taken: none kept now
  std::unique_ptr<lf::Scratch> small = std::make_unique<lf::Scratch>();
  small->reshape([] { lf::ScratchShape s; s.rows = 8; s.n_embd = 8; return s; }(), 2);
  spare.give_back(std::move(small));  // fewer than kMinRows rows: not kept
  spare.give_back(std::move(b));
  CHECK(spare.take(40).get() == kept);
}

TEST_CASE("set_threads changes the pool and refuses nonsense counts", "[threads]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::f32);
  Model m;
  require_ok(f.load_all(&m));
  REQUIRE(m.pool->size() == 1);
  require_ok(lf::set_threads(&m, 3));
  REQUIRE(m.pool->size() == 3);
  REQUIRE(lf::set_threads(&m, 0).code() == lf::Code::invalid_argument);
  REQUIRE(lf::set_threads(&m, lf::kMaxThreads + 1).code() == lf::Code::invalid_argument);
}

TEST_CASE("forward_async gives forward's bytes; a forward while one runs is refused", "[threads]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  Model m;
  require_ok(f.load_all(&m));
  require_ok(lf::set_threads(&m, 3));
  const int n = 5;
  const std::vector<float> x = embed_tokens(m, {3, 1, 4, 1, 5}).x;

  Session sync_s = session(m, kModelContext), async_s = session(m, kModelContext);
  const std::vector<float> want = forward_rows(m, sync_s, x, 0, n);
  std::vector<float> got(x.size());

  std::atomic<bool> finished{false};
  Status outcome(lf::Code::internal, "done never called");
  require_ok(lf::forward_async(m, async_s, 0, x, n, got, false, [&](const Status& s) {
    outcome = s;
    finished = true;
  }));
  spin_until(finished);
  require_ok(outcome);
  REQUIRE(async_s.n_past() == n);
  REQUIRE(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);

  std::atomic<bool> release{false};
  REQUIRE(m.pool->start([&](int) { spin_until(release); }, nullptr));
  Session other = session(m, kModelContext);
  const Status busy = lf::forward(m, other, 0, x.data(), n, got.data(), false);
  release = true;
  REQUIRE(busy.code() == lf::Code::failed_precondition);
  REQUIRE(busy.message().find("already running") != std::string::npos);
  REQUIRE(other.n_past() == 0);
}

TEST_CASE("the head gives the same bytes on the pool, without waiting, and while a forward holds the pool",
          "[threads]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  auto logits_of = [&](Model& m, const std::vector<float>& hidden, int rows) {
    std::vector<float> logits(static_cast<size_t>(rows) * m.config.n_vocab);
    require_ok(lf::head(m, hidden.data(), rows, logits.data()));
    return logits;
  };
  Model one;
  require_ok(f.load_all(&one));
  const int E = one.config.n_embd, rows = 3;
  std::vector<float> hidden(static_cast<size_t>(rows) * E);
  lf::test::FixtureRng rng(5);
  for (float& v : hidden) v = 4.0f * rng.uniform();
  const std::vector<float> want = logits_of(one, hidden, rows);

  Model m;
  require_ok(f.load_all(&m));
  require_ok(lf::set_threads(&m, 3));
  REQUIRE(logits_of(m, hidden, rows) == want);

  std::vector<float> got(want.size());
  std::atomic<bool> finished{false};
  Status outcome;
  require_ok(lf::head_async(m, hidden.data(), rows, got.data(), [&](const Status& s) {
    outcome = s;
    finished = true;
  }));
  spin_until(finished);
  require_ok(outcome);
  REQUIRE(got == want);

  // While another job holds the pool the head runs on the caller's thread; its async form is refused.
  std::atomic<bool> release{false};
  REQUIRE(m.pool->start([&](int) { spin_until(release); }, nullptr));
  const std::vector<float> inline_logits = logits_of(m, hidden, rows);
  const Status busy = lf::head_async(m, hidden.data(), rows, got.data(), [](const Status&) {});
  release = true;
  REQUIRE(inline_logits == want);
  REQUIRE(busy.code() == lf::Code::failed_precondition);
}

}  // namespace
