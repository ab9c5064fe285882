// KvCache::digest (lf_session_kv_digest): equal for caches holding the same bytes, moved by any
// stored row, and unmoved by a forward the engine refuses before it runs.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "support/engine_checks.h"
#include "support/fixture_model.h"
#include "model/forward.h"

namespace {

using lf::Model;
using lf::Session;
using lf::test::require_ok;

// Tokens [pos, pos + n) of a fixed sequence embedded -> the forward's input rows.
std::vector<float> rows(const Model& m, int pos, int n) {
  const std::vector<int32_t> tokens = lf::test::token_sequence(pos + n, 13, 5);
  return lf::test::embed_tokens(m, tokens.data() + pos, n).x;
}

lf::Status feed(const Model& m, Session& s, int pos, const std::vector<float>& x) {
  const int n = static_cast<int>(x.size() / static_cast<size_t>(m.config.n_embd));
  std::vector<float> out(x.size());
  return lf::forward(m, s, pos, x.data(), n, out.data(), false);
}

TEST_CASE("a session's KV digest follows its bytes, and a refused forward leaves it as it was", "[kv_digest]") {
  const lf::test::FixtureModel f = lf::test::fixture(lf::Arch::gemma4, lf::test::WeightFormat::mixed);
  const Model m = lf::test::load(f);

  Session a = lf::test::session(m), b = lf::test::session(m);
  CHECK(a.kv.digest() == b.kv.digest());
  require_ok(feed(m, a, 0, rows(m, 0, 5)));
  const uint64_t fed = a.kv.digest();
  CHECK(fed != b.kv.digest());
  require_ok(feed(m, b, 0, rows(m, 0, 5)));
  CHECK(b.kv.digest() == fed);

  std::vector<float> bad = rows(m, 5, 2);
  bad[3] = std::nanf("");
  CHECK(feed(m, a, 5, bad).code() == lf::Code::invalid_argument);
  CHECK(feed(m, a, 2, rows(m, 2, 1)).code() == lf::Code::failed_precondition);
  CHECK(feed(m, a, 5, rows(m, 5, 28)).code() == lf::Code::resource_exhausted);
  CHECK(a.n_past() == 5);
  CHECK(a.kv.digest() == fed);

  require_ok(feed(m, a, 5, rows(m, 5, 1)));
  CHECK(a.kv.digest() != fed);
}

}  // namespace
