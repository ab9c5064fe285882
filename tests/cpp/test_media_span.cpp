// A media span (Session::span_in): an image's rows, which llama.cpp decodes with non-causal
// attention on Gemma 4's sliding layers. The engine, given a span in its own call between causal
// ones, against the reference forward given the same span; the same bytes at 1 to 3 threads and
// in a batch beside another session; a span longer than the session's chunk refused, changing
// nothing.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/engine_checks.h"
#include "model/forward.h"
#include "model/reference_forward.h"

namespace {

using lf::Arch;
using lf::Model;
using lf::Session;
using lf::test::FixtureModel;
using lf::test::WeightFormat;
using lf::test::embed_tokens;
using lf::test::fixture;
using lf::test::forward_rows;
using lf::test::load;
using lf::test::max_row_rel_error;
using lf::test::require_ok;
using lf::test::same_bytes;
using lf::test::session;
using lf::test::token_sequence;

constexpr int kEmbd = lf::test::kFixtureEmbd;
constexpr int kN = 14;
// Wider than the window of 4: inside it a row sees the span's later rows, never keys 4 or more
// positions before it.
constexpr lf::MediaSpan kSpan{3, 9};
constexpr int kChunk = 8;  // the sessions' attn_chunk: the span fits

// Rows [0, kN) of x through a fresh session, rows kSpan in a call of their own marked as a span.
std::vector<float> with_span(const Model& m, const std::vector<float>& x) {
  Session s = session(m, 32, kChunk);
  std::vector<float> out = forward_rows(m, s, x, 0, kSpan.begin);
  s.span_in = true;
  const std::vector<float> span = forward_rows(m, s, x, kSpan.begin, kSpan.end - kSpan.begin);
  CHECK_FALSE(s.span_in);  // consumed
  const std::vector<float> after = forward_rows(m, s, x, kSpan.end, kN - kSpan.end);
  out.insert(out.end(), span.begin(), span.end());
  out.insert(out.end(), after.begin(), after.end());
  return out;
}

}  // namespace

TEST_CASE("a media span's rows see each other on sliding layers, as the reference computes", "[media_span]") {
  // The engine's f32-weight tolerance against the reference (test_engine.cpp).
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::f32);
  const Model m = load(f);
  const std::vector<float> x = embed_tokens(m, token_sequence(kN, 7, 3)).x;
  const std::vector<float> hidden = with_span(m, x);
  std::vector<float> ref, causal;
  REQUIRE(lf::reference_layers(m, x.data(), kN, &ref, nullptr, kSpan).ok());
  REQUIRE(lf::reference_layers(m, x.data(), kN, &causal).ok());
  const double err = max_row_rel_error(hidden, ref, kEmbd);
  const double moved = max_row_rel_error(causal, ref, kEmbd);
  INFO("against the span's reference " << err << ", the causal reference against it " << moved);
  CHECK(err <= 6e-3);
  CHECK(moved > 10 * 6e-3);  // the span changes what the layers compute
}

TEST_CASE("a media span gives the same bytes at every thread count and in a batch", "[media_span]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model one = load(f);
  const std::vector<float> x = embed_tokens(one, token_sequence(kN, 5, 1)).x;
  const std::vector<float> expect = with_span(one, x);
  for (int threads : {2, 3}) {
    const Model m = load(f, {.n_threads = threads});
    CHECK(same_bytes(with_span(m, x), expect));
  }
  // The span's call batched with another session's causal rows: each gets its own bytes.
  const Model m = load(f, {.n_threads = 2});
  Session a = session(m, 32, kChunk), b = session(m, 32, kChunk);
  const std::vector<float> before = forward_rows(m, a, x, 0, kSpan.begin);
  a.span_in = true;
  const int n_span = kSpan.end - kSpan.begin;
  std::vector<float> in(x.begin() + kSpan.begin * kEmbd, x.begin() + kSpan.end * kEmbd);
  in.insert(in.end(), x.begin(), x.begin() + n_span * kEmbd);
  std::vector<float> out(in.size());
  const lf::BatchEntry entries[] = {{&a, kSpan.begin, n_span, false}, {&b, 0, n_span, false}};
  std::vector<lf::Status> statuses;
  require_ok(lf::forward_batch(m, entries, in, out, &statuses));
  for (const lf::Status& s : statuses) require_ok(s);
  const std::vector<float> span_rows(out.begin(), out.begin() + n_span * kEmbd);
  CHECK(same_bytes(span_rows, std::vector<float>(expect.begin() + kSpan.begin * kEmbd, expect.begin() + kSpan.end * kEmbd)));
  Session alone = session(m, 32, kChunk);
  CHECK(same_bytes(std::vector<float>(out.begin() + n_span * kEmbd, out.end()), forward_rows(m, alone, x, 0, n_span)));
}

TEST_CASE("a media span longer than the session's chunk is refused and changes nothing", "[media_span]") {
  const FixtureModel f = fixture(Arch::gemma4);
  const Model m = load(f);
  const std::vector<float> x = embed_tokens(m, token_sequence(kN, 7, 3)).x;
  Session s = session(m, 32, 4);
  s.span_in = true;
  std::vector<float> out(6 * kEmbd);
  const lf::Status refused = lf::forward(m, s, 0, x.data(), 6, out.data(), false);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.message().find("a media span of 6 rows is longer than the 4") != std::string::npos);
  CHECK(s.n_past() == 0);
  CHECK(s.span_in);  // kept for the caller's next try
  // Within the chunk it runs, as a fresh session's span of those rows.
  const std::vector<float> four = forward_rows(m, s, x, 0, 4);
  Session fresh = session(m, 32, 4);
  fresh.span_in = true;
  CHECK(same_bytes(four, forward_rows(m, fresh, x, 0, 4)));
}
