// Early exit (approx.h, docs/approximate.md): the last row of a forward call stops once its
// relative updates fall below the threshold, and later layers only write its K and V.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "support/engine_checks.h"
#include "model/forward.h"
#include "model/session.h"

namespace {

using lf::ApproxOptions;
using lf::ExitState;
using lf::test::FixtureModel;
using lf::test::same_bytes;

constexpr int kPrompt = 6;
constexpr int kDecode = 3;

FixtureModel fixture(std::vector<int> silent_layers) {
  lf::test::FixtureOptions o;
  o.format = lf::test::WeightFormat::mixed;
  o.silent_layers = std::move(silent_layers);
  return lf::test::fixture(o);
}

// One pipeline of nodes over the fixture's layers: a prompt, then decode steps, each passing
// its exit state from node to node.
struct Run {
  std::vector<float> hidden;      // every call's output rows, in order
  std::vector<float> logits;      // the head on every call's last row
  std::vector<int> exit_layers;   // per call: where the last row exited (-1: it did not)
  std::vector<float> updates;     // per call and layer: the last row's relative update (-1 once exited)
};

Run run(const FixtureModel& f, const std::vector<lf::LayerRange>& ranges, const ApproxOptions& approx, int n_threads) {
  std::vector<lf::Model> nodes(ranges.size());
  std::vector<lf::Session> sessions(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    nodes[i] = lf::test::load(f, {ranges[i], n_threads});
    sessions[i] = lf::test::session(nodes[i], lf::test::kModelContext);
    sessions[i].approx = approx;
  }
  const int E = nodes[0].config.n_embd, V = nodes[0].config.n_vocab;
  const std::vector<int32_t> tokens = lf::test::token_sequence(kPrompt + kDecode, 5, 2, V);
  const std::vector<float> x = lf::test::embed_tokens(nodes[0], tokens).x;

  Run r;
  auto call = [&](int start, int n) {
    std::vector<float> h(x.begin() + static_cast<std::ptrdiff_t>(start) * E, x.begin() + static_cast<std::ptrdiff_t>(start + n) * E);
    ExitState exit;
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::vector<float> out(h.size());
      sessions[i].exit_in = exit;
      REQUIRE(lf::forward(nodes[i], sessions[i], start, h.data(), n, out.data(), false).ok());
      exit = sessions[i].last.exit_out;
      r.updates.insert(r.updates.end(), sessions[i].last.row_updates.begin(), sessions[i].last.row_updates.end());
      h = std::move(out);
    }
    std::vector<float> logits(static_cast<size_t>(V));
    REQUIRE(lf::head(nodes.back(), h.data() + h.size() - E, 1, logits.data()).ok());
    r.hidden.insert(r.hidden.end(), h.begin(), h.end());
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
    r.exit_layers.push_back(exit.exit_layer);
  };
  call(0, kPrompt);
  for (int t = kPrompt; t < kPrompt + kDecode; ++t) call(t, 1);
  return r;
}

const std::vector<lf::LayerRange> kWhole = {{0, lf::test::kFixtureLayers}};

ApproxOptions early_exit(float threshold, int window) {
  ApproxOptions o;
  o.early_exit = true;
  o.exit_threshold = threshold;
  o.exit_window = window;
  return o;
}

}  // namespace

TEST_CASE("early exit: threshold 0 never exits and gives the exact engine's bytes", "[approx]") {
  const FixtureModel f = fixture({});
  const Run exact = run(f, kWhole, ApproxOptions(), 1);
  REQUIRE(ApproxOptions().early_exit == false);
  for (float u : exact.updates) REQUIRE(u > 0.0f);  // measured even with the mode off
  for (int window : {1, 2, 3}) {
    for (int threads : {1, 2}) {
      INFO("window " << window << ", threads " << threads);
      const Run r = run(f, kWhole, early_exit(0.0f, window), threads);
      REQUIRE(same_bytes(r.hidden, exact.hidden));
      REQUIRE(same_bytes(r.logits, exact.logits));
      REQUIRE(same_bytes(r.updates, exact.updates));
      for (int e : r.exit_layers) REQUIRE(e == -1);
    }
  }
}

TEST_CASE("early exit: layers that add nothing are where the row exits, with bit-identical logits", "[approx]") {
  // Layers 1 and 2 have zero attn_output and ffn_down: they only scale the residual stream.
  const FixtureModel f = fixture({1, 2});
  const Run exact = run(f, kWhole, ApproxOptions(), 1);
  const int L = lf::test::kFixtureLayers;
  for (size_t call = 0; call < exact.exit_layers.size(); ++call) {
    REQUIRE(exact.updates[call * L + 0] > 0.0f);
    REQUIRE(exact.updates[call * L + 1] == 0.0f);
    REQUIRE(exact.updates[call * L + 2] == 0.0f);
  }
  for (int threads : {1, 2, 3}) {
    INFO("threads " << threads);
    // Window 1: the update of layer 1 alone is 0, so the row leaves after layer 1 and layer 2
    // runs only its K and V for it; the next calls read those K and V.
    const Run one = run(f, kWhole, early_exit(1e-6f, 1), threads);
    REQUIRE(same_bytes(one.logits, exact.logits));
    REQUIRE(same_bytes(one.hidden, exact.hidden));
    for (size_t call = 0; call < one.exit_layers.size(); ++call) {
      REQUIRE(one.exit_layers[call] == 1);
      REQUIRE(one.updates[call * L + 2] == -1.0f);
    }
    // Window 2: layers 1 and 2 together are needed, and then no layer is left.
    const Run two = run(f, kWhole, early_exit(1e-6f, 2), threads);
    REQUIRE(same_bytes(two.logits, exact.logits));
    for (int e : two.exit_layers) REQUIRE(e == 2);
  }
}

TEST_CASE("early exit: the state crosses node boundaries", "[approx]") {
  const FixtureModel f = fixture({1, 2});
  const Run exact = run(f, kWhole, ApproxOptions(), 1);
  // Nodes [0, 2) and [2, 3): the row exits in the first node and the second only writes K/V.
  const Run split_one = run(f, {{0, 2}, {2, 3}}, early_exit(1e-6f, 1), 2);
  REQUIRE(same_bytes(split_one.logits, exact.logits));
  for (int e : split_one.exit_layers) REQUIRE(e == 1);
  // Nodes [0, 1), [1, 2), [2, 3) with window 2: the window holds updates of two nodes.
  const Run split_two = run(f, {{0, 1}, {1, 2}, {2, 3}}, early_exit(1e-6f, 2), 1);
  REQUIRE(same_bytes(split_two.logits, exact.logits));
  for (int e : split_two.exit_layers) REQUIRE(e == 2);
}

TEST_CASE("early exit: an exit on a model whose layers all matter changes the output, the same for any thread count", "[approx]") {
  const FixtureModel f = fixture({});
  const Run exact = run(f, kWhole, ApproxOptions(), 1);
  // Every update is far below 1000: the row exits after layer 0 (window 1).
  const Run first = run(f, kWhole, early_exit(1000.0f, 1), 1);
  for (int e : first.exit_layers) REQUIRE(e == 0);
  REQUIRE_FALSE(same_bytes(first.logits, exact.logits));
  for (float v : first.logits) REQUIRE(std::isfinite(v));
  // Only the last row of each call exits: the prompt's other rows are the exact engine's.
  const size_t E = lf::test::kFixtureEmbd;
  REQUIRE(std::memcmp(first.hidden.data(), exact.hidden.data(), (kPrompt - 1) * E * sizeof(float)) == 0);
  for (int threads : {2, 3}) {
    INFO("threads " << threads);
    REQUIRE(same_bytes(run(f, kWhole, early_exit(1000.0f, 1), threads).logits, first.logits));
  }
}

TEST_CASE("early exit: a failed call keeps the incoming state for the retry", "[approx]") {
  const FixtureModel f = fixture({});
  const lf::Model m = lf::test::load(f);
  lf::Session s = lf::test::session(m, lf::test::kModelContext);
  s.approx = early_exit(1000.0f, 1);
  s.exit_in.exit_layer = 0;
  std::vector<float> x(lf::test::kFixtureEmbd, 0.5f), y(x.size());
  REQUIRE_FALSE(lf::forward(m, s, 1, x.data(), 1, y.data(), false).ok());  // start_pos mismatch
  REQUIRE(s.exit_in.exit_layer == 0);
  REQUIRE(lf::forward(m, s, 0, x.data(), 1, y.data(), false).ok());
  REQUIRE(s.last.exit_out.exit_layer == 0);   // arrived exited, stays exited
  REQUIRE(s.exit_in.exit_layer == -1);   // consumed
  for (float u : s.last.row_updates) REQUIRE(u == -1.0f);
}
