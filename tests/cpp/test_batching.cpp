// The batched forward (docs/batching.md): a session's output bytes are the same alone and in any
// batch, at any place in it, at any thread count and weight layout; a refused entry fails alone
// and leaves its session as it was. Built natively and under Emscripten.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/engine_checks.h"
#include "support/fixture_e_model.h"
#include "support/fixture_model.h"
#include "support/fixture_moe.h"
#include "model/forward.h"
#include "model/per_layer_embd.h"

namespace {

using lf::Arch;
using lf::BatchEntry;
using lf::Code;
using lf::Model;
using lf::Session;
using lf::Status;
using lf::test::Embedded;
using lf::test::FixtureModel;
using lf::test::Layout;
using lf::test::WeightFormat;
using lf::test::embed_tokens;
using lf::test::fixture;
using lf::test::load;
using lf::test::load_copy;
using lf::test::require_ok;
using lf::test::same_bytes;

// One session's calls: its tokens, cut into calls of n rows (last_only or not), and its
// approximate modes.
struct Script {
  std::vector<int32_t> tokens;
  std::vector<std::pair<int, bool>> calls;  // (n, last_only)
  lf::ApproxOptions approx;
};

// Sessions with a prompt of 1-9 tokens (whole or in two chunks) then decode steps, 12-16
// positions each, different tokens per session.
std::vector<Script> scripts(int n_sessions, int n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Script> out(static_cast<size_t>(n_sessions));
  for (Script& s : out) {
    const int length = 12 + static_cast<int>(rng() % 5);
    for (int i = 0; i < length; ++i) s.tokens.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab)));
    int done = 0;
    const int prompt = 1 + static_cast<int>(rng() % 9);
    if (prompt > 3 && rng() % 2 == 0) {
      s.calls.push_back({prompt / 2, false});
      s.calls.push_back({prompt - prompt / 2, rng() % 2 == 0});
    } else {
      s.calls.push_back({prompt, rng() % 2 == 0});
    }
    done = prompt;
    while (done < length) {
      const int n = rng() % 5 == 0 ? 2 : 1;
      const int step = std::min(n, length - done);
      s.calls.push_back({step, rng() % 3 != 0});
      done += step;
    }
  }
  return out;
}

Session new_session(const Model& m, const Script& s, int attn_chunk) {
  Session out = lf::test::session(m, 32, attn_chunk);
  out.approx = s.approx;
  return out;
}

// Each session's calls run alone, in order: every call's output rows.
std::vector<std::vector<std::vector<float>>> alone(const Model& m, const Model& embedder,
                                                   const std::vector<Script>& scripts, int attn_chunk) {
  std::vector<std::vector<std::vector<float>>> out;
  for (const Script& script : scripts) {
    Session s = new_session(m, script, attn_chunk);
    auto& calls = out.emplace_back();
    int pos = 0;
    for (const auto& [n, last_only] : script.calls) {
      Embedded in = embed_tokens(embedder, script.tokens.data() + pos, n);
      s.per_layer_in = in.per_layer;
      std::vector<float> y(static_cast<size_t>(last_only ? 1 : n) * m.config.n_embd);
      require_ok(lf::forward(m, s, pos, in.x.data(), n, y.data(), last_only));
      calls.push_back(std::move(y));
      pos += n;
    }
  }
  return out;
}

// Runs the scripts in random batches: each step takes a random subset of the sessions that have
// joined and have calls left, in random order, one call each; sessions join at random steps and
// leave when their calls are done. Every call's bytes must be the alone ones.
void check_batched(const Model& m, const Model& embedder, const std::vector<Script>& scripts, int attn_chunk,
                   const std::vector<std::vector<std::vector<float>>>& expected, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t S = scripts.size();
  std::vector<Session> sessions;
  for (const Script& script : scripts) sessions.push_back(new_session(m, script, attn_chunk));
  std::vector<size_t> next(S, 0);
  std::vector<int> pos(S, 0), joins(S);
  for (int& j : joins) j = static_cast<int>(rng() % 4);
  size_t max_entries = 0;
  for (int step = 0;; ++step) {
    std::vector<size_t> ready;
    bool left = false;
    for (size_t i = 0; i < S; ++i) {
      if (next[i] == scripts[i].calls.size()) continue;
      left = true;
      if (step >= joins[i] && rng() % 4 != 0) ready.push_back(i);
    }
    if (!left) break;
    if (ready.empty()) continue;
    std::shuffle(ready.begin(), ready.end(), rng);
    max_entries = std::max(max_entries, ready.size());
    std::vector<BatchEntry> entries;
    std::vector<float> in;
    size_t out_floats = 0;
    for (size_t i : ready) {
      const auto [n, last_only] = scripts[i].calls[next[i]];
      Embedded call = embed_tokens(embedder, scripts[i].tokens.data() + pos[i], n);
      sessions[i].per_layer_in = call.per_layer;
      in.insert(in.end(), call.x.begin(), call.x.end());
      entries.push_back({&sessions[i], pos[i], n, last_only});
      out_floats += static_cast<size_t>(last_only ? 1 : n) * m.config.n_embd;
    }
    std::vector<float> out(out_floats);
    std::vector<Status> statuses;
    require_ok(lf::forward_batch(m, entries, in, out, &statuses));
    size_t offset = 0;
    for (size_t k = 0; k < ready.size(); ++k) {
      const size_t i = ready[k];
      require_ok(statuses[k]);
      const std::vector<float>& want = expected[i][next[i]];
      const std::vector<float> got(out.begin() + static_cast<std::ptrdiff_t>(offset),
                                   out.begin() + static_cast<std::ptrdiff_t>(offset + want.size()));
      INFO("session " << i << " call " << next[i] << " at entry " << k << " of " << ready.size());
      REQUIRE(same_bytes(got, want));
      offset += want.size();
      pos[i] += entries[k].n;
      ++next[i];
      REQUIRE(sessions[i].n_past() == pos[i]);
    }
  }
  CHECK(max_entries >= 3);  // the schedule did batch
}

// Alone at one thread against random batches at 1, 2 and 3 threads, on each layout.
void check_invariance(const FixtureModel& f, std::vector<Script> scripts, int attn_chunk,
                      lf::LayerRange range = {0, -1}) {
  const Model embedder = load(f);
  const Model reference = load(f, {range});
  const auto expected = alone(reference, embedder, scripts, attn_chunk);
  uint32_t seed = 100;
  for (Layout layout : {Layout::file, Layout::relaid, Layout::feature_major}) {
    for (int n_threads : {1, 2, 3}) {
      const auto node = load_copy(f, {range, n_threads, layout});
      INFO("layout " << static_cast<int>(layout) << ", " << n_threads << " threads");
      check_batched(node->m, embedder, scripts, attn_chunk, expected, seed++);
      check_batched(node->m, embedder, scripts, attn_chunk, expected, seed++);
    }
  }
}

TEST_CASE("batched sessions give the bytes they give alone: gemma4, gemma3, a node of later layers", "[batching]") {
  for (Arch arch : {Arch::gemma4, Arch::gemma3}) {
    const FixtureModel f = fixture(arch, WeightFormat::mixed);
    const lf::ModelConfig c = load(f).config;
    // attn_chunk 3: a prompt's rows are stored and attended in several chunks.
    check_invariance(f, scripts(6, c.n_vocab, 7 + static_cast<uint32_t>(arch)), 3);
  }
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  check_invariance(f, scripts(5, lf::test::kFixtureVocab, 21), 64, {1, lf::test::kFixtureLayers});
}

TEST_CASE("batched sessions keep their own approximate modes", "[batching]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  std::vector<Script> s = scripts(6, lf::test::kFixtureVocab, 33);
  s[1].approx.ffn_top_k = 0.25f;
  s[1].approx.ffn_top_k_threshold = 1.0f;
  s[2].approx.truncated_attention = true;
  s[2].approx.truncation_threshold = 1.0f;
  s[3].approx.early_exit = true;  // exits after its first layer
  s[3].approx.exit_threshold = 100.0f;
  s[3].approx.exit_window = 1;
  s[4].approx.ffn_top_k_layers = {{2, 8.0f}};
  s[4].approx.early_exit = true;
  s[4].approx.exit_threshold = 100.0f;
  s[4].approx.exit_window = 2;
  check_invariance(f, s, 2);
}

TEST_CASE("batched sessions on mixture-of-experts layers give the bytes they give alone", "[batching]") {
  lf::test::FixtureOptions o;
  o.format = WeightFormat::mixed;
  lf::test::MoeFixture moe;
  moe.exps_type = lf::GgmlType::Q4_0;
  lf::test::add_moe(moe, &o);
  check_invariance(fixture(o), scripts(6, lf::test::kFixtureVocab, 44), 64);
}

TEST_CASE("batched sessions with per-layer embeddings and shared-KV layers give the bytes they give alone",
          "[batching]") {
  check_invariance(lf::test::e_fixture(WeightFormat::mixed), scripts(5, lf::test::kFixtureVocab, 55), 2);
}

// A batch of three sessions at position 4: a's entry, then b's, then c's (b's refused or not).
struct ThreeSessions {
  const Model& m;
  std::vector<Session> s;
  std::vector<std::vector<float>> x;  // each session's 8 rows
  explicit ThreeSessions(const Model& model, const Model& embedder) : m(model) {
    for (int i = 0; i < 3; ++i) {
      s.push_back(lf::test::session(m, 16, 2));
      x.push_back(embed_tokens(embedder, lf::test::token_sequence(8, 7, 5 * i + 1)).x);
    }
  }
  std::vector<float> rows(int i, int pos, int n) const {
    const size_t E = static_cast<size_t>(m.config.n_embd);
    return std::vector<float>(x[i].begin() + static_cast<std::ptrdiff_t>(pos * E),
                              x[i].begin() + static_cast<std::ptrdiff_t>((pos + n) * E));
  }
};

TEST_CASE("a refused entry fails alone and leaves its session as it was", "[batching]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model embedder = load(f);
  const auto node = load_copy(f, {{1, lf::test::kFixtureLayers}, 2, Layout::relaid});
  const Model& m = node->m;
  const int E = m.config.n_embd;
  // What each session gives alone: 4 positions, then 4 more.
  ThreeSessions ref(m, embedder);
  std::vector<std::vector<float>> second;
  for (int i = 0; i < 3; ++i) {
    std::vector<float> y(4 * static_cast<size_t>(E));
    require_ok(lf::forward(m, ref.s[i], 0, ref.rows(i, 0, 4).data(), 4, y.data(), false));
    require_ok(lf::forward(m, ref.s[i], 4, ref.rows(i, 4, 4).data(), 4, y.data(), false));
    second.push_back(y);
  }

  ThreeSessions t(m, embedder);
  for (int i = 0; i < 3; ++i) {
    std::vector<float> y(4 * static_cast<size_t>(E));
    require_ok(lf::forward(m, t.s[i], 0, t.rows(i, 0, 4).data(), 4, y.data(), false));
  }
  auto batch = [&](const std::vector<float>& b_rows, int b_pos) {
    std::vector<float> in = t.rows(0, 4, 4);
    in.insert(in.end(), b_rows.begin(), b_rows.end());
    const std::vector<float> c_rows = t.rows(2, 4, 4);
    in.insert(in.end(), c_rows.begin(), c_rows.end());
    const std::vector<BatchEntry> entries = {{&t.s[0], 4, 4, false}, {&t.s[1], b_pos, 4, false}, {&t.s[2], 4, 4, false}};
    std::vector<float> out(12 * static_cast<size_t>(E), -1.0f);
    std::vector<Status> statuses;
    require_ok(lf::forward_batch(m, entries, in, out, &statuses));
    return std::make_pair(statuses, out);
  };
  auto entry_out = [&](const std::vector<float>& out, int k) {
    return std::vector<float>(out.begin() + 4 * E * k, out.begin() + 4 * E * (k + 1));
  };

  SECTION("a stale start_pos") {
    const auto [statuses, out] = batch(t.rows(1, 4, 4), 3);
    CHECK(statuses[1].code() == Code::failed_precondition);
    CHECK(statuses[1].message() == "start_pos 3 does not match the session's n_past 4");
    CHECK(entry_out(out, 1) == std::vector<float>(4 * static_cast<size_t>(E), -1.0f));  // untouched
  }
  SECTION("an output too large for the next norm") {
    // Layer 1 scales its output by 1.3: rows of 1.7e19 leave it at 2.2e19, whose squares
    // overflow, and the sliding layer 2 then stores the keys and values of zeroed rows.
    const auto [statuses, out] = batch(std::vector<float>(4 * static_cast<size_t>(E), 1.7e19f), 4);
    CHECK(statuses[1].code() == Code::invalid_argument);
    CHECK(statuses[1].message().find("output of layers [1, 3) is too large at row 0") != std::string::npos);
  }
  SECTION("a non-finite input") {
    std::vector<float> bad = t.rows(1, 4, 4);
    bad[3 * static_cast<size_t>(E) + 5] = NAN;
    const auto [statuses, out] = batch(bad, 4);
    CHECK(statuses[1].message() == "input is not finite at row 3, element 5");
  }
  // Whatever b's entry did, a's and c's ran as alone, and b resumes as if it had not been sent.
  REQUIRE(t.s[1].n_past() == 4);
  for (int k : {0, 2}) REQUIRE(t.s[k].n_past() == 8);
  std::vector<float> y(4 * static_cast<size_t>(E));
  require_ok(lf::forward(m, t.s[1], 4, t.rows(1, 4, 4).data(), 4, y.data(), false));
  CHECK(same_bytes(y, second[1]));
}

TEST_CASE("a batched forward is refused as a whole for a session twice, no rows or wrong buffers", "[batching]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model m = load(f, {{0, -1}, 2});
  const size_t E = static_cast<size_t>(m.config.n_embd);
  Session a = lf::test::session(m), b = lf::test::session(m);
  std::vector<float> in(3 * E, 0.5f), out(3 * E);
  std::vector<Status> statuses;
  auto refused = [&](const std::vector<BatchEntry>& entries, std::span<const float> x, std::span<float> y) {
    const Status st = lf::forward_batch(m, entries, x, y, &statuses);
    REQUIRE_FALSE(st.ok());
    CHECK(a.n_past() == 0);
    CHECK(b.n_past() == 0);
    return st.message();
  };
  CHECK(refused({}, in, out) == "a forward needs at least one session");
  CHECK(refused({{&a, 0, 1, false}, {&b, 0, 1, false}, {&a, 0, 1, false}}, in, out) ==
        "entry 2: the session of entry 0 again: a session runs once per forward call");
  CHECK(refused({{&a, 0, 2, false}, {&b, 0, 0, false}}, in, out) == "entry 1: n must be positive, got 0");
  CHECK(refused({{&a, 0, 2, false}, {&b, 0, 2, false}}, in, out) == "input has 192 floats, expected n * n_embd = 256");
  CHECK(refused({{&a, 0, 2, true}, {&b, 0, 1, false}}, in, out) == "output has room for 192 floats, expected 128");
}

TEST_CASE("each session's debug hook sees its own rows of a batch", "[batching]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model m = load(f, {{0, -1}, 2});
  const size_t E = static_cast<size_t>(m.config.n_embd);
  const std::vector<Script> s = scripts(2, lf::test::kFixtureVocab, 66);
  auto record = [](std::vector<std::vector<float>>* seen) {
    return [seen](const char*, int, const float* x, int n_rows, int n_cols) {
      seen->emplace_back(x, x + static_cast<size_t>(n_rows) * n_cols);
    };
  };
  std::vector<std::vector<float>> alone_a, alone_b, batch_a, batch_b;
  auto run = [&](bool batched, std::vector<std::vector<float>>* seen_a, std::vector<std::vector<float>>* seen_b) {
    Session a = lf::test::session(m), b = lf::test::session(m);
    a.debug_hook = record(seen_a);
    b.debug_hook = record(seen_b);
    const Embedded xa = embed_tokens(m, s[0].tokens.data(), 3), xb = embed_tokens(m, s[1].tokens.data(), 2);
    std::vector<float> ya(E), yb(2 * E);
    if (!batched) {
      require_ok(lf::forward(m, a, 0, xa.x.data(), 3, ya.data(), true));
      require_ok(lf::forward(m, b, 0, xb.x.data(), 2, yb.data(), false));
      return;
    }
    std::vector<float> in = xb.x;
    in.insert(in.end(), xa.x.begin(), xa.x.end());
    std::vector<float> out(3 * E);
    std::vector<Status> statuses;
    require_ok(lf::forward_batch(m, std::vector<BatchEntry>{{&b, 0, 2, false}, {&a, 0, 3, true}}, in, out, &statuses));
  };
  run(false, &alone_a, &alone_b);
  run(true, &batch_a, &batch_b);
  REQUIRE(!alone_a.empty());
  CHECK(batch_a == alone_a);
  CHECK(batch_b == alone_b);
}

}  // namespace
