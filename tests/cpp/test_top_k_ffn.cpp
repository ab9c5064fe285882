// Top-K gate FFN (approx.h, docs/approximate.md): per row, only the features of largest
// |gelu(gate)| keep their up projection and their share of ffn_down.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "support/engine_checks.h"
#include "model/forward.h"
#include "model/session.h"
#include "ops/ops.h"

namespace {

using lf::ApproxOptions;
using lf::ApproxStats;
using lf::test::FixtureModel;
using lf::test::Layout;
using lf::test::fixture;
using lf::test::same_bytes;

constexpr int kFixtureFf = 128;

// The brute-force selection: sort indices by (|a| descending, NaN first, index ascending).
std::vector<uint8_t> brute_top_k(const std::vector<float>& a, int k) {
  std::vector<int> order(a.size());
  std::iota(order.begin(), order.end(), 0);
  auto magnitude = [&](int i) { return std::isnan(a[i]) ? INFINITY : std::fabs(a[i]); };
  std::stable_sort(order.begin(), order.end(), [&](int i, int j) {
    if (std::isnan(a[i]) != std::isnan(a[j])) return std::isnan(a[i]);
    return magnitude(i) > magnitude(j);
  });
  std::vector<uint8_t> keep(a.size(), 0);
  for (int i = 0; i < k && i < static_cast<int>(a.size()); ++i) keep[order[i]] = 1;
  return keep;
}

struct Run {
  std::vector<float> out;      // the prompt's rows, then each decode row
  std::vector<float> ffn_out;  // layer 0's FFN output for the prompt (debug hook)
  ApproxStats prompt_stats;
};

constexpr int kPrompt = 24;

// feature_major: ffn_down laid out feature-major, in a private copy of the file's bytes.
Run run(const FixtureModel& file, const ApproxOptions& approx, int n_threads, bool feature_major = false) {
  const Layout layout = feature_major ? Layout::feature_major : Layout::file;
  const auto node = lf::test::load_copy(file, {{0, -1}, n_threads, layout});
  const lf::Model& m = node->m;
  REQUIRE((m.layer(0).ffn_down.layout == lf::WeightLayout::feature_major) == (feature_major && file.file.tensor("blk.0.ffn_down.weight")->type == lf::GgmlType::Q8_0));
  lf::Session s = lf::test::session(m, lf::test::kModelContext);
  s.approx = approx;
  Run r;
  s.debug_hook = [&](const char* name, int il, const float* x, int n_rows, int n_cols) {
    if (il == 0 && std::string(name) == "ffn_out" && r.ffn_out.empty()) r.ffn_out.assign(x, x + n_rows * n_cols);
  };
  const std::vector<int32_t> tokens = lf::test::token_sequence(kPrompt + 2, 11, 1, m.config.n_vocab);
  const std::vector<float> x = lf::test::embed_tokens(m, tokens).x;
  r.out = lf::test::forward_rows(m, s, x, 0, kPrompt);
  r.prompt_stats = s.last.approx_stats();
  for (int t = kPrompt; t < kPrompt + 2; ++t) {
    const std::vector<float> y = lf::test::forward_rows(m, s, x, t, 1);
    r.out.insert(r.out.end(), y.begin(), y.end());
  }
  return r;
}

ApproxOptions top_k(float k, float threshold = 1.0f) {
  ApproxOptions o;
  o.ffn_top_k = k;
  o.ffn_top_k_threshold = threshold;
  return o;
}

}  // namespace

TEST_CASE("top-K selection equals a brute-force ranking, ties to the lower index", "[approx]") {
  std::mt19937 rng(7);
  std::vector<uint64_t> keys;
  for (int n : {1, 2, 31, 32, 33, 200}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> a(static_cast<size_t>(n));
      // Few distinct magnitudes of both signs, so ties are common; sometimes a NaN or an inf.
      for (float& v : a) v = static_cast<float>(static_cast<int>(rng() % 7) - 3) * 0.25f;
      if (trial % 5 == 1) a[rng() % n] = NAN;
      if (trial % 5 == 2) a[rng() % n] = -INFINITY;
      for (int k : {0, 1, n / 2, n - 1, n}) {
        INFO("n " << n << ", k " << k << ", trial " << trial);
        std::vector<uint8_t> keep(a.size(), 2);
        const double dropped = lf::select_top_k(a.data(), n, k, &keys, keep.data());
        REQUIRE(keep == brute_top_k(a, k));
        double total = 0, d = 0;
        for (int i = 0; i < n; ++i) {
          total += std::fabs(static_cast<double>(a[i]));
          if (!keep[i]) d += std::fabs(static_cast<double>(a[i]));
        }
        if (std::isnan(total) || std::isinf(total)) {
          REQUIRE((std::isnan(dropped) || dropped == d / total));
        } else {
          REQUIRE(dropped == (total == 0 ? 0.0 : d / total));
        }
      }
    }
  }
}

TEST_CASE("top-K FFN at full width is bit-identical to the dense FFN", "[approx]") {
  for (auto format : {lf::test::WeightFormat::f32, lf::test::WeightFormat::mixed}) {
    const FixtureModel f = fixture(lf::Arch::gemma4, format);
    const Run dense = run(f, ApproxOptions(), 1);
    REQUIRE(dense.prompt_stats.ffn_rows == 0);
    ApproxOptions per_layer;
    per_layer.ffn_top_k_layers = {{0, 1.0f}, {1, static_cast<float>(kFixtureFf)}, {2, 1000.0f}};
    for (const ApproxOptions& full : {top_k(1.0f), top_k(static_cast<float>(kFixtureFf)), per_layer}) {
      for (int threads : {1, 2, 3}) {
        INFO("threads " << threads);
        const Run r = run(f, full, threads);
        REQUIRE(same_bytes(r.out, dense.out));
        REQUIRE(r.prompt_stats.ffn_rows == kPrompt * lf::test::kFixtureLayers);
        REQUIRE(r.prompt_stats.ffn_features_kept == r.prompt_stats.ffn_features_total);
        REQUIRE(r.prompt_stats.ffn_fallback_rows == 0);
      }
    }
  }
}

TEST_CASE("top-K FFN: the error falls as K grows, and the output is the same for any thread count", "[approx]") {
  const FixtureModel f = fixture(lf::Arch::gemma4, lf::test::WeightFormat::mixed);
  const Run dense = run(f, ApproxOptions(), 1);
  // Layer 0 sees the same input whatever K is: its FFN output isolates the mode's error.
  std::vector<double> errors;
  for (int k = 16; k <= kFixtureFf; k += 16) {
    const Run r = run(f, top_k(static_cast<float>(k)), 1);
    REQUIRE(r.prompt_stats.ffn_features_kept == static_cast<int64_t>(k) * kPrompt * lf::test::kFixtureLayers);
    double err = 0;
    for (size_t i = 0; i < r.ffn_out.size(); ++i) {
      const double d = static_cast<double>(r.ffn_out[i]) - dense.ffn_out[i];
      err += d * d;
    }
    errors.push_back(std::sqrt(err));
  }
  INFO("errors " << Catch::Detail::stringify(errors));
  for (size_t i = 1; i < errors.size(); ++i) REQUIRE(errors[i] < errors[i - 1]);
  REQUIRE(errors.back() == 0.0);
  const Run half = run(f, top_k(0.5f), 1);
  REQUIRE_FALSE(same_bytes(half.out, dense.out));
  REQUIRE(half.prompt_stats.ffn_features_skipped() == Approx(0.5));
  REQUIRE(half.prompt_stats.max_dropped_gate_mass > 0.0);
  REQUIRE(half.prompt_stats.max_dropped_gate_mass < 0.5);  // the dropped half is the smaller half
  for (int threads : {1, 2, 3}) {
    for (bool feature_major : {false, true}) {
      INFO("threads " << threads << (feature_major ? ", ffn_down feature-major" : ""));
      const Run r = run(f, top_k(0.5f), threads, feature_major);
      REQUIRE(same_bytes(r.out, half.out));
      REQUIRE(r.prompt_stats.ffn_features_kept == half.prompt_stats.ffn_features_kept);
      REQUIRE(r.prompt_stats.max_dropped_gate_mass == half.prompt_stats.max_dropped_gate_mass);
    }
  }
}

TEST_CASE("top-K FFN falls back to the dense row above its threshold", "[approx]") {
  const FixtureModel f = fixture(lf::Arch::gemma4, lf::test::WeightFormat::mixed);
  const Run dense = run(f, ApproxOptions(), 1);
  // Threshold 0: every row drops some mass, so every row runs dense.
  const Run all_dense = run(f, top_k(0.5f, 0.0f), 2);
  REQUIRE(same_bytes(all_dense.out, dense.out));
  REQUIRE(all_dense.prompt_stats.ffn_fallback_rows == all_dense.prompt_stats.ffn_rows);
  REQUIRE(all_dense.prompt_stats.ffn_features_kept == all_dense.prompt_stats.ffn_features_total);
  // Just above the largest dropped share seen, nothing falls back; just below it, some rows do.
  const Run free = run(f, top_k(0.5f, 1.0f), 1);
  const double worst = free.prompt_stats.max_dropped_gate_mass;
  const Run above = run(f, top_k(0.5f, static_cast<float>(worst) * 1.001f), 1);
  REQUIRE(above.prompt_stats.ffn_fallback_rows == 0);
  const Run below = run(f, top_k(0.5f, static_cast<float>(worst) * 0.999f), 1);
  REQUIRE(below.prompt_stats.ffn_fallback_rows > 0);
  REQUIRE(below.prompt_stats.ffn_fallback_rows < below.prompt_stats.ffn_rows);
}
