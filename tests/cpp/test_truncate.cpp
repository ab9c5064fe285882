// Session::truncate: a session cut back to n positions continues exactly as a session that was
// only ever sent those n; a cut the sliding rings cannot honour returns to a checkpoint at or
// before n, from which feeding the rest again continues exactly as well, or, without one, is
// refused and changes nothing.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/engine_checks.h"
#include "support/fixture_e_model.h"
#include "support/fixture_model.h"
#include "model/forward.h"
#include "model/per_layer_embd.h"

namespace {

using lf::Model;
using lf::Session;
using lf::test::FixtureModel;
using lf::test::require_ok;
using lf::test::same_bytes;
using lf::test::token_sequence;

struct Run {
  const Model& m;
  std::vector<int32_t> tokens;

  // Positions [pos, pos + n) of the tokens through the session -> every output row.
  std::vector<float> feed(Session& s, int pos, int n) const {
    const lf::test::Embedded in = lf::test::embed_tokens(m, tokens.data() + pos, n);
    s.per_layer_in = in.per_layer;
    std::vector<float> out(in.x.size());
    require_ok(lf::forward(m, s, pos, in.x.data(), n, out.data(), false));
    return out;
  }
};

// Feeds 12 positions in chunks, cuts back to `cut`, continues with 4 other tokens: the
// continuation's bytes must be those of a session fed only the first `cut` positions.
void check_cut(const Model& m, int attn_chunk, int cut) {
  Run run{m, token_sequence(16, 11, 3)};
  Session s = lf::test::session(m, 32, attn_chunk);
  run.feed(s, 0, 7);
  run.feed(s, 7, 5);
  require_ok(s.truncate(cut));
  REQUIRE(s.n_past() == cut);
  Run other = run;
  for (int i = cut; i < cut + 4; ++i) other.tokens[static_cast<size_t>(i)] = (5 * i + 1) % lf::test::kFixtureVocab;
  const std::vector<float> continued = other.feed(s, cut, 4);

  Session fresh = lf::test::session(m, 32, attn_chunk);
  if (cut > 0) other.feed(fresh, 0, cut);
  CHECK(same_bytes(continued, other.feed(fresh, cut, 4)));
}

// The gemma4 fixture, mixed quantized formats: window 4, layers [sliding, global, sliding].
FixtureModel dense() { return lf::test::fixture(lf::Arch::gemma4, lf::test::WeightFormat::mixed); }

TEST_CASE("a session cut back continues as if the rest had never been sent", "[truncate]") {
  const FixtureModel f = dense();
  Model m;
  require_ok(f.load_all(&m));
  // Window 4, attn_chunk 3: the sliding rings hold 6 slots and have wrapped at 12 positions; a
  // continuation from 9 reads keys 6.. on: the shortest cut is 12 - 6 + 4 - 1 = 9.
  for (int cut : {12, 11, 10, 9}) check_cut(m, 3, cut);
  // attn_chunk 64: the rings (67 slots) never wrapped, so any cut is exact.
  for (int cut : {0, 1, 5, 11}) check_cut(m, 64, cut);

  const FixtureModel ef = lf::test::e_fixture(lf::test::WeightFormat::mixed);
  const Model em = lf::test::load(ef);
  for (int cut : {9, 10, 12}) check_cut(em, 3, cut);  // shared-KV sources keep every position
  check_cut(em, 64, 2);
}

TEST_CASE("a cut the rings cannot honour, or outside the session, is refused and changes nothing", "[truncate]") {
  const FixtureModel f = dense();
  Model m;
  require_ok(f.load_all(&m));
  Run run{m, token_sequence(16, 7, 2)};
  Session s = lf::test::session(m, 32, 3), fresh = lf::test::session(m, 32, 3);
  run.feed(s, 0, 12);
  run.feed(fresh, 0, 12);

  const lf::Status deep = s.truncate(8);
  CHECK(deep.code() == lf::Code::failed_precondition);
  CHECK(deep.message() ==
        "cannot cut a session of 12 positions to 8: a sliding layer's ring no longer holds the keys a continuation "
        "from there reads (the shortest cut is to 9; once a ring has wrapped, at most attn_chunk = 3 positions can be "
        "cut)");
  CHECK(s.truncate(13).message() == "cannot cut a session of 12 positions to 13: the length must be in [0, 12]");
  CHECK(s.truncate(-1).code() == lf::Code::invalid_argument);
  REQUIRE(s.n_past() == 12);
  CHECK(same_bytes(run.feed(s, 12, 2), run.feed(fresh, 12, 2)));
}

TEST_CASE("a cut past the rings returns to the latest checkpoint before it, and continues as a fresh session", "[truncate]") {
  const FixtureModel f = dense();
  const Model m = lf::test::load(f);
  Run run{m, token_sequence(24, 7, 2)};
  // Window 4, attn_chunk 3: rings of 6 slots, wrapped many times over 20 positions.
  Session s = lf::test::session(m, 32, 3);
  run.feed(s, 0, 3);
  run.feed(s, 3, 2);
  require_ok(s.checkpoint(2));  // at 5
  run.feed(s, 5, 3);
  require_ok(s.checkpoint(2));  // at 8
  run.feed(s, 8, 3);
  require_ok(s.checkpoint(2));  // at 11: the one at 5 is dropped
  CHECK(s.n_checkpoints() == 2);
  const uint64_t with = s.bytes();
  run.feed(s, 11, 3);
  run.feed(s, 14, 3);
  run.feed(s, 17, 3);

  // 10 is before the shortest cut (20 - 6 + 3 = 17): back to the checkpoint at 8.
  int reached = -1;
  CHECK(s.truncate(10).code() == lf::Code::failed_precondition);  // without `reached`, only exact cuts
  require_ok(s.truncate(10, &reached));
  CHECK(reached == 8);
  CHECK(s.n_past() == 8);
  CHECK(s.n_checkpoints() == 1);  // the one at 11 is past the cut
  CHECK(s.bytes() < with);
  Run other = run;
  for (int i = 10; i < 16; ++i) other.tokens[static_cast<size_t>(i)] = (3 * i + 2) % lf::test::kFixtureVocab;
  other.feed(s, 8, 2);
  const std::vector<float> continued = other.feed(s, 10, 6);
  Session fresh = lf::test::session(m, 32, 3);
  other.feed(fresh, 0, 10);
  CHECK(same_bytes(continued, other.feed(fresh, 10, 6)));

  // 6 is before the checkpoint at 8, and the one at 5 was dropped: refused, nothing changes.
  const int before = s.n_past();
  const lf::Status refused = s.truncate(6, &reached);
  CHECK(refused.code() == lf::Code::failed_precondition);
  CHECK(refused.message().find("no checkpoint is at or before 6") != std::string::npos);
  CHECK(s.n_past() == before);
  CHECK(s.checkpoint(0).code() == lf::Code::invalid_argument);
}

TEST_CASE("an E-model's session returns to a checkpoint or cuts exactly, and continues as a fresh session", "[truncate]") {
  const FixtureModel ef = lf::test::e_fixture(lf::test::WeightFormat::mixed);
  const Model em = lf::test::load(ef);
  Run run{em, token_sequence(24, 5, 1)};
  Session s = lf::test::session(em, 32, 3);
  run.feed(s, 0, 6);
  require_ok(s.checkpoint(4));
  run.feed(s, 6, 12);
  int reached = -1;
  require_ok(s.truncate(7, &reached));
  // Shared-KV sources keep every position; a ring of another sliding layer sends it back to 6.
  CHECK((reached == 6 || reached == 7));
  if (reached < 7) run.feed(s, reached, 7 - reached);
  const std::vector<float> continued = run.feed(s, 7, 8);
  Session fresh = lf::test::session(em, 32, 3);
  run.feed(fresh, 0, 7);
  CHECK(same_bytes(continued, run.feed(fresh, 7, 8)));
}

}  // namespace
