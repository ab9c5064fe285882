// Tensor parallelism (docs/tensor-parallel.md): a group of S members, each holding its slices of
// every layer, exchanging pieces in memory between phases, gives the single node's bytes for
// every S, prompt and decode, dense, MoE and E-model layers, at 1 and 2 threads per member.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gemm.h"
#include "model/kv_cache.h"
#include "model/member.h"
#include "model/member_forward.h"
#include "model/member_needs.h"
#include "support/engine_checks.h"
#include "support/engine_setup.h"
#include "support/fixture_moe.h"

namespace {

using lf::Member;
using lf::MemberForward;
using lf::MemberTensor;
using lf::Model;
using lf::Session;
using lf::Status;
using lf::test::Embedded;
using lf::test::FixtureModel;
using lf::test::WeightFormat;
using lf::test::require_ok;

// One member's weights as a host places them: each tensor's ranges of the file, end to end.
struct MemberBytes {
  std::map<std::string, std::vector<uint8_t>> tensors;
  uint64_t total = 0;

  lf::TensorLocator locator() const {
    return [this](const lf::GgufTensorInfo& t) -> const uint8_t* {
      static const float kEmpty = 0.0f;  // a tensor of no rows still has an address
      const auto it = tensors.find(t.name);
      if (it == tensors.end()) return nullptr;
      return it->second.empty() ? reinterpret_cast<const uint8_t*>(&kEmpty) : it->second.data();
    };
  }
};

struct Group {
  std::vector<std::unique_ptr<MemberBytes>> bytes;
  std::vector<std::unique_ptr<Member>> members;
  std::vector<Session> sessions;
};

// A member laid its Q4_0 matrices out in row strips where this build's kernel reads them so
// (the member's slices of the file's rows make whole strips), else left them in rows.
void require_strips_where_read(const Member& m) {
  for (const lf::LayerWeights& w : m.model.layers) {
    for (const lf::WeightView* W : w.matmuls()) {
      if (!W->present() || W->type != lf::GgmlType::Q4_0 || W->n_out % 4 != 0) continue;
      CHECK(W->in_row_strips() == lf::gemm_uses_row_strips(lf::GgmlType::Q4_0));
    }
  }
}

// Sessions of 32 positions, their cache in `cache`'s types.
Group make_group(const FixtureModel& f, lf::LayerRange range, int n_members, int n_threads, lf::KvCacheOptions cache = {32, 64},
                 bool ends = false) {
  Group g;
  for (int i = 0; i < n_members; ++i) {
    auto mb = std::make_unique<MemberBytes>();
    lf::ModelConfig full;
    require_ok(lf::load_model_config(f.file, &full));
    lf::MemberSplit split;
    require_ok(lf::split_members(f.file, full, range, n_members, &split, ends));
    std::vector<MemberTensor> tensors;
    require_ok(lf::member_tensors(f.file, full, split, i, &tensors));
    const uint8_t* base = f.bytes.data() + f.file.data_offset;
    for (const MemberTensor& t : tensors) {
      std::vector<uint8_t>& dst = mb->tensors[t.info.name];
      const uint8_t* src = base + f.file.tensor(t.info.name)->offset;
      for (const lf::ByteRange& r : t.ranges) dst.insert(dst.end(), src + r.offset, src + r.offset + r.size);
      REQUIRE(dst.size() == t.info.n_bytes);
      mb->total += dst.size();
    }
    auto member = std::make_unique<Member>();
    require_ok(lf::load_member(f.file, mb->locator(), lf::MemberLoadOptions{range, i, n_members, n_threads, true, ends}, member.get()));
    require_strips_where_read(*member);
    Session s;
    require_ok(Session::create(member->model, cache, &s));
    g.sessions.push_back(std::move(s));
    g.bytes.push_back(std::move(mb));
    g.members.push_back(std::move(member));
  }
  return g;
}

// Starts a phase with start(done), waits for done, and ends the phase: the async calls' way.
template <class Start>
Status started_and_ended(Start start, std::unique_ptr<MemberForward>* call) {
  std::promise<void> done;
  std::future<void> ended = done.get_future();
  LF_RETURN_IF_ERROR(start([&done] { done.set_value(); }));
  ended.wait();
  return (*call)->end_phase();
}

// The group's forward of rows [start, start + n) of x: every member's pieces handed to every
// member at each phase. Every member's output must be the same bytes; member 0's is returned.
// Odd members run their phases with begin_async / step_async, the others with begin / step.
std::vector<float> group_forward(Group& g, const std::vector<float>& x, int start, int n,
                                 const std::vector<float>& per_layer_in = {}) {
  const size_t E = static_cast<size_t>(g.members[0]->full.n_embd);
  const size_t S = g.members.size();
  std::vector<std::unique_ptr<MemberForward>> calls(S);
  for (size_t i = 0; i < S; ++i) {
    g.sessions[i].per_layer_in = per_layer_in;
    const std::span<const float> rows{x.data() + start * E, n * E};
    if (i % 2 == 0) {
      require_ok(MemberForward::begin(*g.members[i], g.sessions[i], start, rows, n, &calls[i]));
    } else {
      require_ok(started_and_ended([&](std::function<void()> done) {
        return MemberForward::begin_async(*g.members[i], g.sessions[i], start, rows, n, std::move(done), &calls[i]);
      }, &calls[i]));
    }
  }
  int phases = 0;
  while (!calls[0]->done()) {
    std::vector<std::vector<float>> pieces;
    for (size_t j = 0; j < S; ++j) {
      REQUIRE(calls[j]->piece().size() == calls[0]->piece_floats(static_cast<int>(j)));
      pieces.emplace_back(calls[j]->piece().begin(), calls[j]->piece().end());
    }
    for (size_t i = 0; i < S; ++i) {
      for (size_t j = 0; j < S; ++j) require_ok(calls[i]->put_piece(static_cast<int>(j), pieces[j]));
      if (i % 2 == 0) {
        require_ok(calls[i]->step());
      } else {
        require_ok(started_and_ended([&](std::function<void()> done) { return calls[i]->step_async(std::move(done)); }, &calls[i]));
      }
    }
    ++phases;
  }
  const lf::LayerRange r = g.members[0]->model.range;
  REQUIRE(phases == lf::kMemberPhases * (r.end - r.begin));
  std::vector<float> out(calls[0]->output().begin(), calls[0]->output().end());
  for (size_t i = 1; i < S; ++i) {
    REQUIRE(calls[i]->done());
    REQUIRE(std::memcmp(calls[i]->output().data(), out.data(), out.size() * sizeof(float)) == 0);
  }
  for (Session& s : g.sessions) REQUIRE(s.n_past() == start + n);
  return out;
}

// Layers [begin, end)'s per-layer inputs of tokens [t0, t0 + n), from every layer's [L, n_all, n_pl].
std::vector<float> per_layer_slice(const Model& first, const Embedded& in, int n_all, lf::LayerRange r, int t0, int n) {
  const int n_pl = first.config.n_embd_per_layer;
  std::vector<float> out;
  for (int l = r.begin; l < r.end && n_pl > 0; ++l) {
    const float* src = in.per_layer.data() + (static_cast<size_t>(l) * n_all + t0) * n_pl;
    out.insert(out.end(), src, src + static_cast<size_t>(n) * n_pl);
  }
  return out;
}

// A prompt of 5 then three decode steps and a 2-row step, through the single node and through
// groups of 1 .. 4 members at 1 and 2 threads, every cache in `cache`'s types: every step's
// output bytes the same.
void require_group_matches_node(const FixtureModel& f, lf::LayerRange range = {0, -1}, lf::KvCacheOptions cache = {32, 64}) {
  const Model whole = lf::test::load(f);
  const lf::LayerRange r{range.begin, range.end < 0 ? whole.config.n_layer : range.end};
  const Model node = lf::test::load(f, lf::test::NodeOptions{r});
  const int n_all = 10;
  const std::vector<int32_t> tokens = lf::test::token_sequence(n_all, 7, 3, whole.config.n_vocab);
  const Embedded in = lf::test::embed_tokens(whole, tokens);
  const std::vector<std::pair<int, int>> steps = {{0, 5}, {5, 1}, {6, 1}, {7, 1}, {8, 2}};
  Session ref;
  require_ok(Session::create(node, cache, &ref));
  std::vector<std::vector<float>> expected;
  for (const auto& [t0, n] : steps) {
    ref.per_layer_in = per_layer_slice(whole, in, n_all, r, t0, n);
    expected.push_back(lf::test::forward_rows(node, ref, in.x, t0, n));
  }
  for (int threads : {1, 2}) {
    for (int S : {1, 2, 3, 4}) {
      INFO("members " << S << ", threads " << threads);
      Group g = make_group(f, r, S, threads, cache);
      for (size_t k = 0; k < steps.size(); ++k) {
        const auto [t0, n] = steps[k];
        INFO("step at " << t0 << " of " << n);
        const std::vector<float> out = group_forward(g, in.x, t0, n, per_layer_slice(whole, in, n_all, r, t0, n));
        REQUIRE(lf::test::same_bytes(out, expected[k]));
      }
    }
  }
}

// member_needs, from the header alone, against loaded members of groups of 1 .. 3 at 1 and 2
// threads: the bytes placed, the cache of a session at 32 positions in `cache`'s types, and the
// buffers of a call of 1 and 5 rows (with the session's per-layer inputs).
void require_needs_match_members(const FixtureModel& f, lf::LayerRange r, lf::KvCacheOptions cache = {32, 64}) {
  const Model whole = lf::test::load(f);
  const int n_all = 5;
  const Embedded in = lf::test::embed_tokens(whole, lf::test::token_sequence(n_all, 7, 3, whole.config.n_vocab));
  for (int threads : {1, 2}) {
    for (int S : {1, 2, 3}) {
      Group g = make_group(f, r, S, threads, cache);
      for (int i = 0; i < S; ++i) {
        for (int n : {1, n_all}) {
          INFO("members " << S << ", member " << i << ", threads " << threads << ", rows " << n);
          lf::MemberNeeds member;
          require_ok(lf::member_needs(f.file, lf::MemberShape{r, i, S, 32, n, cache.k_type, cache.v_type}, &member));
          const lf::NodeNeeds& needs = member.node;
          CHECK(needs.tensor_bytes == g.bytes[i]->total);
          CHECK(needs.tensors.size() == g.bytes[i]->tensors.size());
          CHECK(needs.kv_bytes_per_session == g.sessions[i].kv.bytes());
          // Laying out in strips takes one strip's bytes: 4 rows of the widest Q4_0 matrix.
          uint64_t strip_bytes = 0;
          for (const auto& [name, bytes] : g.bytes[i]->tensors) {
            const lf::GgufTensorInfo* t = f.file.tensor(name);
            if (t->type == lf::GgmlType::Q4_0 && t->n_dims >= 2) strip_bytes = std::max<uint64_t>(strip_bytes, 4 * (t->ne[0] / 32) * 18);
          }
          CHECK(needs.relayout_bytes == (lf::gemm_uses_row_strips(lf::GgmlType::Q4_0) ? strip_bytes : 0));
          Session& s = g.sessions[i];
          s.per_layer_in = per_layer_slice(whole, in, n_all, r, 0, n);
          std::unique_ptr<MemberForward> call;
          require_ok(MemberForward::begin(*g.members[i], s, 0, {in.x.data(), n * in.x.size() / n_all}, n, &call));
          CHECK(member.per_layer_floats == s.per_layer_in.size());
          // And a session's copies of a call's K/V rows across the group's edge, in and out (their
          // sizes held to the rows members hand out in require_group_across_shared_kv).
          uint64_t kv_rows = 0;
          for (const auto* layers : {&needs.kv_rows_in, &needs.kv_rows_out}) {
            for (const lf::NodeNeeds::KvLayer& l : *layers) kv_rows += static_cast<uint64_t>(n) * l.bytes_per_token;
          }
          CHECK(call->buffer_bytes() + sizeof(float) * s.per_layer_in.size() + kv_rows ==
                needs.scratch_bytes + static_cast<uint64_t>(threads) * needs.scratch_bytes_per_worker);
          // Every member's first piece is one the call is handed.
          CHECK(call->piece_floats(0) <= member.piece_floats);
        }
      }
    }
  }
}

// Groups of 1 .. 4 members holding the model's ends (a range of every layer, so both ends), at 1
// and 2 threads: each token's embedding and per-layer inputs from the member holding its row,
// and each member's logits at its rows of the vocabulary, are the whole model's bytes; the
// members' slices cover the vocabulary once. member_needs counts the ends' tensors.
void require_ends_match_node(const FixtureModel& f) {
  const Model whole = lf::test::load(f);
  const lf::ModelConfig& c = whole.config;
  const int n_all = 12;
  std::vector<int32_t> tokens = lf::test::token_sequence(n_all - 2, 7, 3, c.n_vocab);
  tokens.push_back(0);
  tokens.push_back(c.n_vocab - 1);
  const Embedded in = lf::test::embed_tokens(whole, tokens);
  std::vector<float> logits(static_cast<size_t>(n_all) * c.n_vocab);
  require_ok(lf::head(whole, in.x.data(), n_all, logits.data()));
  const size_t E = static_cast<size_t>(c.n_embd), n_pl = static_cast<size_t>(c.n_embd_per_layer);
  for (int threads : {1, 2}) {
    for (int S : {1, 2, 3, 4}) {
      INFO("members " << S << ", threads " << threads);
      Group g = make_group(f, {0, c.n_layer}, S, threads, {32, 64}, true);
      int64_t covered = 0;
      for (int i = 0; i < S; ++i) {
        const Model& m = g.members[i]->model;
        REQUIRE((m.has_embedding && m.has_head));
        REQUIRE(m.vocab_begin == covered);
        covered = m.vocab_end;
        std::vector<int32_t> mine;
        std::vector<int> at;
        for (int t = 0; t < n_all; ++t) {
          if (tokens[t] >= m.vocab_begin && tokens[t] < m.vocab_end) {
            mine.push_back(tokens[t]);
            at.push_back(t);
          }
        }
        if (!mine.empty()) {
          const int k = static_cast<int>(mine.size());
          std::vector<float> x(k * E), pl(static_cast<size_t>(c.n_layer) * k * n_pl);
          require_ok(lf::embed(m, mine.data(), k, x.data()));
          if (n_pl > 0) require_ok(lf::per_layer_inputs(m, mine.data(), k, x.data(), pl.data()));
          for (int j = 0; j < k; ++j) {
            REQUIRE(std::memcmp(x.data() + j * E, in.x.data() + at[j] * E, E * sizeof(float)) == 0);
            for (int l = 0; n_pl > 0 && l < c.n_layer; ++l) {
              const float* got = pl.data() + (static_cast<size_t>(l) * k + j) * n_pl;
              const float* want = in.per_layer.data() + (static_cast<size_t>(l) * n_all + at[j]) * n_pl;
              REQUIRE(std::memcmp(got, want, n_pl * sizeof(float)) == 0);
            }
          }
        }
        const int64_t V = m.vocab_end - m.vocab_begin;
        std::vector<float> slice(static_cast<size_t>(n_all) * V);
        require_ok(lf::head(m, in.x.data(), n_all, slice.data()));
        for (int r = 0; r < n_all; ++r) {
          REQUIRE(std::memcmp(slice.data() + r * V, logits.data() + static_cast<size_t>(r) * c.n_vocab + m.vocab_begin,
                              V * sizeof(float)) == 0);
        }
        // A token of another member's rows is refused, naming the member's rows.
        const int32_t other = static_cast<int32_t>(m.vocab_end % c.n_vocab);
        if (S > 1) {
          float row[1024];
          REQUIRE(E <= 1024);
          const Status st = lf::embed(m, &other, 1, row);
          CHECK(st.message().find("is outside [" + std::to_string(m.vocab_begin) + ", " + std::to_string(m.vocab_end) + ")") !=
                std::string::npos);
        }
        lf::MemberNeeds needs;
        lf::MemberShape shape{{0, c.n_layer}, i, S, 32, n_all};
        shape.ends = true;
        require_ok(lf::member_needs(f.file, shape, &needs));
        CHECK(needs.node.tensor_bytes == g.bytes[i]->total);
        CHECK(needs.node.tensors.size() == g.bytes[i]->tensors.size());
      }
      REQUIRE(covered == c.n_vocab);
    }
  }
}

// Member rows of `full` (a position's K rows of every head, then their V rows): heads h.heads.
lf::KvRows member_rows(const lf::KvRows& full, const lf::MemberNeeds::KvHeads& h) {
  lf::KvRows out{full.layer, full.pos0, full.n, {}};
  const size_t H = static_cast<size_t>(h.n_head_kv), row = H * (h.k_row + h.v_row);
  for (int t = 0; t < full.n; ++t) {
    const uint8_t* at = full.bytes.data() + t * row;
    out.bytes.insert(out.bytes.end(), at + h.heads.begin * h.k_row, at + h.heads.end * h.k_row);
    out.bytes.insert(out.bytes.end(), at + H * h.k_row + h.heads.begin * h.v_row, at + H * h.k_row + h.heads.end * h.v_row);
  }
  return out;
}

// Shared KV across the group's edge, on the E-model fixture (5 layers, the last two reading
// layers 1 and 2's caches; one KV head a layer, so one member of a group holds it and the others
// none): a group over every range [a, b) of its layers, of 1 .. 4 members at 1 and 2 threads,
// given the K/V rows of the sources before the range as a node of the range is (each member its
// heads' rows, member_needs' kv_in), gives that node's output for a prompt and decode steps; the
// members' rows of the sources whose readers follow the range (kv_out), put together by head,
// are the node's kv_rows_out.
void require_group_across_shared_kv(lf::GgmlType kv_type) {
  const FixtureModel f = lf::test::e_fixture(WeightFormat::mixed);
  const Model whole = lf::test::load(f);
  const int n_all = 10;
  const Embedded in = lf::test::embed_tokens(whole, lf::test::token_sequence(n_all, 7, 3, whole.config.n_vocab));
  const std::vector<std::pair<int, int>> steps = {{0, 6}, {6, 1}, {7, 1}, {8, 2}};
  lf::KvCacheOptions cache{32, 64};
  cache.k_type = cache.v_type = kv_type;
  const int L = whole.config.n_layer;
  for (int a = 0; a < L; ++a) {
    for (int b = a + 1; b <= L; ++b) {
      // The nodes before, of and after the range; what the range's node is given, gives and hands out.
      std::vector<Model> nodes;
      std::vector<Session> sessions;
      for (const auto [begin, end] : {std::pair{0, a}, std::pair{a, b}, std::pair{b, L}}) {
        if (begin == end) continue;
        nodes.push_back(lf::test::load(f, lf::test::NodeOptions{{begin, end}}));
        Session s;
        require_ok(Session::create(nodes.back(), cache, &s));
        sessions.push_back(std::move(s));
      }
      const size_t mid = a > 0 ? 1 : 0;
      std::vector<std::vector<float>> x_in, x_out;
      std::vector<std::vector<lf::KvRows>> rows_in, rows_out;
      for (const auto& [t0, n] : steps) {
        std::vector<lf::KvRows> shipped;
        std::vector<float> x(in.x.begin() + t0 * whole.config.n_embd, in.x.begin() + (t0 + n) * whole.config.n_embd);
        for (size_t i = 0; i < nodes.size(); ++i) {
          Session& s = sessions[i];
          s.kv_rows_in.clear();
          for (const lf::KvRows& r : shipped) {
            const std::vector<int>& m = s.kv.mirrored();
            if (std::find(m.begin(), m.end(), r.layer) != m.end()) s.kv_rows_in.push_back(r);
          }
          s.per_layer_in = per_layer_slice(whole, in, n_all, nodes[i].range, t0, n);
          if (i == mid) {
            // Rows [t0, t0 + n) of x, as group_forward takes them.
            x_in.emplace_back(static_cast<size_t>(t0) * whole.config.n_embd, 0.0f).insert(x_in.back().end(), x.begin(), x.end());
            rows_in.push_back(s.kv_rows_in);
          }
          std::vector<float> out(x.size());
          require_ok(lf::forward(nodes[i], s, t0, x.data(), n, out.data(), false));
          x = std::move(out);
          if (i == mid) {
            x_out.push_back(x);
            rows_out.push_back(s.last.kv_rows_out);
          }
          shipped.insert(shipped.end(), s.last.kv_rows_out.begin(), s.last.kv_rows_out.end());
        }
      }
      for (int threads : {1, 2}) {
        for (int S : {1, 2, 3, 4}) {
          INFO("layers [" << a << ", " << b << "), members " << S << ", threads " << threads);
          Group g = make_group(f, {a, b}, S, threads, cache);
          std::vector<lf::MemberNeeds> needs(S);
          for (int i = 0; i < S; ++i) {
            lf::MemberShape shape{{a, b}, i, S, 32, 6, kv_type, kv_type};
            require_ok(lf::member_needs(f.file, shape, &needs[i]));
          }
          for (size_t k = 0; k < steps.size(); ++k) {
            const auto [t0, n] = steps[k];
            INFO("step at " << t0);
            for (int i = 0; i < S; ++i) {
              g.sessions[i].kv_rows_in.clear();
              for (const lf::MemberNeeds::KvHeads& h : needs[i].kv_in) {
                const auto full = std::find_if(rows_in[k].begin(), rows_in[k].end(), [&h](const lf::KvRows& r) { return r.layer == h.layer; });
                REQUIRE(full != rows_in[k].end());
                g.sessions[i].kv_rows_in.push_back(member_rows(*full, h));
              }
            }
            const std::vector<float> out = group_forward(g, x_in[k], t0, n, per_layer_slice(whole, in, n_all, {a, b}, t0, n));
            REQUIRE(lf::test::same_bytes(out, x_out[k]));
            REQUIRE(needs[0].kv_out.size() == rows_out[k].size());
            for (size_t j = 0; j < rows_out[k].size(); ++j) {
              const lf::KvRows& want = rows_out[k][j];
              // Each member's rows are its heads' of the node's.
              for (int i = 0; i < S; ++i) {
                const lf::MemberNeeds::KvHeads& h = needs[i].kv_out[j];
                REQUIRE(h.layer == want.layer);
                const lf::KvRows& got = g.sessions[i].last.kv_rows_out.at(j);
                CHECK((got.layer == want.layer && got.pos0 == want.pos0 && got.n == want.n));
                CHECK(got.bytes == member_rows(want, h).bytes);
                CHECK(got.bytes.size() == static_cast<size_t>(n) * needs[i].node.kv_rows_out[j].bytes_per_token);
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("a group across the shared-KV edge takes and hands out its heads' K/V rows as a node does", "[tensor_parallel]") {
  SECTION("f16 cache") { require_group_across_shared_kv(lf::GgmlType::F16); }
  SECTION("q8_0 cache") { require_group_across_shared_kv(lf::GgmlType::Q8_0); }
}

TEST_CASE("a group holding the model's ends embeds and gives logits as a node does", "[tensor_parallel]") {
  SECTION("gemma4, tied head") { require_ends_match_node(lf::test::fixture(lf::Arch::gemma4, WeightFormat::mixed)); }
  SECTION("gemma3") { require_ends_match_node(lf::test::fixture(lf::Arch::gemma3, WeightFormat::mixed)); }
  SECTION("E-model") { require_ends_match_node(lf::test::e_fixture(WeightFormat::mixed)); }
  SECTION("a member without ends holds no embedding or head") {
    const FixtureModel f = lf::test::fixture(lf::Arch::gemma4, WeightFormat::mixed);
    Group g = make_group(f, {0, 2}, 2, 1);
    const int32_t token = 0;
    float row[1024];
    CHECK(lf::embed(g.members[0]->model, &token, 1, row).message().find("no token embedding") != std::string::npos);
    lf::MemberSplit split;
    lf::ModelConfig full;
    require_ok(lf::load_model_config(f.file, &full));
    require_ok(lf::split_members(f.file, full, {1, 2}, 2, &split, true));
    CHECK_FALSE((split.with_embedding || split.with_head));
  }
}

TEST_CASE("member_needs counts what a loaded member holds", "[tensor_parallel]") {
  SECTION("dense, quantized") { require_needs_match_members(lf::test::fixture(lf::Arch::gemma4, WeightFormat::mixed), {0, 3}); }
  SECTION("a range of the layers") { require_needs_match_members(lf::test::fixture(lf::Arch::gemma3, WeightFormat::mixed), {1, 3}); }
  SECTION("MoE") {
    lf::test::MoeFixture moe;
    moe.exps_type = lf::GgmlType::Q8_0;
    lf::test::FixtureOptions o;
    o.format = WeightFormat::mixed;
    lf::test::add_moe(moe, &o);
    require_needs_match_members(lf::test::fixture(o), {0, 2});
  }
  SECTION("E-model") { require_needs_match_members(lf::test::e_fixture(WeightFormat::mixed), {0, 2}); }
  SECTION("a q8_0 K and q4_0 V cache") {
    lf::KvCacheOptions cache{32, 64};
    cache.k_type = lf::GgmlType::Q8_0;
    cache.v_type = lf::GgmlType::Q4_0;
    require_needs_match_members(lf::test::fixture(lf::Arch::gemma4, WeightFormat::mixed), {0, 3}, cache);
  }
  SECTION("refused by name") {
    const FixtureModel f = lf::test::fixture(lf::Arch::gemma4, WeightFormat::mixed);
    lf::MemberNeeds needs;
    Status st = lf::member_needs(f.file, lf::MemberShape{{0, 2}, 2, 2, 32, 1}, &needs);
    CHECK(st.message().find("member 2 is not one of 2") != std::string::npos);
    st = lf::member_needs(f.file, lf::MemberShape{{0, 2}, 0, 2, 32, 0}, &needs);
    CHECK(st.message().find("max_tokens") != std::string::npos);
    st = lf::member_needs(f.file, lf::MemberShape{{0, 99}, 0, 2, 32, 1}, &needs);
    CHECK_FALSE(st.ok());
  }
}

TEST_CASE("a group of members gives a dense node's bytes", "[tensor_parallel]") {
  SECTION("gemma4, f32") { require_group_matches_node(lf::test::fixture(lf::Arch::gemma4)); }
  SECTION("gemma4, quantized") { require_group_matches_node(lf::test::fixture(lf::Arch::gemma4, WeightFormat::mixed)); }
  SECTION("gemma3, quantized") { require_group_matches_node(lf::test::fixture(lf::Arch::gemma3, WeightFormat::mixed)); }
  SECTION("a range of the layers") { require_group_matches_node(lf::test::fixture(lf::Arch::gemma4, WeightFormat::mixed), {1, 3}); }
}

TEST_CASE("a group of members gives a MoE node's bytes", "[tensor_parallel]") {
  for (bool fused : {true, false}) {
    lf::test::MoeFixture moe;
    moe.fused = fused;
    moe.exps_type = lf::GgmlType::Q8_0;
    lf::test::FixtureOptions o;
    o.format = WeightFormat::mixed;
    lf::test::add_moe(moe, &o);
    INFO("fused " << fused);
    require_group_matches_node(lf::test::fixture(o));
  }
}

TEST_CASE("members with quantized caches give the bytes of a node with the same cache", "[tensor_parallel]") {
  // Each block of a q8_0 / q4_0 row lies within one KV head, the unit a member holds.
  for (const auto& [k, v] : {std::pair{lf::GgmlType::Q8_0, lf::GgmlType::Q8_0}, {lf::GgmlType::Q8_0, lf::GgmlType::Q4_0},
                             {lf::GgmlType::Q4_0, lf::GgmlType::F16}}) {
    INFO("K " << lf::kv_type_name(k) << ", V " << lf::kv_type_name(v));
    lf::KvCacheOptions cache{32, 64};
    cache.k_type = k;
    cache.v_type = v;
    SECTION(std::string("dense, ") + lf::kv_type_name(k) + "/" + lf::kv_type_name(v)) {
      require_group_matches_node(lf::test::fixture(lf::Arch::gemma4, WeightFormat::mixed), {0, -1}, cache);
    }
    SECTION(std::string("E-model, ") + lf::kv_type_name(k) + "/" + lf::kv_type_name(v)) {
      require_group_matches_node(lf::test::e_fixture(WeightFormat::mixed), {0, -1}, cache);
    }
  }
}

TEST_CASE("a group of members gives an E-model node's bytes", "[tensor_parallel]") {
  SECTION("f32") { require_group_matches_node(lf::test::e_fixture()); }
  SECTION("quantized") { require_group_matches_node(lf::test::e_fixture(WeightFormat::mixed)); }
}
