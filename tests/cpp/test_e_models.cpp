// Gemma 4 E2B/E4B features on a tiny in-memory model (support/fixture_e_model.h): the
// configuration and its refusals, per-layer inputs and the whole forward against the reference,
// byte identity across thread counts, cache chunkings and pipeline splits, and splits that
// separate a shared-KV layer from the layer whose cache it reads, through the K/V rows shipped
// between nodes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "support/engine_checks.h"
#include "support/fixture_e_model.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/node_needs.h"
#include "model/per_layer_embd.h"
#include "model/reference_forward.h"

namespace {

// f16 value i of shipped rows (an f16 cache) set to bits h
void set_half(lf::KvRows* rows, size_t i, uint16_t h) { std::memcpy(rows->bytes.data() + 2 * i, &h, sizeof h); }

using lf::Code;
using lf::Model;
using lf::Session;
using lf::Status;
using lf::test::EFixtureOptions;
using lf::test::Embedded;
using lf::test::FixtureModel;
using lf::test::WeightFormat;
using lf::test::e_fixture;
using lf::test::embed_tokens;
using lf::test::forward_rows;
using lf::test::load;
using lf::test::max_row_rel_error;
using lf::test::same_bytes;
using lf::test::session;
using lf::test::token_sequence;

constexpr int kEmbd = lf::test::kFixtureEmbd;
constexpr int kLayers = lf::test::kELayers;
constexpr int kPl = lf::test::kEPerLayer;

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
std::vector<float> run(const Model& m, Session& s, const Embedded& in, int n_all, int t0, int n, bool last_only = false) {
  s.per_layer_in = slice(in.per_layer, n_all, m.range.begin, m.range.end, t0, n);
  return forward_rows(m, s, in.x, t0, n, last_only);
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
    const FixtureModel f = e_fixture(o);
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
    const std::vector<int32_t> tokens = token_sequence(n, 11, 5);
    const Embedded in = embed_tokens(m, tokens);
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
  const Embedded in = embed_tokens(whole, token_sequence(n, 11, 5));
  Session s0 = session(whole);
  const std::vector<float> expected = run(whole, s0, in, n, 0, n);

  for (int threads : {2, 3, 4}) {
    const Model m = load(f, {{0, kLayers}, threads});
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
  // The split that keeps each shared layer with its source (3 with 1, 4 with 2), so no K/V rows
  // travel: [0, 1) + [1, 5). Every other split ships them (the [kv_ship] tests).
  for (int k : {1}) {
    const Model a = load(f, {{0, k}}), b = load(f, {{k, kLayers}});
    Session sa = session(a), sb = session(b);
    const std::vector<float> mid = run(a, sa, in, n, 0, n);
    Embedded next{mid, in.per_layer};
    INFO("split at " << k);
    CHECK(run(b, sb, next, n, 0, n) == expected);
  }
}

namespace {

// A pipeline of nodes in process: each node's sessions, and each source layer's K/V rows of the
// step as the node of the source handed them out, given to the nodes that mirror it.
struct Pipeline {
  std::vector<Model> nodes;
  std::vector<Session> sessions;
};

// Sessions of 32 positions with K and V in kv_type.
Session typed_session(const Model& m, int attn_chunk, lf::GgmlType kv_type) {
  lf::KvCacheOptions o{32, attn_chunk};
  o.k_type = o.v_type = kv_type;
  Session s;
  lf::test::require_ok(Session::create(m, o, &s));
  return s;
}

Pipeline pipeline(const FixtureModel& f, const std::vector<int>& cuts, int threads, int attn_chunk = 64,
                  lf::GgmlType kv_type = lf::GgmlType::F16) {
  Pipeline p;
  std::vector<int> bounds{0};
  bounds.insert(bounds.end(), cuts.begin(), cuts.end());
  bounds.push_back(kLayers);
  p.nodes.reserve(bounds.size() - 1);
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    p.nodes.push_back(load(f, {{bounds[i], bounds[i + 1]}, threads}));
    p.sessions.push_back(typed_session(p.nodes.back(), attn_chunk, kv_type));
  }
  return p;
}

// Tokens [t0, t0 + n) of `in` through every node: each node's output is the next one's input,
// and the rows of each source layer a node hands out go to the later nodes that mirror it.
std::vector<float> run_at(Pipeline& p, const Embedded& in, int n_all, int t0, int n) {
  std::vector<lf::KvRows> shipped;
  std::vector<float> x(in.x.begin() + static_cast<std::ptrdiff_t>(t0) * kEmbd,
                       in.x.begin() + static_cast<std::ptrdiff_t>(t0 + n) * kEmbd);
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Model& m = p.nodes[i];
    Session& s = p.sessions[i];
    s.kv_rows_in.clear();
    for (const lf::KvRows& rows : shipped) {
      const std::vector<int>& mirrored = s.kv.mirrored();
      if (std::find(mirrored.begin(), mirrored.end(), rows.layer) != mirrored.end()) s.kv_rows_in.push_back(rows);
    }
    s.per_layer_in = slice(in.per_layer, n_all, m.range.begin, m.range.end, t0, n);
    std::vector<float> out(static_cast<size_t>(n) * kEmbd);
    const Status st = lf::forward(m, s, t0, x.data(), n, out.data(), false);
    INFO("node " << i << ": " << st.message());
    REQUIRE(st.ok());
    shipped.insert(shipped.end(), s.last.kv_rows_out.begin(), s.last.kv_rows_out.end());
    x = std::move(out);
  }
  return x;
}

// Every way to cut the 5 layers into 2 or 3 nodes.
std::vector<std::vector<int>> every_split() {
  std::vector<std::vector<int>> out;
  for (int a = 1; a < kLayers; ++a) {
    out.push_back({a});
    for (int b = a + 1; b < kLayers; ++b) out.push_back({a, b});
  }
  return out;
}

std::string cuts_text(const std::vector<int>& cuts) {
  std::string t;
  for (int c : cuts) t += (t.empty() ? "" : ",") + std::to_string(c);
  return t;
}

}  // namespace

TEST_CASE("a split anywhere ships the sources' K/V rows and gives one node's bytes, at 1-3 threads", "[e_model][kv_ship]") {
  EFixtureOptions o;
  o.format = WeightFormat::mixed;
  const FixtureModel f = e_fixture(o);
  const int n = 13;
  const Model whole = load(f);
  const Embedded in = embed_tokens(whole, token_sequence(n, 11, 5));
  // A prompt of 9, then 4 single steps.
  Session s0 = session(whole);
  std::vector<float> expected = run(whole, s0, in, n, 0, 9);
  for (int t = 9; t < n; ++t) {
    const std::vector<float> row = run(whole, s0, in, n, t, 1);
    expected.insert(expected.end(), row.begin(), row.end());
  }
  for (int threads : {1, 2, 3}) {
    for (const std::vector<int>& cuts : every_split()) {
      INFO(threads << " threads, cuts at " << cuts_text(cuts));
      Pipeline p = pipeline(f, cuts, threads, threads == 2 ? 2 : 64);
      std::vector<float> got = run_at(p, in, n, 0, 9);
      for (int t = 9; t < n; ++t) {
        const std::vector<float> row = run_at(p, in, n, t, 1);
        got.insert(got.end(), row.begin(), row.end());
      }
      CHECK(got == expected);
    }
  }
}

TEST_CASE("a split ships K/V rows in the cache's quantized types and gives one node's bytes", "[e_model][kv_ship]") {
  EFixtureOptions o;
  o.format = WeightFormat::mixed;
  const FixtureModel f = e_fixture(o);
  const int n = 11;
  const Model whole = load(f);
  const Embedded in = embed_tokens(whole, token_sequence(n, 11, 5));
  for (const lf::GgmlType type : {lf::GgmlType::Q8_0, lf::GgmlType::Q4_0}) {
    INFO(lf::kv_type_name(type));
    Session s0 = typed_session(whole, 64, type);
    std::vector<float> expected = run(whole, s0, in, n, 0, 8);
    for (int t = 8; t < n; ++t) {
      const std::vector<float> row = run(whole, s0, in, n, t, 1);
      expected.insert(expected.end(), row.begin(), row.end());
    }
    for (const std::vector<int>& cuts : every_split()) {
      INFO("cuts at " << cuts_text(cuts));
      Pipeline p = pipeline(f, cuts, 2, 64, type);
      std::vector<float> got = run_at(p, in, n, 0, 8);
      for (int t = 8; t < n; ++t) {
        const std::vector<float> row = run_at(p, in, n, t, 1);
        got.insert(got.end(), row.begin(), row.end());
      }
      CHECK(got == expected);
      // Each position's rows: a K and a V row per KV head, in blocks of the type.
      for (const Session& s : p.sessions) {
        for (const lf::KvRows& rows : s.last.kv_rows_out) {
          const lf::LayerConfig& l = whole.config.layers[rows.layer];
          CHECK(rows.bytes.size() == static_cast<size_t>(rows.n * l.n_head_kv) * 2 * lf::kv_row_bytes(type, l.head_dim));
        }
      }
    }
  }
}

TEST_CASE("the rows a node hands out are its cache's bytes; what a node mirrors is in its needs", "[e_model][kv_ship]") {
  const FixtureModel f = e_fixture();
  const Model whole = load(f);
  const Embedded in = embed_tokens(whole, token_sequence(6, 11, 5));
  Session s = session(whole);
  run(whole, s, in, 6, 0, 6);
  CHECK(s.last.kv_rows_out.empty());  // every reader is on the node
  const Model first = load(f, {{0, 2}});
  Session sa = session(first);
  run(first, sa, in, 6, 0, 4);
  REQUIRE(sa.last.kv_rows_out.size() == 1);  // layer 1, which layer 3 reads; layer 2 is not here
  const lf::KvRows& rows = sa.last.kv_rows_out[0];
  CHECK(rows.layer == 1);
  CHECK(rows.pos0 == 0);
  CHECK(rows.n == 4);
  REQUIRE(rows.bytes.size() == 4 * 2 * 32 * 2);
  // Position 2's K of layer 1 (one KV head of 32 f16) is what the cache's view of layer 1 holds.
  const lf::KvView view = sa.kv.view(1, 0, 4);
  CHECK(std::memcmp(rows.bytes.data() + 2 * 128, lf::halves(view.k) + 2 * 32, 64) == 0);
  CHECK(std::memcmp(rows.bytes.data() + 2 * 128 + 64, lf::halves(view.v) + 2 * 32, 64) == 0);

  struct Case {
    lf::LayerRange range;
    std::vector<int> in, out;
  };
  for (const Case& c : {Case{{0, 2}, {}, {1}}, Case{{2, 5}, {1}, {}}, Case{{3, 5}, {1, 2}, {}}, Case{{1, 3}, {}, {1, 2}},
                        Case{{0, 5}, {}, {}}, Case{{4, 5}, {2}, {}}}) {
    INFO("layers [" << c.range.begin << ", " << c.range.end << ")");
    lf::NodeNeeds needs;
    REQUIRE(lf::node_needs(f.file, lf::NodeShape{c.range, c.range.begin == 0, c.range.end == kLayers, 32, 1}, &needs).ok());
    auto layers = [](const std::vector<lf::NodeNeeds::KvLayer>& l) {
      std::vector<int> out;
      for (const lf::NodeNeeds::KvLayer& k : l) {
        // K and V of one position: 2 x f16 x (1 KV head x head dim 32 sliding, 64 global)
        CHECK(k.bytes_per_token == 2u * 2u * (k.layer == 1 ? 32u : 64u));
        out.push_back(k.layer);
      }
      return out;
    };
    CHECK(layers(needs.kv_rows_in) == c.in);
    CHECK(layers(needs.kv_rows_out) == c.out);
    // The mirror is counted as the engine allocates it: a source's max_ctx positions.
    const Model m = load(f, {c.range});
    Session sm = session(m, 32);
    CHECK(needs.kv_bytes_per_session == sm.bytes());
    uint64_t mirror = 0;
    for (int il : c.in) mirror += 2u * 2u * 32u * (il == 1 ? 32u : 64u);
    uint64_t own_layers = 0;
    for (int il = c.range.begin; il < c.range.end; ++il) {
      if (!m.config.layers[il].shares_kv) own_layers += 2u * 2u * 32u * m.config.layers[il].kv_dim();
    }
    CHECK(needs.kv_bytes_per_session == own_layers + mirror);
  }
}

TEST_CASE("shipped K/V rows that are missing, mis-sized, non-finite or of other positions are refused by name", "[e_model][kv_ship]") {
  const FixtureModel f = e_fixture();
  const Model first = load(f, {{0, 3}}), last = load(f, {{3, kLayers}});
  const Embedded in = embed_tokens(first, token_sequence(4, 11, 5));
  Session sa = session(first);
  const std::vector<float> mid = run(first, sa, in, 4, 0, 4);
  REQUIRE(sa.last.kv_rows_out.size() == 2);
  const std::vector<lf::KvRows> good = sa.last.kv_rows_out;

  auto attempt = [&](const std::vector<lf::KvRows>& rows) {
    Session s = session(last);
    s.kv_rows_in = rows;
    s.per_layer_in = slice(in.per_layer, 4, 3, kLayers, 0, 4);
    std::vector<float> out(4 * kEmbd);
    const Status st = lf::forward(last, s, 0, mid.data(), 4, out.data(), false);
    CHECK(s.n_past() == (st.ok() ? 4 : 0));
    return st;
  };
  auto refused = [&](const std::vector<lf::KvRows>& rows, Code code, const std::string& words) {
    const Status st = attempt(rows);
    INFO(st.message());
    CHECK(st.code() == code);
    CHECK(st.message().find(words) != std::string::npos);
  };
  REQUIRE(attempt(good).ok());
  refused({}, Code::invalid_argument, "layer 1's K/V rows are missing");
  refused({good[0]}, Code::invalid_argument, "layer 2's K/V rows are missing");
  std::vector<lf::KvRows> rows = good;
  rows[1].bytes.pop_back();
  refused(rows, Code::invalid_argument, "layer 2's K/V rows hold 1023 bytes, expected n x n_head_kv x (K row + V row) = 1024 (K f16, V f16)");
  rows = good;
  set_half(&rows[0], 3 * 64 + 40, 0x7e00);  // NaN in position 3's V
  refused(rows, Code::invalid_argument, "layer 1's K/V rows hold a non-finite value at position 3");
  rows = good;
  set_half(&rows[1], 5, 0xfc00);  // -inf
  refused(rows, Code::invalid_argument, "layer 2's K/V rows hold a non-finite value at position 0");
  rows = good;
  rows[0].pos0 = 1;
  refused(rows, Code::failed_precondition, "layer 1's K/V rows are for positions [1, 5), but the call runs positions [0, 4)");
  rows = good;
  rows.push_back(good[0]);
  rows.back().layer = 0;
  refused(rows, Code::invalid_argument, "K/V rows of layer 0 were given, but layers [3, 5) read no cache of that layer");
  // A node with every source of its shared layers takes none.
  Session whole_s = session(first);
  whole_s.kv_rows_in = {good[0]};
  whole_s.per_layer_in = slice(in.per_layer, 4, 0, 3, 0, 4);
  std::vector<float> out(4 * kEmbd);
  const Status none = lf::forward(first, whole_s, 0, in.x.data(), 4, out.data(), false);
  CHECK(none.message().find("but layers [0, 3) read no other node's KV cache") != std::string::npos);
}

TEST_CASE("truncating both sides of a shipped split keeps the mirror consistent", "[e_model][kv_ship]") {
  const FixtureModel f = e_fixture();
  const int n = 12;
  const Model whole = load(f);
  const Embedded a = embed_tokens(whole, token_sequence(n, 11, 5));
  std::vector<int32_t> other = token_sequence(n, 11, 5);
  for (int t = 6; t < n; ++t) other[t] = (other[t] + 7) % lf::test::kFixtureVocab;
  const Embedded b = embed_tokens(whole, other);
  // One node: prompt a, cut to 6, continue with b's tokens 6 ..
  Session s = session(whole);
  run(whole, s, a, n, 0, n);
  REQUIRE(s.truncate(6).ok());
  const std::vector<float> expected = run(whole, s, b, n, 6, n - 6);
  for (const std::vector<int>& cuts : {std::vector<int>{2}, std::vector<int>{4}, std::vector<int>{1, 3}}) {
    INFO("cuts at " << cuts_text(cuts));
    Pipeline p = pipeline(f, cuts, 2);
    run_at(p, a, n, 0, n);
    for (Session& ps : p.sessions) REQUIRE(ps.truncate(6).ok());
    CHECK(run_at(p, b, n, 6, n - 6) == expected);
  }
}

TEST_CASE("a batched forward takes each session's shipped rows: one step of two sessions equals each alone", "[e_model][kv_ship]") {
  const FixtureModel f = e_fixture();
  const Model first = load(f, {{0, 3}}), last = load(f, {{3, kLayers}, 2});
  const Embedded in = embed_tokens(first, token_sequence(7, 11, 5));
  Session a0 = session(first), b0 = session(first);
  const std::vector<float> mid_a = run(first, a0, in, 7, 0, 5);
  const std::vector<float> mid_b = run(first, b0, in, 7, 0, 7);
  auto alone = [&](Session& s0, const std::vector<float>& mid, int n) {
    Session s = session(last);
    s.kv_rows_in = s0.last.kv_rows_out;
    s.per_layer_in = slice(in.per_layer, 7, 3, kLayers, 0, n);
    std::vector<float> out(static_cast<size_t>(n) * kEmbd);
    REQUIRE(lf::forward(last, s, 0, mid.data(), n, out.data(), false).ok());
    return out;
  };
  std::vector<float> expected = alone(a0, mid_a, 5);
  const std::vector<float> expected_b = alone(b0, mid_b, 7);
  expected.insert(expected.end(), expected_b.begin(), expected_b.end());

  Session sa = session(last), sb = session(last);
  sa.kv_rows_in = a0.last.kv_rows_out;
  sb.kv_rows_in = b0.last.kv_rows_out;
  sa.per_layer_in = slice(in.per_layer, 7, 3, kLayers, 0, 5);
  sb.per_layer_in = slice(in.per_layer, 7, 3, kLayers, 0, 7);
  std::vector<float> x = mid_a;
  x.insert(x.end(), mid_b.begin(), mid_b.end());
  std::vector<float> out(12 * kEmbd);
  const std::vector<lf::BatchEntry> entries{{&sa, 0, 5, false}, {&sb, 0, 7, false}};
  std::vector<Status> statuses;
  REQUIRE(lf::forward_batch(last, entries, x, out, &statuses).ok());
  CHECK(statuses[0].ok());
  CHECK(statuses[1].ok());
  CHECK(out == expected);
  // An entry without its rows is refused alone.
  Session sc = session(last), sd = session(last);
  sc.per_layer_in = slice(in.per_layer, 7, 3, kLayers, 0, 5);
  sd.kv_rows_in = b0.last.kv_rows_out;
  sd.per_layer_in = slice(in.per_layer, 7, 3, kLayers, 0, 7);
  std::vector<lf::BatchEntry> refused{{&sc, 0, 5, false}, {&sd, 0, 7, false}};
  REQUIRE(lf::forward_batch(last, refused, x, out, &statuses).ok());
  CHECK(statuses[0].message().find("layer 1's K/V rows are missing") != std::string::npos);
  CHECK(statuses[1].ok());
  CHECK(std::vector<float>(out.begin() + 5 * kEmbd, out.end()) == expected_b);
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
  const std::vector<int32_t> tokens = token_sequence(3, 11, 5);
  const Embedded in = embed_tokens(m, tokens);
  std::vector<float> out(3 * kEmbd);
  const Status missing = lf::forward(m, s, 0, in.x.data(), 3, out.data(), false);
  CHECK(missing.code() == Code::invalid_argument);
  CHECK(missing.message().find("per-layer input") != std::string::npos);
  CHECK(s.n_past() == 0);
  s.per_layer_in.assign(in.per_layer.begin(), in.per_layer.end() - 1);
  CHECK_FALSE(lf::forward(m, s, 0, in.x.data(), 3, out.data(), false).ok());
  // Only the first node computes them.
  const Model later = load(f, {{1, kLayers}});
  std::vector<float> per_layer(static_cast<size_t>(kLayers) * 3 * kPl);
  CHECK(lf::per_layer_inputs(later, tokens.data(), 3, in.x.data(), per_layer.data()).code() == Code::failed_precondition);
}

TEST_CASE("a media span on an E-model: the reference's output, the same bytes where workers share query heads", "[e_model][media_span]") {
  // llama.cpp keeps E2B/E4B causal for images; the engine still computes a span asked for the
  // same on every path, here its single KV head's query heads shared by two or three workers.
  const FixtureModel f = e_fixture();
  const int n = 12, span_begin = 2, span_end = 8;
  const Model one = load(f);
  const std::vector<int32_t> tokens = token_sequence(n, 11, 5);
  const Embedded in = embed_tokens(one, tokens);
  const auto with_span = [&](const Model& m) {
    Session s = session(m, 32, 8);
    std::vector<float> out = run(m, s, in, n, 0, span_begin);
    s.span_in = true;
    const std::vector<float> span = run(m, s, in, n, span_begin, span_end - span_begin);
    const std::vector<float> after = run(m, s, in, n, span_end, n - span_end);
    out.insert(out.end(), span.begin(), span.end());
    out.insert(out.end(), after.begin(), after.end());
    return out;
  };
  const std::vector<float> hidden = with_span(one);
  std::vector<float> ref;
  REQUIRE(lf::reference_layers(one, in.x.data(), n, &ref, in.per_layer.data(), {span_begin, span_end}).ok());
  CHECK(max_row_rel_error(hidden, ref, kEmbd) <= 1e-2);  // the f32 bound of the test above
  for (int threads : {2, 3}) CHECK(same_bytes(with_span(load(f, {.n_threads = threads})), hidden));
}
