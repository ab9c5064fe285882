// K/V cache types (f16, q8_0, q4_0): names and their refusal, the Hadamard rotation llama.cpp
// applies with a quantized cache, the bytes a cache takes, and forwards over quantized caches:
// the same bytes at every thread count, cache chunking and batch, and across a split that ships
// shared-KV rows in the cache's types.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "support/engine_checks.h"
#include "support/fixture_e_model.h"
#include "support/fixture_model.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "ops/ops.h"

namespace {

using lf::Arch;
using lf::BatchEntry;
using lf::GgmlType;
using lf::KvCacheOptions;
using lf::Model;
using lf::Session;
using lf::Status;
using lf::test::FixtureModel;
using lf::test::WeightFormat;
using lf::test::embed_tokens;
using lf::test::fixture;
using lf::test::load;
using lf::test::require_ok;
using lf::test::token_sequence;

struct Types {
  GgmlType k, v;
};
const Types kQuantized[] = {{GgmlType::Q8_0, GgmlType::Q8_0}, {GgmlType::Q4_0, GgmlType::Q4_0},
                            {GgmlType::Q8_0, GgmlType::F16}, {GgmlType::F16, GgmlType::Q4_0}};

std::string describe(Types t) { return std::string("K ") + lf::kv_type_name(t.k) + ", V " + lf::kv_type_name(t.v); }

Session typed_session(const Model& m, Types t, int attn_chunk = 64) {
  Session s;
  KvCacheOptions o{32, attn_chunk};
  o.k_type = t.k;
  o.v_type = t.v;
  require_ok(Session::create(m, o, &s));
  return s;
}

// Every row of x [n, n_embd] through a fresh session in calls of `step` rows.
std::vector<float> run(const Model& m, Types t, const std::vector<float>& x, int n, int step, int attn_chunk = 64) {
  Session s = typed_session(m, t, attn_chunk);
  std::vector<float> out;
  for (int t0 = 0; t0 < n; t0 += step) {
    const std::vector<float> rows = lf::test::forward_rows(m, s, x, t0, std::min(step, n - t0));
    out.insert(out.end(), rows.begin(), rows.end());
  }
  return out;
}

}  // namespace

TEST_CASE("cache types are named as llama.cpp names them; others are refused by name", "[kv_types]") {
  for (const char* name : {"f16", "q8_0", "q4_0"}) {
    GgmlType t = GgmlType::F32;
    REQUIRE(lf::parse_kv_type(name, "K", &t).ok());
    CHECK(std::string(lf::kv_type_name(t)) == name);
  }
  for (const char* name : {"q5_1", "f32", "Q8_0", "", "bf16"}) {
    GgmlType t = GgmlType::F16;
    const Status st = lf::parse_kv_type(name, "V", &t);
    CHECK(st.code() == lf::Code::invalid_argument);
    CHECK(st.message() == std::string("unsupported V cache type '") + name + "' (supported: f16, q8_0, q4_0)");
    CHECK(t == GgmlType::F16);
  }
}

TEST_CASE("the rotation is llama.cpp's: quantized types, one head dim per kind, layer 0's a multiple of 64", "[kv_types]") {
  // Layers 0, 2 sliding, 1 global.
  lf::ModelConfig c;
  c.layers.resize(3);
  for (int il = 0; il < 3; ++il) c.layers[il].sliding = il != 1;
  auto rotation = [&](int sliding_D, int global_D, int il, GgmlType k, GgmlType v) {
    for (int j = 0; j < 3; ++j) c.layers[j].head_dim = j == 1 ? global_D : sliding_D;
    lf::KvRotation r;
    require_ok(lf::kv_rotation(c, il, k, v, &r));
    return std::pair{r.k, r.v};
  };
  const GgmlType f16 = GgmlType::F16, q8 = GgmlType::Q8_0, q4 = GgmlType::Q4_0;
  CHECK(rotation(256, 512, 0, q8, q8) == std::pair{256, 64});
  CHECK(rotation(256, 512, 1, q4, q8) == std::pair{512, 64});
  CHECK(rotation(256, 512, 1, f16, f16) == std::pair{0, 0});
  CHECK(rotation(256, 512, 0, q8, f16) == std::pair{256, 0});
  CHECK(rotation(256, 512, 0, f16, q4) == std::pair{0, 64});
  // Layer 0 decides for every layer: a global head dim of 64 rotates beside sliding 128, not
  // beside sliding 32 (as llama.cpp's log of attn_rot_k says for such models).
  CHECK(rotation(128, 64, 1, q8, q8) == std::pair{64, 64});
  CHECK(rotation(32, 64, 1, q8, q8) == std::pair{0, 0});
  CHECK(rotation(192, 384, 0, q8, q8) == std::pair{64, 64});
  CHECK(rotation(192, 384, 1, q8, q8) == std::pair{128, 64});
  CHECK(rotation(96, 160, 0, q8, q8) == std::pair{0, 0});
  // A kind with two head dims has no rotation (llama.cpp's n_embd_head_k_all of -1).
  c.layers.resize(4);
  c.layers[3].sliding = true;
  c.layers[3].head_dim = 64;
  c.layers[0].head_dim = c.layers[2].head_dim = 128;
  lf::KvRotation r;
  require_ok(lf::kv_rotation(c, 0, q8, q8, &r));
  CHECK(r.k == 0);
  // Layer 0's head dim a multiple of 64 and this one's not: llama.cpp's blocks straddle heads.
  c.layers.resize(3);
  c.layers[1].head_dim = 96;
  const Status st = lf::kv_rotation(c, 1, q8, f16, &r);
  CHECK(st.code() == lf::Code::unsupported);
  CHECK(st.message() == "a quantized KV cache of layer 1 (head dim 96): llama.cpp would rotate it in blocks of 64 across its heads, which is not supported");
}

TEST_CASE("the Hadamard rotation is the scaled Sylvester matrix, and its own inverse", "[kv_types]") {
  // Block of 4: H4 / 2 applied to a unit vector is a column of halves.
  float e[4] = {0, 1, 0, 0};
  lf::hadamard_rotate(e, 4, 4);
  CHECK(e[0] == 0.5f);
  CHECK(e[1] == -0.5f);
  CHECK(e[2] == 0.5f);
  CHECK(e[3] == -0.5f);
  for (const int block : {64, 256}) {
    std::vector<float> x(2 * block);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * static_cast<float>(1 + i % 7);
    std::vector<float> y = x;
    lf::hadamard_rotate(y.data(), 2 * block, block);
    for (int b = 0; b < 2; ++b) {
      for (int i = 0; i < block; ++i) {
        // Sylvester's H[i][j] = (-1)^popcount(i & j)
        double want = 0;
        for (int j = 0; j < block; ++j) want += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * x[b * block + j];
        want /= std::sqrt(static_cast<double>(block));
        CHECK(std::abs(y[b * block + i] - want) < 1e-5 * (1 + std::abs(want)));
      }
    }
    lf::hadamard_rotate(y.data(), 2 * block, block);
    for (size_t i = 0; i < x.size(); ++i) CHECK(std::abs(y[i] - x[i]) < 1e-5f * (1 + std::abs(x[i])));
  }
}

TEST_CASE("a cache's bytes follow its types, as its needs say", "[kv_types]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model m = load(f);
  auto bytes = [&](Types t) {
    KvCacheOptions o{64, 64};
    o.k_type = t.k;
    o.v_type = t.v;
    uint64_t expected = 0;
    require_ok(lf::KvCache::bytes_for(m.config, m.range, o, &expected));
    lf::KvCache cache;
    require_ok(lf::KvCache::create(m.config, m.range, o, &cache));
    CHECK(cache.bytes() == expected);
    return expected;
  };
  const uint64_t f16 = bytes({GgmlType::F16, GgmlType::F16});
  // Per 32 values: 64 bytes of f16, a 34-byte Q8_0 block, an 18-byte Q4_0 block.
  CHECK(bytes({GgmlType::Q8_0, GgmlType::Q8_0}) * 64 == f16 * 34);
  CHECK(bytes({GgmlType::Q4_0, GgmlType::Q4_0}) * 64 == f16 * 18);
  CHECK(bytes({GgmlType::Q8_0, GgmlType::F16}) * 128 == f16 * (34 + 64));
}

TEST_CASE("forwards over a quantized cache: same bytes at every thread count and chunking, near f16's", "[kv_types]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model one = load(f);
  const int n = 14;
  const std::vector<float> x = embed_tokens(one, token_sequence(n, 7, 3)).x;
  const std::vector<float> f16 = run(one, {GgmlType::F16, GgmlType::F16}, x, n, n);
  // Not garbage: a q8_0 cache's output is nearer the f16 cache's than a q4_0 cache's, and both
  // within the size of the rows (on 3 random layers, the attention op's own error, which the
  // [attention] tests bound, grows through the residual stream).
  const double q8_error = lf::test::max_row_rel_error(run(one, kQuantized[0], x, n, n), f16, one.config.n_embd);
  const double q4_error = lf::test::max_row_rel_error(run(one, kQuantized[1], x, n, n), f16, one.config.n_embd);
  CHECK(q8_error > 0);
  CHECK(q8_error < q4_error / 2);
  CHECK(q4_error < 1);
  for (const Types t : kQuantized) {
    INFO(describe(t));
    const std::vector<float> expected = run(one, t, x, n, n);
    // A prompt then single steps; chunks of 3 on a sliding ring that wraps.
    CHECK(run(one, t, x, n, 1) == expected);
    CHECK(run(one, t, x, n, n, 3) == expected);
    for (const int threads : {2, 3}) {
      const Model m = load(f, {{0, -1}, threads});
      INFO(threads << " threads");
      CHECK(run(m, t, x, n, 5) == expected);
    }
  }
}

TEST_CASE("batched sessions over quantized caches give the bytes they give alone", "[kv_types]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model m = load(f, {{0, -1}, 2});
  const int E = m.config.n_embd;
  const std::vector<float> xa = embed_tokens(m, token_sequence(6, 5, 1)).x, xb = embed_tokens(m, token_sequence(6, 3, 9)).x;
  for (const Types t : kQuantized) {
    INFO(describe(t));
    const std::vector<float> alone_a = run(m, t, xa, 6, 6), alone_b = run(m, t, xb, 6, 6);
    Session a = typed_session(m, t), b = typed_session(m, t);
    std::vector<float> in(xb.begin(), xb.end());
    in.insert(in.end(), xa.begin(), xa.end());
    std::vector<float> out(12 * static_cast<size_t>(E));
    std::vector<Status> statuses;
    require_ok(lf::forward_batch(m, std::vector<BatchEntry>{{&b, 0, 6, false}, {&a, 0, 6, false}}, in, out, &statuses));
    for (const Status& st : statuses) require_ok(st);
    CHECK(std::vector<float>(out.begin(), out.begin() + 6 * E) == alone_b);
    CHECK(std::vector<float>(out.begin() + 6 * E, out.end()) == alone_a);
  }
}

TEST_CASE("a quantized cache refuses truncated attention and head dims that are not whole blocks", "[kv_types]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model m = load(f);
  Session s = typed_session(m, {GgmlType::Q8_0, GgmlType::Q8_0});
  s.approx.truncated_attention = true;
  std::vector<float> x(static_cast<size_t>(m.config.n_embd), 0.25f), out(x.size());
  const Status st = lf::forward(m, s, 0, x.data(), 1, out.data(), false);
  CHECK(st.message() == "truncated attention runs over an f16 KV cache only; this session's is K q8_0, V q8_0");
  CHECK(s.n_past() == 0);

  lf::ModelConfig odd = m.config;
  odd.layers[1].head_dim = 48;
  KvCacheOptions o{16, 64};
  o.v_type = GgmlType::Q4_0;
  uint64_t bytes = 0;
  CHECK(lf::KvCache::bytes_for(odd, m.range, o, &bytes).message() ==
        "a q4_0 V cache needs head dims that are multiples of 32; layer 1's is 48");
}

TEST_CASE("a checkpoint of a quantized cache returns a cut session to a cold prefill's bytes", "[kv_types]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model m = load(f);
  const int n = 22;
  const std::vector<float> x = embed_tokens(m, token_sequence(n, 7, 2)).x;
  for (const Types t : kQuantized) {
    INFO(describe(t));
    // Window 4, attn_chunk 3: rings of 6 slots, wrapped many times.
    Session s = typed_session(m, t, 3);
    for (int t0 = 0; t0 < 8; t0 += 4) lf::test::forward_rows(m, s, x, t0, 4);
    require_ok(s.checkpoint(2));  // at 8
    for (int t0 = 8; t0 < 20; t0 += 4) lf::test::forward_rows(m, s, x, t0, 4);
    int reached = -1;
    require_ok(s.truncate(10, &reached));
    REQUIRE(reached == 8);
    const std::vector<float> continued = lf::test::forward_rows(m, s, x, 8, n - 8);
    Session cold = typed_session(m, t, 3);
    lf::test::forward_rows(m, cold, x, 0, 8);
    CHECK(continued == lf::test::forward_rows(m, cold, x, 8, n - 8));
    CHECK(s.kv.digest() == cold.kv.digest());
  }
}
