// Gemma 4 E2B/E4B features on a tiny in-memory model (fixture_e_model.h): the configuration and
// its refusals, per-layer inputs and the whole forward against the reference, byte identity
// across thread counts, cache chunkings and pipeline splits, and splits that would separate a
// shared-KV layer from the layer whose cache it reads.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "engine_checks.h"
#include "fixture_e_model.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/node_needs.h"
#include "model/per_layer_embd.h"
#include "model/reference_forward.h"

namespace {

using lf::Code;
using lf::Model;
using lf::Session;
using lf::Status;
using lf::test::EFixtureOptions;
using lf::test::FixtureModel;
using lf::test::WeightFormat;
using lf::test::max_row_rel_error;
using lf::test::session;

constexpr int kEmbd = lf::test::kFixtureEmbd;
constexpr int kLayers = lf::test::kELayers;
constexpr int kPl = lf::test::kEPerLayer;

FixtureModel e_fixture(EFixtureOptions o = {}) {
  FixtureModel f;
  const Status s = lf::test::build_e_fixture(o, &f);
  INFO(s.message());
  REQUIRE(s.ok());
  return f;
}

Status load_status(const FixtureModel& f, lf::LayerRange range, bool emb, bool head, int threads, Model* m) {
  lf::ModelLoadOptions options{range, emb, head};
  options.n_threads = threads;
  return lf::load_model(f.file, f.locator(), options, m);
}

Model load(const FixtureModel& f, lf::LayerRange range = {0, kLayers}, bool emb = true, bool head = true,
           int threads = 1) {
  Model m;
  const Status s = load_status(f, range, emb, head, threads, &m);
  INFO(s.message());
  REQUIRE(s.ok());
  return m;
}

std::vector<int32_t> prompt(int n) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (11 * i + 5) % lf::test::kFixtureVocab;
  return t;
}

// The first node's work: embeddings [n, n_embd] and every layer's per-layer input [L, n, n_pl].
struct Inputs {
  std::vector<float> x, per_layer;
};
Inputs inputs(const Model& first, const std::vector<int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size());
  Inputs in{std::vector<float>(static_cast<size_t>(n) * kEmbd), std::vector<float>(static_cast<size_t>(kLayers) * n * kPl)};
  REQUIRE(lf::embed(first, tokens.data(), n, in.x.data()).ok());
  const Status s = lf::per_layer_inputs(first, tokens.data(), n, in.x.data(), in.per_layer.data());
  INFO(s.message());
  REQUIRE(s.ok());
  return in;
}

// Layers [begin, end)'s slice of per-layer inputs [L, n_all, n_pl], tokens [t0, t0 + n).
std::vector<float> slice(const std::vector<float>& per_layer, int n_all, int begin, int end, int t0, int n) {
  std::vector<float> out;
  for (int l = begin; l < end; ++l) {
    const float* src = per_layer.data() + (static_cast<size_t>(l) * n_all + t0) * kPl;
    out.insert(out.end(), src, src + static_cast<size_t>(n) * kPl);
  }
  return out;
}

// Tokens [t0, t0 + n) of `in` through the session's model, with their per-layer inputs.
std::vector<float> run(const Model& m, Session& s, const Inputs& in, int n_all, int t0, int n, bool last_only = false) {
  s.per_layer_in = slice(in.per_layer, n_all, m.range.begin, m.range.end, t0, n);
  std::vector<float> out((last_only ? 1 : n) * kEmbd);
  const Status st = lf::forward(m, s, t0, in.x.data() + static_cast<size_t>(t0) * kEmbd, n, out.data(), last_only);
  INFO(st.message());
  REQUIRE(st.ok());
  return out;
}

}  // namespace

TEST_CASE("E-model configuration: per-layer width, shared-KV mapping, per-layer FFN widths", "[e_model]") {
  const FixtureModel f = e_fixture();
  lf::ModelConfig c;
  REQUIRE(lf::load_model_config(f.file, &c).ok());
  CHECK(c.n_embd_per_layer == kPl);
  CHECK(c.n_shared_kv == 2);
  const int kv_layer[kLayers] = {0, 1, 2, 1, 2};
  const int n_ff[kLayers] = {128, 96, 160, 256, 256};
  for (int il = 0; il < kLayers; ++il) {
    INFO("layer " << il);
    CHECK(c.layers[il].kv_layer == kv_layer[il]);
    CHECK(c.layers[il].shares_kv == (il >= 3));
    CHECK(c.layers[il].n_ff == n_ff[il]);
  }
}

TEST_CASE("E-model files that llama.cpp could not run the same way are refused by name", "[e_model]") {
  auto refused = [](EFixtureOptions o, const std::string& needle) {
    FixtureModel f;
    REQUIRE(lf::test::build_e_fixture(o, &f).ok());
    Model m;
    const Status s = f.load_all(&m);
    INFO(s.message());
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().find(needle) != std::string::npos);
  };
  // Layer n_kv - 2 = 1 global: shared sliding layer 3 would read a global layer's cache.
  EFixtureOptions swapped;
  swapped.pattern = "SGSSG";
  refused(swapped, "shared-KV layer 3 (sliding, head dim 32, 1 KV heads) would read layer 1's cache (global");
  EFixtureOptions too_many;
  too_many.n_shared_kv = 4;
  too_many.pattern = "SGSGG";
  refused(too_many, "leaves 1 of 5 layers with a KV cache of their own");
  EFixtureOptions no_table;
  no_table.omit_tensors = {"per_layer_token_embd.weight"};
  refused(no_table, "missing required tensor 'per_layer_token_embd.weight'");
  EFixtureOptions no_gate;
  no_gate.omit_tensors = {"blk.2.inp_gate.weight"};
  refused(no_gate, "missing required tensor 'blk.2.inp_gate.weight'");
}

TEST_CASE("shared-KV layers may carry K/V weights, which are never loaded", "[e_model]") {
  EFixtureOptions o;
  o.shared_layers_keep_kv = true;
  const FixtureModel with_kv = e_fixture(o);
  const FixtureModel without = e_fixture();
  const Model a = load(with_kv), b = load(without);
  CHECK_FALSE(a.layer(3).attn_k.present());
  lf::NodeNeeds needs;
  REQUIRE(lf::node_needs(with_kv.file, lf::NodeShape{{0, kLayers}, true, true, 32, 1}, &needs).ok());
  for (const std::string& name : needs.tensors) CHECK(name.find("blk.3.attn_k") == std::string::npos);
}

TEST_CASE("per-layer inputs and the forward agree with the reference", "[e_model]") {
  // F32 weights: only the f16 cache, the GELU table and f32 sums differ from the reference;
  // mixed Q8_0/Q4_0 adds Q8_0 activations. Bounds about 1.5x the measured errors (inputs
  // 1.7e-7 and 1.2e-7; hidden f32 6.7e-3, mixed 0.124: five random layers, and gemma4's attention
  // has no 1/sqrt(D) scale, as in test_engine's gemma4 cases).
  struct Case { WeightFormat format; double input_tol, hidden_tol; };
  for (const Case& k : {Case{WeightFormat::f32, 1e-6, 1e-2}, Case{WeightFormat::mixed, 1e-6, 0.19}}) {
    EFixtureOptions o;
    o.format = k.format;
    const FixtureModel f = e_fixture(o);
    const Model m = load(f);
    const int n = 11;  // past the window of 4
    const std::vector<int32_t> tokens = prompt(n);
    const Inputs in = inputs(m, tokens);
    std::vector<float> ref_inputs;
    REQUIRE(lf::reference_per_layer_inputs(m, tokens.data(), n, in.x.data(), &ref_inputs).ok());
    const double input_err = max_row_rel_error(in.per_layer, ref_inputs, kPl);
    INFO("format " << (k.format == WeightFormat::f32 ? "f32" : "mixed") << ": per-layer inputs " << input_err);
    CHECK(input_err <= k.input_tol);

    Session s = session(m);
    const std::vector<float> hidden = run(m, s, in, n, 0, n);
    std::vector<float> ref;
    REQUIRE(lf::reference_layers(m, in.x.data(), n, &ref, ref_inputs.data()).ok());
    const double err = max_row_rel_error(hidden, ref, kEmbd);
    INFO("hidden " << err);
    CHECK(err <= k.hidden_tol);
    CHECK(err > 0.0);

    // The branch matters: without it (zero inputs make gelu(.)·0 vanish) the output moves.
    std::vector<float> ref_zero;
    const std::vector<float> zeros(ref_inputs.size(), 0.0f);
    REQUIRE(lf::reference_layers(m, in.x.data(), n, &ref_zero, zeros.data()).ok());
    CHECK(max_row_rel_error(ref_zero, ref, kEmbd) > 0.5);
  }
}

TEST_CASE("E-model output bytes: thread counts, cache chunkings and valid splits agree", "[e_model]") {
  EFixtureOptions o;
  o.format = WeightFormat::mixed;
  const FixtureModel f = e_fixture(o);
  const int n = 13;
  const Model whole = load(f);
  const Inputs in = inputs(whole, prompt(n));
  Session s0 = session(whole);
  const std::vector<float> expected = run(whole, s0, in, n, 0, n);

  for (int threads : {2, 3, 4}) {
    const Model m = load(f, {0, kLayers}, true, true, threads);
    Session s = session(m);
    INFO(threads << " threads");
    CHECK(run(m, s, in, n, 0, n) == expected);
  }
  // Chunks of 2 positions: the sliding ring is 4 + 2 - 1 slots, but layer 1, which shared layer 3
  // reads after layer 1 stored the whole call, keeps every position.
  {
    Session s = session(whole, 32, 2);
    CHECK(run(whole, s, in, n, 0, n) == expected);
  }
  {  // token by token, and a prompt then the rest
    Session s = session(whole, 32, 2);
    std::vector<float> got;
    for (int t = 0; t < n; ++t) {
      const std::vector<float> row = run(whole, s, in, n, t, 1);
      got.insert(got.end(), row.begin(), row.end());
    }
    CHECK(got == expected);
  }
  // The one split that keeps each shared layer with its source (3 with 1, 4 with 2): [0, 1) + [1, 5).
  for (int k : {1}) {
    const Model a = load(f, {0, k}, true, false), b = load(f, {k, kLayers}, false, true);
    Session sa = session(a), sb = session(b);
    const std::vector<float> mid = run(a, sa, in, n, 0, n);
    Inputs next{mid, in.per_layer};
    INFO("split at " << k);
    CHECK(run(b, sb, next, n, 0, n) == expected);
  }
}

TEST_CASE("a split between a shared-KV layer and its source is refused, naming both layers", "[e_model]") {
  const FixtureModel f = e_fixture();
  for (int k : {2, 3, 4}) {
    Model m;
    const Status s = load_status(f, {k, kLayers}, false, true, 1, &m);
    INFO(s.message());
    REQUIRE(s.code() == Code::failed_precondition);
    const std::string expect = k < 4 ? "layers 1 and 3 must stay on one node" : "layers 2 and 4 must stay on one node";
    CHECK(s.message().find(expect) != std::string::npos);
    lf::NodeNeeds needs;
    const Status n = lf::node_needs(f.file, lf::NodeShape{{k, kLayers}, false, true, 32, 1}, &needs);
    CHECK(n.message() == s.message());
  }
}

TEST_CASE("shared-KV layers allocate no cache; forwards without per-layer inputs are refused", "[e_model]") {
  const FixtureModel f = e_fixture();
  const Model m = load(f);
  uint64_t all = 0, own = 0;
  REQUIRE(lf::KvCache::bytes_for(m.config, {0, kLayers}, lf::KvCacheOptions{32, 64}, &all).ok());
  REQUIRE(lf::KvCache::bytes_for(m.config, {0, 3}, lf::KvCacheOptions{32, 64}, &own).ok());
  CHECK(all == own);
  CHECK(own > 0);

  Session s = session(m);
  const std::vector<int32_t> tokens = prompt(3);
  const Inputs in = inputs(m, tokens);
  std::vector<float> out(3 * kEmbd);
  const Status missing = lf::forward(m, s, 0, in.x.data(), 3, out.data(), false);
  CHECK(missing.code() == Code::invalid_argument);
  CHECK(missing.message().find("per-layer input") != std::string::npos);
  CHECK(s.n_past() == 0);
  s.per_layer_in.assign(in.per_layer.begin(), in.per_layer.end() - 1);
  CHECK_FALSE(lf::forward(m, s, 0, in.x.data(), 3, out.data(), false).ok());
  // Only the first node computes them.
  const Model later = load(f, {1, kLayers}, false, true);
  std::vector<float> per_layer(static_cast<size_t>(kLayers) * 3 * kPl);
  CHECK(lf::per_layer_inputs(later, tokens.data(), 3, in.x.data(), per_layer.data()).code() == Code::failed_precondition);
}
