// Truncated attention (approx.h, attention_truncated in attention_kernel.h): each row keeps the
// keys scoring above its median. Checked against references written here from the definition:
// the scores as lf::attention computes them, the median by sorting, the kept-set softmax in f64
// and with lf::attention's f16 steps, the full softmax in f64; then through the engine.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/engine_checks.h"
#include "approx/approx.h"
#include "kernels/attention.h"
#include "model/forward.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace {

using lf::ApproxStats;
using lf::fp16_to_fp32;
using lf::fp32_to_fp16;

struct Case {
  int D, n_head, n_head_kv;
  lf::KeyMask mask;  // a window size converts to one
  int pos0, n_q;
};

std::string describe(const Case& c) {
  return "D=" + std::to_string(c.D) + " heads=" + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) +
         " n_swa=" + std::to_string(c.mask.n_swa) + " span=[" + std::to_string(c.mask.span_begin) + ", " +
         std::to_string(c.mask.span_end) + ") pos0=" + std::to_string(c.pos0) + " n_q=" + std::to_string(c.n_q);
}

// How the keys are drawn.
enum class Keys {
  normal,           // q, k ~ N(0, 1) · spread: scores of a few units
  minus_infinity,   // q > 0; keys at p % 3 != 0 are -inf in every dim: their scores are -inf
  far_below,        // q > 0; keys at p % 3 != 0 are about -30000 · q: scores far below exp's range
};

// The cache holds every position (capacity pos0 + n_q), one layout [positions, n_head_kv, D].
struct Inputs {
  Case c;
  std::vector<float> q;        // [n_q, n_head, D]
  std::vector<uint16_t> k, v;  // [positions, n_head_kv, D]
  lf::KvView view;
};

Inputs make_inputs(const Case& c, Keys keys, float spread, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> positive(0.5f, 1.0f);
  const int positions = c.pos0 + c.n_q;
  const size_t kv_size = static_cast<size_t>(positions) * c.n_head_kv * c.D;
  Inputs in;
  in.c = c;
  in.q.resize(static_cast<size_t>(c.n_q) * c.n_head * c.D);
  in.k.resize(kv_size);
  in.v.resize(kv_size);
  for (float& x : in.q) x = keys == Keys::normal ? normal(rng) : positive(rng);
  for (size_t i = 0; i < kv_size; ++i) {
    const int p = static_cast<int>(i / (static_cast<size_t>(c.n_head_kv) * c.D));
    const bool low = keys != Keys::normal && p % 3 != 0;
    float k = spread * normal(rng);
    if (low) k = keys == Keys::minus_infinity ? -INFINITY : -30000.0f * positive(rng);
    in.k[i] = fp32_to_fp16(k);
    in.v[i] = fp32_to_fp16(normal(rng));
  }
  in.view.k = in.k.data();
  in.view.v = in.v.data();
  in.view.capacity = positions;
  in.view.n_head_kv = c.n_head_kv;
  in.view.head_dim = c.D;
  in.view.first_pos = 0;
  return in;
}

// One (query row, query head) row, from the definitions.
struct Row {
  std::vector<int> keys;        // visible positions, increasing
  std::vector<float> scores;    // [keys] as lf::attention computes them
  std::vector<bool> kept;       // [keys] score > the lower-middle median
  int n_kept = 0;
  double dropped_mass = 0;      // Z_dropped / Z_full in f64
  double v_max = 0;             // max |v| over the visible keys
  const float* q = nullptr;     // [D]
  int g = 0;                    // KV head
};

const uint16_t* key_row(const Inputs& in, const std::vector<uint16_t>& kv, int p, int g) {
  return kv.data() + (static_cast<size_t>(p) * in.c.n_head_kv + g) * in.c.D;
}

Row make_row(const Inputs& in, int i, int h) {
  const Case& c = in.c;
  Row r;
  r.q = in.q.data() + (static_cast<size_t>(i) * c.n_head + h) * c.D;
  r.g = h / (c.n_head / c.n_head_kv);
  std::vector<uint16_t> q16(c.D);
  for (int d = 0; d < c.D; ++d) q16[d] = fp32_to_fp16(r.q[d]);
  const int p1 = c.pos0 + i;
  for (int p = 0; p <= c.mask.last_key(p1); ++p) {
    if (!lf::key_visible(p, p1, c.mask)) continue;
    r.keys.push_back(p);
    r.scores.push_back(lf::attention_score(key_row(in, in.k, p, r.g), q16.data(), c.D));
    for (int d = 0; d < c.D; ++d) r.v_max = std::max(r.v_max, std::fabs(double(fp16_to_fp32(key_row(in, in.v, p, r.g)[d]))));
  }
  std::vector<float> sorted = r.scores;
  std::sort(sorted.begin(), sorted.end());
  const float median = sorted[(sorted.size() - 1) / 2];
  const float m = sorted.back();
  double z_full = 0, z_dropped = 0;
  for (float s : r.scores) {
    const double e = std::exp(double(s) - double(m));
    z_full += e;
    r.kept.push_back(s > median);
    if (s > median) {
      ++r.n_kept;
    } else {
      z_dropped += e;
    }
  }
  r.dropped_mass = z_dropped / z_full;
  return r;
}

// Softmax in f64 over the row's keys (only the kept ones with kept_only) -> out [D]
std::vector<double> softmax_f64(const Inputs& in, const Row& r, bool kept_only) {
  const int D = in.c.D;
  double m = -INFINITY;
  for (size_t k = 0; k < r.keys.size(); ++k) {
    if (!kept_only || r.kept[k]) m = std::max(m, double(r.scores[k]));
  }
  std::vector<double> out(D, 0.0);
  double z = 0;
  for (size_t k = 0; k < r.keys.size(); ++k) {
    if (kept_only && !r.kept[k]) continue;
    const double e = std::exp(double(r.scores[k]) - m);
    z += e;
    const uint16_t* v = key_row(in, in.v, r.keys[k], r.g);
    for (int d = 0; d < D; ++d) out[d] += e * fp16_to_fp32(v[d]);
  }
  for (double& x : out) x /= z;
  return out;
}

// lf::attention's steps (ops/attention.cpp: online softmax in f32, V summed in f16 rounded after
// every key) over the kept keys only -> out [D]
std::vector<float> kept_keys_f16(const Inputs& in, const Row& r) {
  const int D = in.c.D;
  float M = -INFINITY, S = 0.0f;
  std::vector<uint16_t> acc(D, 0);
  for (size_t k = 0; k < r.keys.size(); ++k) {
    if (!r.kept[k]) continue;
    const float s = r.scores[k];
    const float M_old = M;
    float ms = 1.0f, vs = 1.0f;
    if (s > M) {
      M = s;
      ms = expf(M_old - M);
      for (int d = 0; d < D; ++d) acc[d] = fp32_to_fp16(fp16_to_fp32(acc[d]) * ms);
    } else {
      vs = expf(s - M);
    }
    const uint16_t* v = key_row(in, in.v, r.keys[k], r.g);
    for (int d = 0; d < D; ++d) acc[d] = fp32_to_fp16(std::fma(fp16_to_fp32(v[d]), vs, fp16_to_fp32(acc[d])));
    S = S * ms + vs;
  }
  std::vector<float> out(D);
  for (int d = 0; d < D; ++d) out[d] = fp16_to_fp32(acc[d]) * (S == 0.0f ? 0.0f : 1.0f / S);
  return out;
}

// Worst case of the f16 accumulator against exact arithmetic, relative to max|V|: every key
// rounds the accumulator once (and a new max twice), each time by at most half an f16 ulp,
// 2^-11 of a value whose share of the final, normalized sum is at most max|V|.
double f16_tolerance(int n_kept, double v_max) { return (2.0 * n_kept + 2.0) * 0x1p-11 * v_max + 1e-6; }

// memcmp, not std::bit_cast: Emscripten 3.1.6's libc++ lacks it.
bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

struct Run {
  std::vector<float> out;
  ApproxStats stats;
};

Run truncated(const Inputs& in, float threshold, lf::AttentionWorkspace* ws) {
  Run r;
  r.out.assign(in.q.size(), 777.0f);
  lf::attention_truncated(in.q.data(), in.c.n_q, in.c.pos0, in.c.n_head, in.view, in.c.mask, 1.0f, threshold,
                          r.out.data(), ws, &r.stats);
  return r;
}

std::vector<float> exact(const Inputs& in, lf::AttentionWorkspace* ws) {
  std::vector<float> out(in.q.size(), -777.0f);
  lf::attention_tiled(in.q.data(), in.c.n_q, in.c.pos0, in.c.n_head, in.view, in.c.mask, 1.0f, out.data(), ws);
  return out;
}

const float* out_row(const std::vector<float>& out, const Case& c, int i, int h) {
  return out.data() + (static_cast<size_t>(i) * c.n_head + h) * c.D;
}

const Case kShapes[] = {
    {1, 1, 1, 0, 0, 9},     {7, 2, 1, 0, 3, 5},    {32, 3, 3, 0, 40, 17}, {67, 2, 2, 5, 20, 17},
    {32, 8, 1, 0, 100, 1},  {64, 2, 1, 16, 60, 33}, {16, 1, 1, 3, 0, 12},
    // Head dims past the score's 64 f32 lanes, with and without leftover elements.
    {80, 2, 1, 0, 30, 1},   {96, 2, 1, 7, 12, 9},  {192, 8, 1, 0, 20, 3}, {256, 2, 1, 9, 30, 1},
    {512, 8, 1, 0, 9, 4},
    // Non-causal spans: a whole call, and one inside a prompt under a window.
    {64, 2, 1, lf::KeyMask(0, 0, 24), 0, 24}, {32, 2, 1, lf::KeyMask(6, 14, 25), 10, 20},
};

}  // namespace

TEST_CASE("truncated rows equal the kept-set softmax: f16 steps to the bit, f64 within f16 error", "[approx]") {
  lf::AttentionWorkspace ws;
  bool truncation_visible = false;  // some row where truncating moves the output beyond f16 error
  for (const Case& c : kShapes) {
    for (float spread : {0.3f, 1.0f, 3.0f}) {
      INFO(describe(c) << " spread=" << spread);
      const Inputs in = make_inputs(c, Keys::normal, spread, 7);
      // Threshold 1: only rows that would keep nothing fall back.
      const Run run = truncated(in, 1.0f, &ws);
      const std::vector<float> full = exact(in, &ws);
      ApproxStats expect;
      for (int i = 0; i < c.n_q; ++i) {
        for (int h = 0; h < c.n_head; ++h) {
          INFO("row " << i << " head " << h);
          const Row r = make_row(in, i, h);
          const float* got = out_row(run.out, c, i, h);
          expect.attention_rows++;
          expect.v_keys_total += static_cast<int64_t>(r.keys.size());
          if (r.n_kept == 0) {
            expect.fallback_rows++;
            expect.v_keys_kept += static_cast<int64_t>(r.keys.size());
            for (int d = 0; d < c.D; ++d) REQUIRE(same_bits(got[d], out_row(full, c, i, h)[d]));
            continue;
          }
          expect.truncated_rows++;
          expect.v_keys_kept += r.n_kept;
          const std::vector<float> f16_steps = kept_keys_f16(in, r);
          const std::vector<double> kept = softmax_f64(in, r, true);
          const std::vector<double> all = softmax_f64(in, r, false);
          const double tol = f16_tolerance(r.n_kept, r.v_max);
          for (int d = 0; d < c.D; ++d) {
            REQUIRE(same_bits(got[d], f16_steps[d]));
            REQUIRE(std::fabs(got[d] - kept[d]) <= tol);
            if (std::fabs(kept[d] - all[d]) > 2 * tol) truncation_visible = true;
          }
        }
      }
      REQUIRE(run.stats.attention_rows == expect.attention_rows);
      REQUIRE(run.stats.truncated_rows == expect.truncated_rows);
      REQUIRE(run.stats.fallback_rows == expect.fallback_rows);
      REQUIRE(run.stats.v_keys_total == expect.v_keys_total);
      REQUIRE(run.stats.v_keys_kept == expect.v_keys_kept);
      REQUIRE(run.stats.v_keys_kept * 2 <= run.stats.v_keys_total + run.stats.fallback_rows);
    }
  }
  REQUIRE(truncation_visible);
}

TEST_CASE("rows whose dropped keys weigh exactly 0 give the exact kernel's bytes", "[approx]") {
  lf::AttentionWorkspace ws;
  for (Keys keys : {Keys::minus_infinity, Keys::far_below}) {
    for (const Case& c : kShapes) {
      // -inf as a row's first key makes the exact kernel's first weight exp(-inf - -inf) = NaN:
      // no window there, so position 0 (a normal key) comes first in every row.
      if (keys == Keys::minus_infinity && c.mask.n_swa > 0) continue;
      INFO(describe(c) << " keys=" << static_cast<int>(keys));
      const Inputs in = make_inputs(c, keys, 1.0f, 11);
      const Run run = truncated(in, 0.0f, &ws);
      const std::vector<float> full = exact(in, &ws);
      std::vector<float> reference(in.q.size());
      lf::attention(in.q.data(), c.n_q, c.pos0, c.n_head, in.view, c.mask, 1.0f, reference.data());
      for (size_t x = 0; x < full.size(); ++x) {
        INFO("element " << x);
        REQUIRE(std::isfinite(full[x]));
        REQUIRE(same_bits(run.out[x], full[x]));
        REQUIRE(same_bits(run.out[x], reference[x]));
      }
      // Threshold 0 still truncates them (no mass is dropped), and work was skipped.
      int64_t single_key_rows = 0;
      for (int i = 0; i < c.n_q; ++i) {
        for (int h = 0; h < c.n_head; ++h) {
          const Row r = make_row(in, i, h);
          if (r.keys.size() == 1) {
            single_key_rows++;
          } else {
            REQUIRE(r.dropped_mass == 0.0);
          }
        }
      }
      REQUIRE(run.stats.fallback_rows == single_key_rows);
      REQUIRE(run.stats.truncated_rows == run.stats.attention_rows - single_key_rows);
      REQUIRE(run.stats.v_keys_kept < run.stats.v_keys_total);
      REQUIRE(run.stats.max_dropped_mass == 0.0);
      REQUIRE(run.stats.max_error_bound == 0.0);
    }
  }
}

TEST_CASE("the reported bound holds on random rows", "[approx]") {
  lf::AttentionWorkspace ws;
  int rows_checked = 0;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    for (float spread : {0.2f, 0.5f, 1.0f, 2.0f}) {
      const Case c{16, 2, 1, 0, 30, 24};
      INFO("seed=" << seed << " spread=" << spread);
      const Inputs in = make_inputs(c, Keys::normal, spread, seed);
      const Run run = truncated(in, 1.0f, &ws);
      double max_bound = 0, max_mass = 0;
      for (int i = 0; i < c.n_q; ++i) {
        for (int h = 0; h < c.n_head; ++h) {
          const Row r = make_row(in, i, h);
          const double bound = 2.0 * r.dropped_mass * r.v_max;
          max_bound = std::max(max_bound, bound);
          max_mass = std::max(max_mass, r.dropped_mass);
          const std::vector<double> kept = softmax_f64(in, r, true);
          const std::vector<double> all = softmax_f64(in, r, false);
          const float* got = out_row(run.out, c, i, h);
          const double tol = f16_tolerance(r.n_kept, r.v_max);
          for (int d = 0; d < c.D; ++d) {
            INFO("row " << i << " head " << h << " d " << d << " mass " << r.dropped_mass);
            // The bound in exact arithmetic (docs/approximate.md), then for the kernel's output,
            // whose f16 accumulator adds its own rounding (as the exact kernel's does).
            REQUIRE(std::fabs(kept[d] - all[d]) <= bound * (1 + 1e-9));
            REQUIRE(std::fabs(got[d] - all[d]) <= bound + tol);
          }
          rows_checked++;
        }
      }
      REQUIRE(run.stats.max_error_bound == Approx(max_bound).epsilon(1e-9));
      REQUIRE(run.stats.max_dropped_mass == Approx(max_mass).epsilon(1e-9));
      REQUIRE(run.stats.max_dropped_mass > 0.0);
    }
  }
  REQUIRE(rows_checked == 6 * 4 * 24 * 2);
}

TEST_CASE("a row falls back to the exact bytes just above its threshold, not at it", "[approx]") {
  lf::AttentionWorkspace ws;
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    // Decode: one query, one head, 40 keys, scores of about one unit.
    const Case c{32, 1, 1, 0, 39, 1};
    const Inputs in = make_inputs(c, Keys::normal, 0.2f, seed);
    const Row r = make_row(in, 0, 0);
    INFO("seed=" << seed << " dropped mass " << r.dropped_mass);
    REQUIRE(r.dropped_mass > 0.01);
    // The floats just below and at (or just above) the row's dropped mass.
    float at = static_cast<float>(r.dropped_mass);
    if (static_cast<double>(at) < r.dropped_mass) at = std::nextafter(at, 2.0f);
    const float below = std::nextafter(at, 0.0f);
    REQUIRE(static_cast<double>(below) < r.dropped_mass);
    REQUIRE(static_cast<double>(at) >= r.dropped_mass);

    const std::vector<float> full = exact(in, &ws);
    const Run fallback = truncated(in, below, &ws);
    REQUIRE(fallback.stats.fallback_rows == 1);
    REQUIRE(fallback.stats.truncated_rows == 0);
    REQUIRE(fallback.stats.v_keys_kept == 40);
    REQUIRE(fallback.stats.max_error_bound == 0.0);
    for (int d = 0; d < c.D; ++d) REQUIRE(same_bits(fallback.out[d], full[d]));

    const Run kept = truncated(in, at, &ws);
    REQUIRE(kept.stats.fallback_rows == 0);
    REQUIRE(kept.stats.truncated_rows == 1);
    REQUIRE(kept.stats.v_keys_kept == r.n_kept);
    REQUIRE(kept.stats.v_keys_kept < 40);
    const std::vector<float> f16_steps = kept_keys_f16(in, r);
    bool differs = false;
    for (int d = 0; d < c.D; ++d) {
      REQUIRE(same_bits(kept.out[d], f16_steps[d]));
      differs = differs || !same_bits(kept.out[d], full[d]);
    }
    REQUIRE(differs);
  }
}

TEST_CASE("rows with one key, equal scores, a non-finite score or value fall back", "[approx]") {
  lf::AttentionWorkspace ws;
  const Case c{8, 1, 1, 0, 0, 6};
  Inputs in = make_inputs(c, Keys::normal, 1.0f, 3);
  // All keys the same: every score equals the median, nothing would be kept.
  for (size_t x = 0; x < in.k.size(); ++x) in.k[x] = in.k[x % c.D];
  const Run equal = truncated(in, 1.0f, &ws);
  REQUIRE(equal.stats.fallback_rows == c.n_q);
  const std::vector<float> full = exact(in, &ws);
  for (size_t x = 0; x < full.size(); ++x) REQUIRE(same_bits(equal.out[x], full[x]));
  // An infinite value: the bound would be infinite.
  in = make_inputs(c, Keys::normal, 1.0f, 3);
  in.v[3 * c.D] = fp32_to_fp16(INFINITY);
  const Run inf_value = truncated(in, 1.0f, &ws);
  REQUIRE(inf_value.stats.fallback_rows == 1 + (c.n_q - 3));  // row 0 (one key) and rows that see key 3
  REQUIRE(inf_value.stats.max_error_bound < INFINITY);
  // Key 2 infinite in every dim: q has both signs, so its score is NaN.
  in = make_inputs(c, Keys::normal, 1.0f, 3);
  for (int d = 0; d < c.D; ++d) in.k[2 * c.D + d] = fp32_to_fp16(INFINITY);
  const Run nan_score = truncated(in, 1.0f, &ws);
  REQUIRE(nan_score.stats.fallback_rows == 1 + (c.n_q - 2));  // row 0 and rows that see key 2
}

// --- through the engine ---
namespace {

using lf::test::FixtureModel;
using lf::test::same_bytes;

// A prompt of n tokens, then 3 decode steps: every output row of every call, in order. The
// session's approximate options are set before the first call; *stats gets the prompt's.
std::vector<float> engine_trace(const FixtureModel& f, int n_threads, const lf::ApproxOptions& approx, int n,
                                ApproxStats* prompt_stats) {
  const lf::Model m = lf::test::load(f, {{0, -1}, n_threads});
  lf::Session s = lf::test::session(m, lf::test::kModelContext);
  s.approx = approx;
  const std::vector<int32_t> tokens = lf::test::token_sequence(n + 3, 7, 3, m.config.n_vocab);
  const std::vector<float> x = lf::test::embed_tokens(m, tokens).x;
  std::vector<float> trace = lf::test::forward_rows(m, s, x, 0, n);
  *prompt_stats = s.last.approx_stats();
  for (int t = n; t < n + 3; ++t) {
    const std::vector<float> y = lf::test::forward_rows(m, s, x, t, 1);
    trace.insert(trace.end(), y.begin(), y.end());
  }
  // The last call was one decode step: one query row per head and layer.
  const ApproxStats decode = s.last.approx_stats();
  if (approx.truncated_attention) {
    REQUIRE(decode.attention_rows == 3 * lf::test::kFixtureLayers);
  } else {
    REQUIRE(decode.attention_rows == 0);
  }
  return trace;
}

}  // namespace

TEST_CASE("engine: off by default and exact when off; truncated output the same for any thread count", "[approx]") {
  const FixtureModel f = lf::test::fixture(lf::Arch::gemma4, lf::test::WeightFormat::mixed);
  const int n = 100;  // the global layer's rows see up to 100 keys
  REQUIRE(lf::ApproxOptions().truncated_attention == false);

  ApproxStats stats;
  const std::vector<float> exact_trace = engine_trace(f, 1, lf::ApproxOptions(), n, &stats);
  REQUIRE(stats.attention_rows == 0);
  REQUIRE(std::all_of(exact_trace.begin(), exact_trace.end(), [](float x) { return std::isfinite(x); }));

  lf::ApproxOptions off;
  off.truncation_threshold = 1.0f;  // a threshold alone switches nothing on
  lf::ApproxOptions all_fall_back;
  all_fall_back.truncated_attention = true;
  all_fall_back.truncation_threshold = 0.0f;  // every row drops some mass: every row is exact
  lf::ApproxOptions on;
  on.truncated_attention = true;
  on.truncation_threshold = 1.0f;

  std::vector<float> first_on;
  ApproxStats first_stats;
  for (int threads : {1, 2, 3}) {
    INFO("threads " << threads);
    REQUIRE(same_bytes(engine_trace(f, threads, off, n, &stats), exact_trace));
    REQUIRE(same_bytes(engine_trace(f, threads, all_fall_back, n, &stats), exact_trace));
    REQUIRE(stats.fallback_rows == stats.attention_rows);
    REQUIRE(stats.v_keys_kept == stats.v_keys_total);

    const std::vector<float> truncated_trace = engine_trace(f, threads, on, n, &stats);
    REQUIRE(std::all_of(truncated_trace.begin(), truncated_trace.end(), [](float x) { return std::isfinite(x); }));
    REQUIRE_FALSE(same_bytes(truncated_trace, exact_trace));
    if (threads == 1) {
      first_on = truncated_trace;
      first_stats = stats;
    }
    REQUIRE(same_bytes(truncated_trace, first_on));
    REQUIRE(stats.attention_rows == first_stats.attention_rows);
    REQUIRE(stats.v_keys_kept == first_stats.v_keys_kept);
    REQUIRE(stats.max_error_bound == first_stats.max_error_bound);
  }
  // 3 layers × 3 query heads × 100 rows; a row keeps at most half of its keys, and random
  // scores rarely tie, so close to half overall.
  REQUIRE(first_stats.attention_rows == 3 * 3 * n);
  REQUIRE(first_stats.truncated_rows + first_stats.fallback_rows == first_stats.attention_rows);
  REQUIRE(first_stats.v_keys_kept <= first_stats.v_keys_total);
  const double kept = static_cast<double>(first_stats.v_keys_kept) / static_cast<double>(first_stats.v_keys_total);
  INFO("kept " << kept);
  REQUIRE(kept > 0.4);
  REQUIRE(kept < 0.55);
  REQUIRE(first_stats.max_error_bound > 0.0);
}

// Run: lf_tests "[approx_bench]" (natively, or node lf_tests.js under Emscripten).
TEST_CASE("truncated attention bench: 31B shapes, exact vs truncated", "[.][approx_bench]") {
  struct Shape { const char* name; int D, group, n_kv, n_swa; };
  const Shape shapes[] = {{"sliding D=256 2q/kv x16", 256, 2, 16, 1024}, {"global  D=512 8q/kv x4", 512, 8, 4, 0}};
  struct Phase { const char* name; int n_past, n_q; };
  const Phase phases[] = {{"prompt 128 @1024", 1024, 128}, {"decode @2048", 2048, 1}};
  constexpr int kChunk = 64;
  lf::AttentionWorkspace ws;
  for (const Shape& s : shapes) {
    for (const Phase& p : phases) {
      for (float score_sd : {1.0f, 3.0f}) {
        // One KV head's cache per view, as the engine reads it; q, v ~ N(0, 1), k scaled so that
        // scores have the standard deviation score_sd.
        const Case c{s.D, s.group, 1, s.n_swa, p.n_past, p.n_q};
        std::vector<Inputs> heads;
        for (int h = 0; h < s.n_kv; ++h) {
          heads.push_back(make_inputs(c, Keys::normal, score_sd / std::sqrt(static_cast<float>(s.D)), 100 + h));
        }
        std::vector<float> out_exact(heads[0].q.size()), out_trunc(out_exact.size());
        double ms[2] = {1e30, 1e30};  // the best of 2: the machine is shared
        ApproxStats stats;
        // Each head's chunks as the engine calls the kernel -> out [n_q, group, D]
        auto run_head = [&](const Inputs& in, bool approx, std::vector<float>& out) {
          for (int c0 = 0; c0 < p.n_q; c0 += kChunk) {
            const int rows = std::min(kChunk, p.n_q - c0);
            const size_t off = static_cast<size_t>(c0) * s.group * s.D;
            if (approx) {
              lf::attention_truncated(in.q.data() + off, rows, p.n_past + c0, s.group, in.view, s.n_swa, 1.0f, 0.15f,
                                      out.data() + off, &ws, &stats);
            } else {
              lf::attention_tiled(in.q.data() + off, rows, p.n_past + c0, s.group, in.view, s.n_swa, 1.0f,
                                  out.data() + off, &ws);
            }
          }
        };
        for (int run = 0; run < 4; ++run) {
          const int approx = run % 2;
          const auto t0 = std::chrono::steady_clock::now();
          for (const Inputs& in : heads) run_head(in, approx, approx ? out_trunc : out_exact);
          ms[approx] = std::min(ms[approx], std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        stats = ApproxStats();
        double max_error = 0;
        for (const Inputs& in : heads) {
          run_head(in, false, out_exact);
          run_head(in, true, out_trunc);
          for (size_t x = 0; x < out_exact.size(); ++x) max_error = std::max(max_error, double(std::fabs(out_exact[x] - out_trunc[x])));
        }
        std::printf("%-24s %-17s score sd %.0f  exact %8.2f ms  truncated %8.2f ms  x%.2f  V skipped %4.1f%%  "
                    "fallback %5.1f%%  max bound %.4f  max error %.4f\n",
                    s.name, p.name, score_sd, ms[0], ms[1], ms[0] / ms[1], 100.0 * stats.v_work_skipped(),
                    100.0 * static_cast<double>(stats.fallback_rows) / static_cast<double>(stats.attention_rows),
                    stats.max_error_bound, max_error);
      }
    }
  }
  SUCCEED();
}
