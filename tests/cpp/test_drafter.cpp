// Gemma 4's MTP drafter (model/drafter.h) beside a synthetic target made by make_model: what it
// reads of the target, the refusals by name, one draft step against a plain reference, and the
// same bytes for every thread count.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "model/drafter.h"
#include "ops/ops.h"
#include "support/drafter_reference.h"
#include "support/fixture_drafter.h"

namespace {

using lf::Drafter;
using lf::Model;
using lf::Session;
using lf::Status;
using lf::test::DrafterPair;
using lf::test::drafter_pair;
using lf::test::FixtureModel;
using lf::test::load;
using lf::test::load_drafter_of;
using lf::test::require_ok;

// A 3-layer target (sliding, sliding, global; window 4) whose drafter's layers read layer 1
// (sliding) and layer 2 (global).
std::vector<std::string> target_args(const char* type = "F32") {
  return {"--preset", "tiny", "--n-layer", "3", "--swa-pattern", "SSG", "--type", type};
}

// The target after a prompt: its node, a session, the last prompt row's hidden state before the
// output norm (the node's forward output) and output-normed (what the target hands its drafter).
struct Prompted {
  Model m;
  Session s;
  std::vector<float> hidden, h;
};

Prompted prompt(const FixtureModel& target, int n, int n_threads = 1) {
  Prompted p;
  p.m = load(target, {{0, -1}, n_threads});
  p.s = lf::test::session(p.m, 64);
  const std::vector<int32_t> tokens = lf::test::token_sequence(n, 7, 3, p.m.config.n_vocab);
  const lf::test::Embedded in = lf::test::embed_tokens(p.m, tokens);
  p.hidden = lf::test::forward_rows(p.m, p.s, in.x, 0, n, true);
  p.h.resize(p.hidden.size());
  lf::rmsnorm(p.hidden.data(), p.m.output_norm.f32(), p.m.config.n_embd, p.m.config.norm_eps, p.h.data());
  return p;
}

Drafter drafter_beside(const FixtureModel& drafter, const Model& target, int n_threads = 1) {
  Drafter d;
  require_ok(load_drafter_of(drafter, target, n_threads, &d));
  return d;
}

struct Step {
  std::vector<float> logits, h_next;
};

Step step(const Drafter& d, const Session& s, int32_t token, const std::vector<float>& h) {
  Step out{std::vector<float>(d.model.config.n_vocab), std::vector<float>(d.n_embd_backbone)};
  require_ok(lf::draft_step(d, s, token, h.data(), out.logits.data(), out.h_next.data()));
  return out;
}

std::vector<double> log_softmax(const std::vector<float>& x) {
  double max = -INFINITY, sum = 0;
  for (float v : x) max = std::max(max, static_cast<double>(v));
  for (float v : x) sum += std::exp(v - max);
  std::vector<double> out;
  for (float v : x) out.push_back(v - max - std::log(sum));
  return out;
}

double max_ln_p_diff(const std::vector<float>& a, const std::vector<float>& b) {
  const std::vector<double> la = log_softmax(a), lb = log_softmax(b);
  double worst = 0;
  for (size_t i = 0; i < la.size(); ++i) worst = std::max(worst, std::abs(la[i] - lb[i]));
  return worst;
}

double max_rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    norm = std::max(norm, std::abs(static_cast<double>(want[i])));
  }
  return diff / norm;
}

int argmax(const std::vector<float>& x) { return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin()); }

void refused(const Status& s, const std::string& needle) {
  INFO(s.message());
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("a drafter reads the target's last sliding and global layers' caches", "[drafter]") {
  lf::make_model::AssistantShape shape;
  shape.pattern = "SGS";
  const DrafterPair pair = drafter_pair(target_args(), shape);
  const Model target = load(pair.target);
  const Drafter d = drafter_beside(pair.drafter, target);
  const lf::ModelConfig& c = d.model.config;
  CHECK(d.n_embd_backbone == 64);
  CHECK(c.n_embd == 32);
  REQUIRE(c.n_layer == 3);
  const int kv_layer[] = {1, 2, 1};
  for (int il = 0; il < 3; ++il) {
    INFO("drafter layer " << il);
    CHECK(c.layers[il].kv_layer == kv_layer[il]);
    CHECK(c.layers[il].shares_kv);
    CHECK(c.layers[il].head_dim == target.config.layers[kv_layer[il]].head_dim);
  }
  CHECK(c.final_softcap == 0.0f);
  // llama.cpp tells the two widths apart by their differing: make_model writes no such drafter,
  lf::make_model::AssistantShape same_width;
  same_width.n_embd = 64;
  lf::GgufWriter w;
  refused(lf::make_model::add_assistant(pair.target_config, same_width, {}, &w), "not the target's (64)");
  // nor a layer pattern of other letters.
  lf::make_model::CliArgs args;
  refused(lf::make_model::parse_cli({"--preset", "tiny", "--assistant", "--assistant-layers", "SXG", "--out", "x.gguf"}, &args),
          "--assistant-layers must be a string of S (sliding) and G (global), got 'SXG'");
  // A drafter is not a model of its own.
  lf::ModelConfig alone;
  refused(lf::load_model_config(pair.drafter.file, &alone), "is a drafter");
}

TEST_CASE("a drafter for another target, or with a missing or mis-shaped tensor, is refused by name", "[drafter]") {
  const DrafterPair pair = drafter_pair(target_args());
  const Model target = load(pair.target);
  Drafter d;
  {  // another width
    const DrafterPair wide = drafter_pair({"--preset", "tiny", "--n-layer", "3", "--swa-pattern", "SSG",
                                           "--n-embd", "96", "--type", "F32"});
    refused(load_drafter_of(wide.drafter, target, 1, &d), "target of width 96 (embedding_length_out), the target's is 64");
  }
  {  // another vocabulary
    const DrafterPair other = drafter_pair({"--preset", "tiny", "--n-layer", "3", "--swa-pattern", "SSG", "--n-vocab", "1056",
                                            "--type", "F32"});
    refused(load_drafter_of(other.drafter, target, 1, &d), "vocabulary has 1056 tokens, the target's 1024");
  }
  {  // another layer pattern: the sliding layer it reads has another head dim
    const DrafterPair other = drafter_pair({"--preset", "tiny", "--n-layer", "3", "--swa-pattern", "SSG",
                                            "--head-dim-swa", "16", "--type", "F32"});
    refused(load_drafter_of(other.drafter, target, 1, &d),
            "drafter layer 0 (sliding, head dim 16, 2 KV heads) reads target layer 1 (sliding, head dim 32, 2 KV heads)");
  }
  {  // another sliding window
    const DrafterPair other = drafter_pair({"--preset", "tiny", "--n-layer", "3", "--swa-pattern", "SSG",
                                            "--sliding-window", "8", "--type", "F32"});
    refused(load_drafter_of(other.drafter, target, 1, &d), "sliding window is 8, the target's 4");
  }
  {  // a missing tensor
    FixtureModel f = pair.drafter;
    std::erase_if(f.file.tensors, [](const lf::GgufTensorInfo& t) { return t.name == "nextn.post_projection.weight"; });
    refused(load_drafter_of(f, target, 1, &d), "missing required tensor 'nextn.post_projection.weight'");
  }
  {  // a missing key
    FixtureModel f = pair.drafter;
    std::erase_if(f.file.kv, [](const auto& kv) { return kv.first == "gemma4-assistant.embedding_length_out"; });
    refused(load_drafter_of(f, target, 1, &d), "missing required key 'gemma4-assistant.embedding_length_out'");
  }
  {  // a mis-shaped one
    FixtureModel f = pair.drafter;
    for (lf::GgufTensorInfo& t : f.file.tensors) {
      if (t.name == "nextn.pre_projection.weight") t.ne[0] = 64;
    }
    refused(load_drafter_of(f, target, 1, &d), "tensor 'nextn.pre_projection.weight' has ne [64, 32], expected [128, 32]");
  }
  {  // a node without the head (and the caches the drafter reads)
    const Model first = load(pair.target, {{0, 1}});
    refused(load_drafter_of(pair.drafter, first, 1, &d), "load it beside the node holding the target's head");
  }
}

TEST_CASE("an E-model drafter's masked-embedding centroids are accepted and never read", "[drafter]") {
  std::vector<std::string> args = target_args();
  args.insert(args.end(), {"--out", "unused.gguf"});
  lf::make_model::CliArgs parsed;
  require_ok(lf::make_model::parse_cli(args, &parsed));
  lf::GgufWriter target, drafter;
  require_ok(lf::make_model::add_model(&parsed.model, parsed.settings, &target));
  require_ok(lf::make_model::add_assistant(parsed.model, {}, parsed.settings, &drafter));
  // NaN everywhere: a load that bound them would refuse them as non-finite.
  require_ok(drafter.add_tensor("masked_embd_centroids.weight", lf::GgmlType::F32, {32, 8}, [](uint8_t* dst, uint64_t n) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (uint64_t i = 0; i + 4 <= n; i += 4) std::memcpy(dst + i, &nan, 4);
  }));
  const FixtureModel t = lf::test::parsed_fixture(target), with_centroids = lf::test::parsed_fixture(drafter);
  const Model m = load(t);
  Drafter d;
  require_ok(load_drafter_of(with_centroids, m, 1, &d));
  // Another unexpected tensor is refused by name.
  FixtureModel renamed = with_centroids;
  for (lf::GgufTensorInfo& info : renamed.file.tensors) {
    if (info.name == "masked_embd_centroids.weight") info.name = "masked_embd_extra.weight";
  }
  refused(load_drafter_of(renamed, m, 1, &d), "unexpected tensor 'masked_embd_extra.weight' (not part of a gemma4-assistant model)");
}

TEST_CASE("a draft step agrees with the plain reference and reads the target's cache", "[drafter]") {
  // F32 weights: the engine's f16 queries and f16 value sums in attention, the GELU table and f32
  // sums are what differ from the reference. Q4_0 adds the activations' Q8_0 rounding. Bounds
  // about 1.5x the largest errors measured over both steps (ln p 2.1e-3 and 4.7e-2, h_next
  // 4.7e-4 and 2.0e-2).
  struct Case { const char* type; double ln_p_tol, h_tol; };
  for (const Case& k : {Case{"F32", 3e-3, 7e-4}, Case{"Q4_0", 7e-2, 3e-2}}) {
    INFO("type " << k.type);
    const DrafterPair pair = drafter_pair(target_args(k.type));
    Prompted p = prompt(pair.target, 9);  // past the window of 4
    const Drafter d = drafter_beside(pair.drafter, p.m);
    const int32_t token = 17;
    const Step got = step(d, p.s, token, p.h);
    const lf::test::RefDraft want = lf::test::ref_draft_step(d, p.s, token, p.h);
    const double ln_p = max_ln_p_diff(got.logits, want.logits), h_err = max_rel_error(got.h_next, want.h_next);
    INFO("ln p " << ln_p << ", h_next " << h_err);
    CHECK(ln_p <= k.ln_p_tol);
    CHECK(h_err <= k.h_tol);

    // The next step from the drafted token and h_next, at the same position.
    const int32_t drafted = argmax(got.logits);
    const Step second = step(d, p.s, drafted, got.h_next);
    const lf::test::RefDraft want2 = lf::test::ref_draft_step(d, p.s, drafted, got.h_next);
    CHECK(max_ln_p_diff(second.logits, want2.logits) <= k.ln_p_tol);
    CHECK(max_rel_error(second.h_next, want2.h_next) <= k.h_tol);

    // Another prompt's cache changes the draft: the attention reads it.
    Prompted other = prompt(pair.target, 7);
    const Step elsewhere = step(d, other.s, token, p.h);
    CHECK(max_ln_p_diff(elsewhere.logits, got.logits) > 10 * k.ln_p_tol);
  }
}

TEST_CASE("a draft step's bytes are the same for every thread count", "[drafter]") {
  const DrafterPair pair = drafter_pair(target_args("Q4_0"));
  Prompted p = prompt(pair.target, 11);
  const Step one = step(drafter_beside(pair.drafter, p.m, 1), p.s, 5, p.h);
  for (int threads : {2, 3, 4}) {
    INFO(threads << " threads");
    const Step many = step(drafter_beside(pair.drafter, p.m, threads), p.s, 5, p.h);
    CHECK(many.logits == one.logits);
    CHECK(many.h_next == one.h_next);
  }
}

TEST_CASE("a draft step refuses bad input and stops on non-finite states", "[drafter]") {
  const DrafterPair pair = drafter_pair(target_args());
  Prompted p = prompt(pair.target, 5);
  const Drafter d = drafter_beside(pair.drafter, p.m);
  std::vector<float> logits(1024), h_next(64);
  refused(lf::draft_step(d, p.s, 1024, p.h.data(), logits.data(), h_next.data()), "draft token id 1024 is outside [0, 1024)");
  std::vector<float> nan_h = p.h;
  nan_h[3] = std::numeric_limits<float>::quiet_NaN();
  refused(lf::draft_step(d, p.s, 1, nan_h.data(), logits.data(), h_next.data()), "the drafter's input hidden state");
  // Finite but so large that the projections overflow.
  const std::vector<float> huge(64, 3e38f);
  refused(lf::draft_step(d, p.s, 1, huge.data(), logits.data(), h_next.data()), "the drafter's");
  Session empty = lf::test::session(p.m, 64);
  refused(lf::draft_step(d, empty, 1, p.h.data(), logits.data(), h_next.data()), "holds no position to draft after");
  // A session of another model: its layer 1 has another head dim.
  const DrafterPair other = drafter_pair({"--preset", "tiny", "--n-layer", "3", "--swa-pattern", "SSG", "--head-dim-swa", "16",
                                          "--type", "F32"});
  Prompted elsewhere = prompt(other.target, 5);
  refused(lf::draft_step(d, elsewhere.s, 1, p.h.data(), logits.data(), h_next.data()),
          "the session does not hold the target's layer 1 cache the drafter reads (sliding, head dim 32, 2 KV heads)");
}

TEST_CASE("greedy drafting takes each step's argmax from the normed hidden state", "[drafter]") {
  const DrafterPair pair = drafter_pair(target_args("Q4_0"));
  Prompted p = prompt(pair.target, 9);
  const Drafter d = drafter_beside(pair.drafter, p.m);
  // The steps one by one, from the state normed here.
  std::vector<int32_t> want;
  std::vector<float> h = p.h;
  int32_t token = 17;
  for (int i = 0; i < 4; ++i) {
    const Step s = step(d, p.s, token, h);
    token = argmax(s.logits);
    want.push_back(token);
    h = s.h_next;
  }
  std::vector<int32_t> got(4, -1);
  require_ok(lf::draft_greedy(d, p.s, 9, 17, p.hidden.data(), 4, got.data()));
  CHECK(got == want);
  std::vector<int32_t> fewer(2, -1);
  require_ok(lf::draft_greedy(d, p.s, 9, 17, p.hidden.data(), 2, fewer.data()));
  CHECK(fewer == std::vector<int32_t>(want.begin(), want.begin() + 2));
}

TEST_CASE("greedy drafting before the session's end reads no key from there on", "[drafter]") {
  const DrafterPair pair = drafter_pair(target_args("Q4_0"));
  Prompted p = prompt(pair.target, 9);
  const Drafter d = drafter_beside(pair.drafter, p.m);
  std::vector<int32_t> want(3, -1);
  require_ok(lf::draft_greedy(d, p.s, 9, 17, p.hidden.data(), 3, want.data()));
  // The same prompt and two rejected rows after it: drafting at 9 is drafting after the prompt.
  Model& m = p.m;
  Session longer = lf::test::session(m, 64);
  std::vector<int32_t> tokens = lf::test::token_sequence(9, 7, 3, m.config.n_vocab);
  tokens.insert(tokens.end(), {400, 401});
  const lf::test::Embedded in = lf::test::embed_tokens(m, tokens);
  lf::test::forward_rows(m, longer, in.x, 0, 11);
  std::vector<int32_t> got(3, -1);
  require_ok(lf::draft_greedy(d, longer, 9, 17, p.hidden.data(), 3, got.data()));
  CHECK(got == want);

  refused(lf::draft_greedy(d, longer, 12, 17, p.hidden.data(), 3, got.data()), "draft position 12 is outside [0, 11]");
  refused(lf::draft_greedy(d, longer, 0, 17, p.hidden.data(), 3, got.data()), "holds no position to draft after");
  refused(lf::draft_greedy(d, longer, 9, 17, p.hidden.data(), -1, got.data()), "draft count -1 is negative");
  std::vector<float> nan_hidden = p.hidden;
  nan_hidden[5] = std::numeric_limits<float>::quiet_NaN();
  refused(lf::draft_greedy(d, longer, 9, 17, nan_hidden.data(), 3, got.data()), "the target's hidden state");

  // Sliding rings of the window and one slot more (attention in chunks of 1 position) have
  // overwritten the keys position 9 reads.
  Session tight = lf::test::session(m, 64, 1);
  lf::test::forward_rows(m, tight, in.x, 0, 11);
  refused(lf::draft_greedy(d, tight, 9, 17, p.hidden.data(), 3, got.data()), "draft position 9 is outside [10, 11]");
}
