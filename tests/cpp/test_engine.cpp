// The engine on tiny in-memory gemma4 / gemma3 models (support/fixture_model.h): configuration,
// refusals, agreement with the reference forward, pipeline splits, cache chunking, errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/engine_checks.h"
#include "model/forward.h"
#include "model/reference_forward.h"

namespace {

using lf::Arch;
using lf::Code;
using lf::Model;
using lf::Session;
using lf::Status;
using lf::test::FixtureModel;
using lf::test::FixtureOptions;
using lf::test::WeightFormat;
using lf::test::embed_tokens;
using lf::test::fixture;
using lf::test::forward_rows;
using lf::test::load;
using lf::test::max_row_rel_error;
using lf::test::require_ok;
using lf::test::require_refused;
using lf::test::session;
using lf::test::token_sequence;

constexpr int kEmbd = lf::test::kFixtureEmbd;
constexpr int kLayers = lf::test::kFixtureLayers;

std::vector<double> log_softmax(const float* z, int n) {
  double max = -INFINITY, sum = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, static_cast<double>(z[i]));
  for (int i = 0; i < n; ++i) sum += std::exp(z[i] - max);
  std::vector<double> out(n);
  for (int i = 0; i < n; ++i) out[i] = z[i] - max - std::log(sum);
  return out;
}

}  // namespace

TEST_CASE("gemma4 configuration is read per layer", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma4);
  lf::ModelConfig c;
  REQUIRE(lf::load_model_config(f.file, &c).ok());
  CHECK(c.arch == Arch::gemma4);
  CHECK(c.n_embd == 64);
  CHECK(c.n_layer == 3);
  CHECK(c.n_vocab == 48);
  CHECK(c.n_ctx_train == 128);
  CHECK(c.n_swa == 4);
  CHECK(c.final_softcap == 30.0f);
  CHECK(c.query_scale == 1.0f);
  CHECK(c.tied_output);
  const bool sliding[3] = {true, false, true};
  const int head_dim[3] = {32, 64, 32}, n_kv[3] = {1, 1, 3};
  const float base[3] = {1e4f, 1e6f, 1e4f};
  for (int il = 0; il < 3; ++il) {
    const lf::LayerConfig& l = c.layers[il];
    CHECK(l.sliding == sliding[il]);
    CHECK(l.head_dim == head_dim[il]);
    CHECK(l.n_rot == head_dim[il]);
    CHECK(l.n_head == 3);
    CHECK(l.n_head_kv == n_kv[il]);
    CHECK(l.n_ff == 128);
    CHECK(l.rope_base == base[il]);
    CHECK(l.rope_freq_scale == 1.0f);
    CHECK(l.use_freq_factors == !sliding[il]);
    CHECK(l.has_v == sliding[il]);
    CHECK(l.has_output_scale);
  }
}

TEST_CASE("gemma3 configuration: pattern period, query scale, linear rope scaling, no soft-cap", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma3);
  lf::ModelConfig c;
  REQUIRE(lf::load_model_config(f.file, &c).ok());
  CHECK(c.arch == Arch::gemma3);
  CHECK(c.final_softcap == 0.0f);
  CHECK(c.query_scale == Approx(1.0 / std::sqrt(32.0)).epsilon(1e-7));
  CHECK_FALSE(c.tied_output);
  const bool sliding[3] = {true, false, true};
  for (int il = 0; il < 3; ++il) {
    const lf::LayerConfig& l = c.layers[il];
    CHECK(l.sliding == sliding[il]);
    CHECK(l.head_dim == 32);
    CHECK(l.n_head_kv == 1);
    CHECK(l.has_v);
    CHECK_FALSE(l.has_output_scale);
    CHECK_FALSE(l.use_freq_factors);
    CHECK(l.rope_base == (sliding[il] ? 1e4f : 1e6f));
    CHECK(l.rope_freq_scale == (sliding[il] ? 1.0f : 0.125f));
  }
}

TEST_CASE("soft-cap defaults: 30 for gemma4 without the key, read for gemma3 when present", "[engine]") {
  FixtureOptions o;
  o.omit_keys = {"gemma4.final_logit_softcapping"};
  FixtureModel f = fixture(o);
  lf::ModelConfig c;
  REQUIRE(lf::load_model_config(f.file, &c).ok());
  CHECK(c.final_softcap == 30.0f);

  FixtureOptions o3;
  o3.arch = Arch::gemma3;
  o3.edit = [](lf::GgufWriter& w) { w.set_f32("gemma3.final_logit_softcapping", 50.0f); };
  f = fixture(o3);
  REQUIRE(lf::load_model_config(f.file, &c).ok());
  CHECK(c.final_softcap == 50.0f);
}

TEST_CASE("unsupported GGUF files are refused with a message naming the problem", "[engine]") {
  FixtureOptions o;
  SECTION("another architecture") {
    o.omit_keys = {"general.architecture"};
    o.edit = [](lf::GgufWriter& w) { w.set_string("general.architecture", "llama"); };
    require_refused(o, "architecture 'llama'");
  }
  SECTION("mixture of experts") {
    o.edit = [](lf::GgufWriter& w) { w.set_u32("gemma4.expert_count", 8); };
    require_refused(o, "expert_count");
  }
  SECTION("an expert tensor") {
    o.edit = [](lf::GgufWriter& w) {
      (void)w.add_tensor("blk.0.ffn_gate_exps.weight", lf::GgmlType::F32, {64, 2}, [](uint8_t* d, uint64_t n) {
        for (uint64_t i = 0; i < n; ++i) d[i] = 0;
      });
    };
    require_refused(o, "blk.0.ffn_gate_exps.weight");
  }
  // Per-layer embeddings and shared KV are supported (test_e_models.cpp); a dense file that
  // claims them is refused for what it then lacks or cannot map.
  SECTION("per-layer embeddings without their tensors") {
    o.omit_keys = {"gemma4.embedding_length_per_layer_input"};
    o.edit = [](lf::GgufWriter& w) { w.set_u32("gemma4.embedding_length_per_layer_input", 256); };
    require_refused(o, "missing required tensor 'per_layer_token_embd.weight'");
  }
  SECTION("a shared KV layer whose source has another shape") {
    o.edit = [](lf::GgufWriter& w) { w.set_u32("gemma4.attention.shared_kv_layers", 1); };
    require_refused(o, "shared-KV layer 2 (sliding, head dim 32, 3 KV heads) would read layer 0's cache");
  }
  SECTION("key_length != value_length") {
    o.omit_keys = {"gemma4.attention.value_length"};
    o.edit = [](lf::GgufWriter& w) { w.set_u32("gemma4.attention.value_length", 32); };
    require_refused(o, "key_length != value_length");
  }
  SECTION("a missing required key") {
    o.omit_keys = {"gemma4.attention.sliding_window_pattern"};
    require_refused(o, "'gemma4.attention.sliding_window_pattern'");
  }
  SECTION("a missing required gemma3 key") {
    o.arch = Arch::gemma3;
    o.omit_keys = {"gemma3.attention.layer_norm_rms_epsilon"};
    require_refused(o, "'gemma3.attention.layer_norm_rms_epsilon'");
  }
  SECTION("a tensor with the wrong shape") {
    o.omit_keys = {"gemma4.feed_forward_length"};
    o.edit = [](lf::GgufWriter& w) { w.set_u32("gemma4.feed_forward_length", 256); };
    require_refused(o, "tensor 'blk.0.ffn_gate.weight' has ne [64, 128], expected [64, 256]");
  }
  SECTION("a block_count the tensor table does not hold, before anything is sized by it") {
    for (uint32_t n : {2u, 4u, 0x7fffffffu, 1u << 27}) {
      o.omit_keys = {"gemma4.block_count"};
      o.edit = [n](lf::GgufWriter& w) { w.set_u32("gemma4.block_count", n); };
      require_refused(o, "gemma4.block_count = " + std::to_string(n) + ", but the tensor table has blk.N tensors for 3 layers");
    }
  }
  SECTION("a block_count that a single far layer's tensor would allow") {
    o.omit_keys = {"gemma4.block_count"};
    o.edit = [](lf::GgufWriter& w) {
      w.set_u32("gemma4.block_count", 2000000000u);
      (void)w.add_tensor("blk.1999999999.attn_norm.weight", lf::GgmlType::F32, {64, 1}, nullptr);
    };
    require_refused(o, "gemma4.block_count = 2000000000, but the tensor table has blk.N tensors for 4 layers up to blk.1999999999");
  }
  SECTION("widths beyond any Gemma") {
    o.omit_keys = {"gemma4.feed_forward_length"};
    o.edit = [](lf::GgufWriter& w) { w.set_u32("gemma4.feed_forward_length", 1u << 30); };
    require_refused(o, "above the largest width supported");
  }
  SECTION("a NaN rms epsilon") {
    o.omit_keys = {"gemma4.attention.layer_norm_rms_epsilon"};
    o.edit = [](lf::GgufWriter& w) { w.set_f32("gemma4.attention.layer_norm_rms_epsilon", NAN); };
    require_refused(o, "'gemma4.attention.layer_norm_rms_epsilon' is not a finite float32");
  }
  SECTION("a zero rms epsilon") {
    o.omit_keys = {"gemma4.attention.layer_norm_rms_epsilon"};
    o.edit = [](lf::GgufWriter& w) { w.set_f32("gemma4.attention.layer_norm_rms_epsilon", 0.0f); };
    require_refused(o, "layer_norm_rms_epsilon must be positive");
  }
  SECTION("an infinite rope base") {
    o.omit_keys = {"gemma4.rope.freq_base"};
    o.edit = [](lf::GgufWriter& w) { w.set_f32("gemma4.rope.freq_base", INFINITY); };
    require_refused(o, "'gemma4.rope.freq_base' is not a finite float32");
  }
  SECTION("a per-layer array of the wrong length") {
    o.omit_keys = {"gemma4.attention.head_count_kv"};
    o.edit = [](lf::GgufWriter& w) { w.set_array_i32("gemma4.attention.head_count_kv", {1, 1}); };
    require_refused(o, "head_count_kv");
  }
}

TEST_CASE("a tensor the node needs but the host did not load is an error naming it", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma4);
  const lf::TensorLocator all = f.locator();
  const lf::TensorLocator without = [&all](const lf::GgufTensorInfo& t) -> const uint8_t* {
    return t.name == "blk.1.ffn_up.weight" ? nullptr : all(t);
  };
  Model m;
  const Status s = lf::load_model(f.file, without, lf::ModelLoadOptions{{1, 3}, false, false}, &m);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("blk.1.ffn_up.weight") != std::string::npos);
  // A node of other layers does not need it.
  CHECK(lf::load_model(f.file, without, lf::ModelLoadOptions{{2, 3}, false, true}, &m).ok());
}

TEST_CASE("embed scales rows by sqrt(n_embd) and refuses token ids out of range", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma4);
  const Model m = load(f, {{0, 0}});
  const int32_t tok = 5;
  std::vector<float> x(kEmbd);
  REQUIRE(lf::embed(m, &tok, 1, x.data()).ok());
  const float* row = reinterpret_cast<const float*>(m.token_embd.row(5));
  for (int i = 0; i < kEmbd; ++i) CHECK(x[i] == row[i] * 8.0f);
  const int32_t bad[2] = {1, 48};
  const Status s = lf::embed(m, bad, 2, x.data());
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("48") != std::string::npos);
}

TEST_CASE("engine agrees with the reference forward", "[engine]") {
  // Stated tolerances (docs/forward-pass.md), about 1.5x the measured error: max relative error
  // per row of the final hidden state and max |d ln p| over the vocabulary. F32 weights: only
  // the f16 K/V/Q and the GELU table differ (measured gemma4 3.7e-3 / 0.011, gemma3 7.4e-4).
  // Q8_0/Q4_0/F16 weights add Q8_0 activations (measured gemma4 7.4e-2 / 0.25, gemma3
  // 1.8e-2 / 0.054); gemma4 is more sensitive because its attention has no 1/sqrt(D) scale, so
  // its ln p moves with any change of rounding (0.22 before F16 weights' activations stayed f32).
  struct Case { Arch arch; WeightFormat format; double hidden_tol, logp_tol; };
  const Case cases[] = {{Arch::gemma4, WeightFormat::f32, 6e-3, 0.02},
                        {Arch::gemma4, WeightFormat::mixed, 0.11, 0.375},
                        {Arch::gemma3, WeightFormat::f32, 2e-3, 0.01},
                        {Arch::gemma3, WeightFormat::mixed, 4e-2, 0.1}};
  for (const Case& c : cases) {
    const FixtureModel f = fixture(c.arch, c.format);
    const Model m = load(f);
    const int n = 11;  // longer than the window of 4
    const std::vector<float> x = embed_tokens(m, token_sequence(n, 7, 3)).x;
    Session s = session(m);
    const std::vector<float> hidden = forward_rows(m, s, x, 0, n);
    std::vector<float> ref;
    REQUIRE(lf::reference_layers(m, x.data(), n, &ref).ok());
    const double err = max_row_rel_error(hidden, ref, kEmbd);
    INFO("arch " << (c.arch == Arch::gemma4 ? "gemma4" : "gemma3") << " format "
                 << (c.format == WeightFormat::f32 ? "f32" : "mixed") << ": max row relative error " << err);
    CHECK(err <= c.hidden_tol);
    CHECK(err > 0.0);  // the engine really rounds where llama.cpp does

    const int n_vocab = m.config.n_vocab;
    std::vector<float> logits(static_cast<size_t>(n) * n_vocab), ref_logits;
    REQUIRE(lf::head(m, hidden.data(), n, logits.data()).ok());
    REQUIRE(lf::reference_head(m, ref.data(), n, &ref_logits).ok());
    double worst = 0;
    for (int t = 0; t < n; ++t) {
      const std::vector<double> a = log_softmax(logits.data() + t * n_vocab, n_vocab);
      const std::vector<double> b = log_softmax(ref_logits.data() + t * n_vocab, n_vocab);
      for (int i = 0; i < n_vocab; ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    }
    INFO("max |d ln p| " << worst);
    CHECK(worst <= c.logp_tol);
  }
}

TEST_CASE("soft-capped logits stay within the cap", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma4);
  const Model m = load(f);
  std::vector<float> hidden(kEmbd, 0.0f);
  hidden[0] = 1e4f;  // a huge hidden state: raw logits far beyond 30
  std::vector<float> logits(m.config.n_vocab);
  REQUIRE(lf::head(m, hidden.data(), 1, logits.data()).ok());
  for (float z : logits) CHECK(std::fabs(z) <= 30.0f);
}

TEST_CASE("pipeline split: layers [0, k) then [k, L) equal [0, L) bit for bit", "[engine]") {
  for (Arch arch : {Arch::gemma4, Arch::gemma3}) {
    const FixtureModel f = fixture(arch, WeightFormat::mixed);
    const Model whole = load(f);
    const int n = 9;
    const std::vector<float> x = embed_tokens(whole, token_sequence(n, 7, 3)).x;
    Session s = session(whole);
    const std::vector<float> expect = forward_rows(whole, s, x, 0, n);
    for (int k = 0; k <= kLayers; ++k) {
      const Model first = load(f, {{0, k}});
      const Model second = load(f, {{k, kLayers}});
      Session s1 = session(first), s2 = session(second);
      const std::vector<float> mid = forward_rows(first, s1, x, 0, n);
      const std::vector<float> out = forward_rows(second, s2, mid, 0, n);
      INFO("split at " << k);
      CHECK(out == expect);
    }
  }
}

TEST_CASE("cache: whole prompt, chunks and token by token agree bit for bit", "[engine]") {
  // Positions are attended in increasing order whatever the chunking, and every per-row
  // computation is independent of the batch, so the stated tolerance is 0.
  for (Arch arch : {Arch::gemma4, Arch::gemma3}) {
    const FixtureModel f = fixture(arch, WeightFormat::mixed);
    const Model m = load(f);
    const int n = 13;  // > 3 windows
    const std::vector<float> x = embed_tokens(m, token_sequence(n, 7, 3)).x;
    Session whole_session = session(m);
    const std::vector<float> whole = forward_rows(m, whole_session, x, 0, n);

    // Rings of n_swa + attn_chunk - 1 slots: 5 with chunk 2, so they wrap several times.
    for (int attn_chunk : {1, 2, 3, 64}) {
      Session chunked = session(m, 32, attn_chunk);
      std::vector<float> got;
      int pos = 0;
      for (int len : {3, 2, 5, 1, 2}) {
        const std::vector<float> out = forward_rows(m, chunked, x, pos, len);
        got.insert(got.end(), out.begin(), out.end());
        pos += len;
      }
      CHECK(chunked.n_past() == n);
      INFO("attn_chunk " << attn_chunk);
      CHECK(got == whole);

      Session single = session(m, 32, attn_chunk);
      got.clear();
      for (int t = 0; t < n; ++t) {
        const std::vector<float> out = forward_rows(m, single, x, t, 1);
        got.insert(got.end(), out.begin(), out.end());
      }
      CHECK(got == whole);
    }
  }
}

TEST_CASE("last_only returns the last row of the full output", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model m = load(f);
  const int n = 7;
  const std::vector<float> x = embed_tokens(m, token_sequence(n, 7, 3)).x;
  Session a = session(m), b = session(m, 32, 2);
  const std::vector<float> full = forward_rows(m, a, x, 0, n);
  const std::vector<float> last = forward_rows(m, b, x, 0, n, true);
  CHECK(last == std::vector<float>(full.end() - kEmbd, full.end()));
  CHECK(b.n_past() == n);
}

TEST_CASE("session memory: f16 K and V, rings for sliding layers", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma4);
  const Model m = load(f);
  const Session s = session(m, 32, 2);
  // layer 0: ring 4 + 2 - 1 = 5 slots x kv_dim 32; layer 1: 32 x 64; layer 2: 5 x 96; K + V, 2 bytes.
  CHECK(s.bytes() == static_cast<uint64_t>((5 * 32 + 32 * 64 + 5 * 96) * 2 * 2));
}

// s ran x's first `done` positions and was then refused a call: it must still be there, and
// running the rest must give what one fresh run of all of x gives.
void check_resumes_as_fresh(const Model& m, Session& s, const std::vector<float>& x, const std::vector<float>& head,
                            int done) {
  const int n = static_cast<int>(x.size() / kEmbd);
  Session fresh = session(m, 16, 2);
  const std::vector<float> expect = forward_rows(m, fresh, x, 0, n);
  CHECK(s.n_past() == done);
  std::vector<float> got = head;
  const std::vector<float> tail = forward_rows(m, s, x, done, n - done);
  got.insert(got.end(), tail.begin(), tail.end());
  CHECK(got == expect);
}

TEST_CASE("errors leave the session unchanged; a valid call then matches a fresh run", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  const Model m = load(f);
  const std::vector<float> x = embed_tokens(m, token_sequence(12, 7, 3)).x;
  Session s = session(m, 16, 2);
  const std::vector<float> head = forward_rows(m, s, x, 0, 6);
  std::vector<float> out(16 * kEmbd);
  std::vector<float> bad(x.begin() + 6 * kEmbd, x.end());
  Status st;
  SECTION("wrong input length") {
    st = lf::forward(m, s, 6, std::span<const float>(bad.data(), bad.size() - 1), 6,
                     std::span<float>(out.data(), 6 * kEmbd), false);
    CHECK(st.code() == Code::invalid_argument);
  }
  SECTION("n <= 0") {
    st = lf::forward(m, s, 6, bad.data(), 0, out.data(), false);
    CHECK(st.code() == Code::invalid_argument);
  }
  SECTION("NaN in the input") {
    bad[5 * kEmbd + 3] = std::numeric_limits<float>::quiet_NaN();
    st = lf::forward(m, s, 6, bad.data(), 6, out.data(), false);
    CHECK(st.message().find("input is not finite at row 5") != std::string::npos);
  }
  SECTION("infinity in the input") {
    bad[0] = INFINITY;
    st = lf::forward(m, s, 6, bad.data(), 6, out.data(), false);
    CHECK(st.message().find("input is not finite at row 0") != std::string::npos);
  }
  SECTION("wrong start_pos") {
    st = lf::forward(m, s, 2, bad.data(), 6, out.data(), false);
    CHECK(st.code() == Code::failed_precondition);
    CHECK(st.message().find("start_pos 2") != std::string::npos);
    CHECK(st.message().find("n_past 6") != std::string::npos);
  }
  SECTION("context overflow") {
    std::vector<float> long_input(11 * kEmbd, 0.5f);
    st = lf::forward(m, s, 6, long_input.data(), 11, out.data(), false);
    CHECK(st.code() == Code::resource_exhausted);
  }
  INFO(st.message());
  REQUIRE_FALSE(st.ok());
  check_resumes_as_fresh(m, s, x, head, 6);
}

// Sets the f16 scale of block `block` of row `row` of a Q8_0 tensor (34-byte blocks) in the file's bytes.
void set_q8_0_scale(FixtureModel* f, const std::string& name, int64_t row, int64_t block, uint16_t half) {
  const lf::GgufTensorInfo* t = f->file.tensor(name);
  REQUIRE(t != nullptr);
  REQUIRE(t->type == lf::GgmlType::Q8_0);
  const uint64_t at = f->file.data_offset + t->offset + (static_cast<uint64_t>(row) * (t->ne[0] / 32) + block) * 34;
  std::memcpy(f->bytes.data() + at, &half, sizeof half);
}

TEST_CASE("tensors with non-finite numbers are refused at load by name", "[engine]") {
  for (const uint16_t special : {uint16_t{0x7C00}, uint16_t{0xFC00}, uint16_t{0x7E01}}) {  // +inf, -inf, NaN
    INFO("f16 scale " << special);
    FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
    set_q8_0_scale(&f, "blk.1.attn_q.weight", 5, 1, special);
    Model m;
    const Status s = f.load_all(&m);
    CHECK(s.code() == Code::invalid_argument);
    CHECK(s.message() == "tensor 'blk.1.attn_q.weight' has a non-finite scale in block 1 of row 5");
    Model other_layers;
    CHECK(f.load({2, kLayers}, false, true, &other_layers).ok());  // a node without that layer loads
  }
  FixtureModel f = fixture(Arch::gemma4);
  const lf::GgufTensorInfo* norm = f.file.tensor("blk.0.ffn_norm.weight");
  const float nan = NAN;
  std::memcpy(f.bytes.data() + f.file.data_offset + norm->offset + 7 * sizeof(float), &nan, sizeof nan);
  Model m;
  const Status s = f.load_all(&m);
  CHECK(s.message() == "tensor 'blk.0.ffn_norm.weight' has a non-finite value at element 7 of row 0");
}

TEST_CASE("a forward whose output is too large for the next norm is refused and leaves the cache as it was", "[engine]") {
  // Layers [1, 3): layer 1 scales its output by 1.3, so rows of 1.7e19 (their squares still
  // finite) leave it at 2.2e19, whose squares overflow: the sliding layer 2 norms them to zero and
  // stores those keys and values into its ring, and the output is beyond what a next node takes.
  const FixtureModel f = fixture(Arch::gemma4, WeightFormat::mixed);
  Model m;  // the embedding too: the test makes its input rows
  require_ok(f.load({1, kLayers}, true, true, &m));
  const std::vector<float> x = embed_tokens(m, token_sequence(12, 7, 3)).x;

  // attn_chunk 2: the sliding ring holds window 4 + 1 slots, so 6 new positions overwrite every
  // slot the next queries still need.
  Session s = session(m, 16, 2);
  const std::vector<float> head = forward_rows(m, s, x, 0, 6);
  std::vector<float> huge(6 * kEmbd, 1.7e19f);
  std::vector<float> out(6 * kEmbd);
  const Status st = lf::forward(m, s, 6, huge.data(), 6, out.data(), false);
  INFO(st.message());
  CHECK(st.code() == Code::invalid_argument);
  CHECK(st.message().find("output of layers [1, 3) is too large at row 0") != std::string::npos);
  check_resumes_as_fresh(m, s, x, head, 6);
}

TEST_CASE("an input whose squares overflow float32 is refused by name and changes nothing", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma4);
  const Model m = load(f);
  const std::vector<float> x = embed_tokens(m, token_sequence(12, 7, 3)).x;
  Session s = session(m, 16);
  const std::vector<float> head = forward_rows(m, s, x, 0, 6);
  std::vector<float> big(x.begin() + 6 * kEmbd, x.end());
  big[2 * kEmbd + 1] = -2e19f;  // finite; its square is not
  std::vector<float> out(6 * kEmbd);
  const Status st = lf::forward(m, s, 6, big.data(), 6, out.data(), false);
  CHECK(st.code() == Code::invalid_argument);
  CHECK(st.message() == "input is too large at row 2, element 1 (-2e+19): its square overflows float32, which "
                        "RMSNorm sums; |x| must be below 1.8e19");
  check_resumes_as_fresh(m, s, x, head, 6);
}

TEST_CASE("the head refuses hidden states that are not finite or too large, and logits that are all zero", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma4);
  const Model m = load(f);
  std::vector<float> hidden(2 * kEmbd, 0.25f), logits(2 * static_cast<size_t>(m.config.n_vocab));
  SECTION("NaN") {
    hidden[kEmbd + 2] = NAN;
    CHECK(lf::head(m, hidden.data(), 2, logits.data()).message() == "hidden is not finite at row 1, element 2");
  }
  SECTION("a value whose square overflows") {
    hidden[3] = 1e20f;
    CHECK(lf::head(m, hidden.data(), 2, logits.data()).message().starts_with("hidden is too large at row 0, element 3 (1e+20)"));
  }
  SECTION("a row that norms to zero") {
    std::fill(hidden.begin() + kEmbd, hidden.end(), 0.0f);
    CHECK(lf::head(m, hidden.data(), 2, logits.data()).message() ==
          "logits are all zero at row 1: the hidden state carries nothing to sample from");
  }
  SECTION("the same rows are served once they are sound") {
    CHECK(lf::head(m, hidden.data(), 2, logits.data()).ok());
  }
}

TEST_CASE("the debug hook sees named intermediates per layer", "[engine]") {
  const FixtureModel f = fixture(Arch::gemma4);
  const Model m = load(f);
  const std::vector<float> x = embed_tokens(m, token_sequence(3, 7, 3)).x;
  Session s = session(m);
  std::vector<std::string> seen;
  s.debug_hook = [&seen](const char* name, int il, const float*, int n_rows, int n_cols) {
    seen.push_back(std::string(name) + "/" + std::to_string(il) + "/" + std::to_string(n_rows) + "x" +
                   std::to_string(n_cols));
  };
  forward_rows(m, s, x, 0, 3);
  auto has = [&seen](const std::string& s) { return std::find(seen.begin(), seen.end(), s) != seen.end(); };
  CHECK(has("attn_norm/0/3x64"));
  CHECK(has("q_rope/1/3x192"));
  CHECK(has("v_normed/1/3x64"));
  CHECK(has("ffn_out/2/3x64"));
  CHECK(has("layer_out/2/3x64"));
}
