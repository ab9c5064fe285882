// Tensor parallelism (docs/tensor-parallel.md): a group of S members, each holding its slices of
// every layer, exchanging pieces in memory between phases, gives the single node's bytes for
// every S, prompt and decode, dense, MoE and E-model layers, at 1 and 2 threads per member.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layerfold/capi.h"
#include "model/member.h"
#include "model/member_forward.h"
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

Group make_group(const FixtureModel& f, lf::LayerRange range, int n_members, int n_threads) {
  Group g;
  for (int i = 0; i < n_members; ++i) {
    auto mb = std::make_unique<MemberBytes>();
    lf::ModelConfig full;
    require_ok(lf::load_model_config(f.file, &full));
    lf::MemberSplit split;
    require_ok(lf::split_members(f.file, full, range, n_members, &split));
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
    require_ok(lf::load_member(f.file, mb->locator(), lf::MemberLoadOptions{range, i, n_members, n_threads}, member.get()));
    Session s;
    require_ok(Session::create(member->model, lf::KvCacheOptions{32, 64}, &s));
    g.sessions.push_back(std::move(s));
    g.bytes.push_back(std::move(mb));
    g.members.push_back(std::move(member));
  }
  return g;
}

// The group's forward of rows [start, start + n) of x: every member's pieces handed to every
// member at each phase. Every member's output must be the same bytes; member 0's is returned.
std::vector<float> group_forward(Group& g, const std::vector<float>& x, int start, int n,
                                 const std::vector<float>& per_layer_in = {}) {
  const size_t E = static_cast<size_t>(g.members[0]->full.n_embd);
  const size_t S = g.members.size();
  std::vector<std::unique_ptr<MemberForward>> calls(S);
  for (size_t i = 0; i < S; ++i) {
    g.sessions[i].per_layer_in = per_layer_in;
    require_ok(MemberForward::begin(*g.members[i], g.sessions[i], start, {x.data() + start * E, n * E}, n, &calls[i]));
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
      require_ok(calls[i]->step());
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
// groups of 1 .. 4 members at 1 and 2 threads: every step's output bytes the same.
void require_group_matches_node(const FixtureModel& f, lf::LayerRange range = {0, -1}) {
  const Model whole = lf::test::load(f);
  const lf::LayerRange r{range.begin, range.end < 0 ? whole.config.n_layer : range.end};
  const Model node = lf::test::load(f, lf::test::NodeOptions{r});
  const int n_all = 10;
  const std::vector<int32_t> tokens = lf::test::token_sequence(n_all, 7, 3, whole.config.n_vocab);
  const Embedded in = lf::test::embed_tokens(whole, tokens);
  const std::vector<std::pair<int, int>> steps = {{0, 5}, {5, 1}, {6, 1}, {7, 1}, {8, 2}};
  Session ref = lf::test::session(node);
  std::vector<std::vector<float>> expected;
  for (const auto& [t0, n] : steps) {
    ref.per_layer_in = per_layer_slice(whole, in, n_all, r, t0, n);
    expected.push_back(lf::test::forward_rows(node, ref, in.x, t0, n));
  }
  for (int threads : {1, 2}) {
    for (int S : {1, 2, 3, 4}) {
      INFO("members " << S << ", threads " << threads);
      Group g = make_group(f, r, S, threads);
      for (size_t k = 0; k < steps.size(); ++k) {
        const auto [t0, n] = steps[k];
        INFO("step at " << t0 << " of " << n);
        const std::vector<float> out = group_forward(g, in.x, t0, n, per_layer_slice(whole, in, n_all, r, t0, n));
        REQUIRE(lf::test::same_bytes(out, expected[k]));
      }
    }
  }
}

}  // namespace

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

TEST_CASE("a group of members gives an E-model node's bytes", "[tensor_parallel]") {
  SECTION("f32") { require_group_matches_node(lf::test::e_fixture()); }
  SECTION("quantized") { require_group_matches_node(lf::test::e_fixture(WeightFormat::mixed)); }
}

TEST_CASE("the C ABI drives a group of members to a node's bytes", "[tensor_parallel]") {
  const FixtureModel f = lf::test::fixture(lf::Arch::gemma4, WeightFormat::mixed);
  const Model node = lf::test::load(f);
  const std::vector<int32_t> tokens = lf::test::token_sequence(7, 5, 1, node.config.n_vocab);
  const Embedded in = lf::test::embed_tokens(node, tokens);
  Session ref = lf::test::session(node);
  const std::vector<float> prompt = lf::test::forward_rows(node, ref, in.x, 0, 5);
  const std::vector<float> decode = lf::test::forward_rows(node, ref, in.x, 5, 1);
  const std::vector<float> again = lf::test::forward_rows(node, ref, in.x, 6, 1);

  constexpr int S = 3;
  lf_gguf* gguf = lf_gguf_parse(f.bytes.data(), static_cast<double>(f.bytes.size()), static_cast<double>(f.bytes.size()));
  REQUIRE(gguf != nullptr);
  std::vector<std::vector<std::vector<uint8_t>>> placed(S);
  std::vector<lf_member*> members;
  std::vector<lf_session*> sessions;
  const uint8_t* base = f.bytes.data() + f.file.data_offset;
  for (int i = 0; i < S; ++i) {
    const char* json = lf_member_tensors_json(gguf, 0, node.config.n_layer, i, S);
    REQUIRE(json != nullptr);
    const nlohmann::json j = nlohmann::json::parse(json);
    lf_member* m = lf_member_create();
    for (const nlohmann::json& t : j["tensors"]) {
      std::vector<uint8_t>& bytes = placed[i].emplace_back();
      const uint8_t* src = base + f.file.tensor(t["name"].get<std::string>())->offset;
      for (const nlohmann::json& r : t["ranges"]) {
        bytes.insert(bytes.end(), src + r[0].get<uint64_t>(), src + r[0].get<uint64_t>() + r[1].get<uint64_t>());
      }
      bytes.reserve(1);  // a tensor of no rows still has an address
      REQUIRE(lf_member_place_tensor(m, t["name"].get<std::string>().c_str(), bytes.data()) == 1);
    }
    INFO(lf_last_error_message());
    REQUIRE(lf_member_load(m, gguf, 0, node.config.n_layer, i, S, 1) == 1);
    members.push_back(m);
    sessions.push_back(lf_member_session_create(m, 32));
    REQUIRE(sessions.back() != nullptr);
  }
  auto run = [&](int start, int n) {
    const size_t E = static_cast<size_t>(node.config.n_embd);
    std::vector<lf_member_call*> calls;
    for (int i = 0; i < S; ++i) {
      calls.push_back(lf_member_begin(members[i], sessions[i], start, in.x.data() + start * E, n));
      REQUIRE(calls.back() != nullptr);
    }
    while (lf_member_call_layer(calls[0]) >= 0) {
      std::vector<std::vector<float>> pieces;
      for (int j = 0; j < S; ++j) {
        const float* p = lf_member_piece(calls[j]);
        pieces.emplace_back(p, p + lf_member_piece_floats(calls[0], j));
      }
      // A piece of the wrong size is refused and changes nothing.
      REQUIRE(lf_member_put_piece(calls[0], 0, pieces[0].data(), static_cast<int>(pieces[0].size()) + 1) == 0);
      REQUIRE(std::string(lf_last_error_message()).find("floats, expected") != std::string::npos);
      for (int i = 0; i < S; ++i) {
        for (int j = 0; j < S; ++j) REQUIRE(lf_member_put_piece(calls[i], j, pieces[j].data(), static_cast<int>(pieces[j].size())) == 1);
        REQUIRE(lf_member_step(calls[i]) == 1);
      }
    }
    std::vector<float> out(lf_member_output(calls[0]), lf_member_output(calls[0]) + static_cast<size_t>(n) * E);
    for (lf_member_call* c : calls) lf_member_call_free(c);
    return out;
  };
  REQUIRE(lf::test::same_bytes(run(0, 5), prompt));
  REQUIRE(lf::test::same_bytes(run(5, 1), decode));

  // A call abandoned after its first phase leaves every session as it was: the step then runs
  // to the node's bytes.
  std::vector<lf_member_call*> calls;
  for (int i = 0; i < S; ++i) calls.push_back(lf_member_begin(members[i], sessions[i], 6, in.x.data() + 6 * node.config.n_embd, 1));
  for (lf_member_call* c : calls) REQUIRE(c != nullptr);
  for (lf_member_call* c : calls) lf_member_call_free(c);
  for (lf_session* s : sessions) REQUIRE(lf_session_n_past(s) == 6);
  REQUIRE(lf::test::same_bytes(run(6, 1), again));

  for (lf_session* s : sessions) lf_session_free(s);
  for (lf_member* m : members) lf_member_free(m);
  lf_gguf_free(gguf);
}
