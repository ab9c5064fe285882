// The set-up the engine's tests share, each step failing the test with the engine's message when
// it is refused: a fixture built (fixture_model.h, fixture_e_model.h), a node loaded from it
// (its layers, threads and weight layout), a session, a token sequence, its embedded rows and a
// forward call's output rows.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "fixture_e_model.h"
#include "fixture_model.h"
#include "model/forward.h"
#include "model/per_layer_embd.h"
#include "model/session.h"

namespace lf::test {

inline void require_ok(const Status& s) {
  INFO(s.message());
  REQUIRE(s.ok());
}

inline FixtureModel fixture(const FixtureOptions& o) {
  FixtureModel f;
  require_ok(build_fixture(o, &f));
  return f;
}

inline FixtureModel fixture(Arch arch, WeightFormat format = WeightFormat::f32) {
  FixtureOptions o;
  o.arch = arch;
  o.format = format;
  return fixture(o);
}

inline FixtureModel e_fixture(const EFixtureOptions& o = {}) {
  FixtureModel f;
  require_ok(build_e_fixture(o, &f));
  return f;
}

inline FixtureModel e_fixture(WeightFormat format) {
  EFixtureOptions o;
  o.format = format;
  return e_fixture(o);
}

// How a node's weights lie in memory: the file's; relaid (relayout_in_place: row strips where
// this build reads them); or relaid with ffn_down feature-major where its type allows.
enum class Layout { file, relaid, feature_major };

// A node holds the embedding when its layers start at 0 and the head when they end at the last.
struct NodeOptions {
  LayerRange range = {0, -1};  // end -1: through the last layer
  int n_threads = 1;
  Layout layout = Layout::file;
};

// A node of f's layers that reads f's bytes where they are: f must outlive it, and the layout
// must be the file's (a relayout rewrites the bytes; load_copy gives it bytes of its own).
inline Model load(const FixtureModel& f, const NodeOptions& o = {}) {
  ModelConfig config;
  Model m;
  Status s = load_model_config(f.file, &config);
  if (s.ok()) {
    ModelLoadOptions options;
    options.range = {o.range.begin, o.range.end < 0 ? config.n_layer : o.range.end};
    options.with_embedding = options.range.begin == 0;
    options.with_head = options.range.end == config.n_layer;
    options.n_threads = o.n_threads;
    options.relayout_in_place = o.layout != Layout::file;
    options.ffn_down_feature_major = o.layout == Layout::feature_major;
    s = load_model(f.file, f.locator(), options, &m);
  }
  require_ok(s);
  return m;
}

// A node over its own copy of the file's bytes, which a relayout rewrites in place.
struct NodeCopy {
  FixtureModel f;
  Model m;
};

inline std::unique_ptr<NodeCopy> load_copy(const FixtureModel& f, const NodeOptions& o = {}) {
  auto out = std::make_unique<NodeCopy>();
  out->f = f;
  out->m = load(out->f, o);
  return out;
}

// max_ctx of a session that holds the model's training context (KvCacheOptions).
constexpr int kModelContext = 0;

inline Session session(const Model& m, int max_ctx = 32, int attn_chunk = 64) {
  Session s;
  require_ok(Session::create(m, KvCacheOptions{max_ctx, attn_chunk}, &s));
  return s;
}

// Tokens i = 0 .. n-1 of (step · i + offset) mod n_vocab: each test walks the vocabulary its way.
inline std::vector<int32_t> token_sequence(int n, int step, int offset, int n_vocab = kFixtureVocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (step * i + offset) % n_vocab;
  return t;
}

// A first node's inputs for n tokens: x [n, n_embd] and, on a model with per-layer embeddings,
// every layer's per-layer input [n_layer, n, n_embd_per_layer] (else none).
struct Embedded {
  std::vector<float> x, per_layer;
};

inline Embedded embed_tokens(const Model& first, const int32_t* tokens, int n) {
  const ModelConfig& c = first.config;
  Embedded in;
  in.x.resize(static_cast<size_t>(n) * c.n_embd);
  require_ok(embed(first, tokens, n, in.x.data()));
  if (c.n_embd_per_layer > 0) {
    in.per_layer.resize(static_cast<size_t>(c.n_layer) * n * c.n_embd_per_layer);
    require_ok(per_layer_inputs(first, tokens, n, in.x.data(), in.per_layer.data()));
  }
  return in;
}

inline Embedded embed_tokens(const Model& first, const std::vector<int32_t>& tokens) {
  return embed_tokens(first, tokens.data(), static_cast<int>(tokens.size()));
}

// Rows [start, start + n) of x [positions, n_embd] through the session at those positions ->
// the output rows [n, n_embd] (with last_only, the last row alone).
inline std::vector<float> forward_rows(const Model& m, Session& s, const std::vector<float>& x, int start, int n,
                                       bool last_only = false) {
  const size_t E = static_cast<size_t>(m.config.n_embd);
  std::vector<float> out(static_cast<size_t>(last_only ? 1 : n) * E);
  require_ok(forward(m, s, start, x.data() + static_cast<size_t>(start) * E, n, out.data(), last_only));
  return out;
}

}  // namespace lf::test
