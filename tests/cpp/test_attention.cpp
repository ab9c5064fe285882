// The tiled attention kernel (src/kernels/attention.h) against the scalar
// reference lf::attention, byte for byte: the engine's agreement with llama.cpp rests on the
// reference's f16 rounding sequence, so the fast kernel may not move a single bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_steps.h"
#include "kernels/exp_ggml.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace {

// How the cache and query values are drawn.
enum class Values {
  normal,       // q, k ~ N(0, 1), v ~ N(0, 1): scores of a few units
  saturating,   // q, k ~ N(0, 30): scores in the thousands, most weights underflow to 0
  dominant,     // ordinary keys, but every 7th key is q's direction × 50: it takes the max
  equal,        // every key the same row: all scores equal
  extremes,     // k, v at f16 extremes: ±65504, subnormals, ±0, tiny normals; q small
};

struct Case {
  int D, n_head, n_head_kv;
  int capacity;
  lf::KeyMask mask;  // a window size converts to one
  int pos0, n_q;
  Values values = Values::normal;
};

std::string describe(const Case& c) {
  return "D=" + std::to_string(c.D) + " heads=" + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) +
         " capacity=" + std::to_string(c.capacity) + " n_swa=" + std::to_string(c.mask.n_swa) +
         " span=[" + std::to_string(c.mask.span_begin) + ", " + std::to_string(c.mask.span_end) + ")" +
         " pos0=" + std::to_string(c.pos0) + " n_q=" + std::to_string(c.n_q) +
         " values=" + std::to_string(static_cast<int>(c.values));
}

uint16_t extreme_half(std::mt19937& rng) {
  static const uint16_t kHalves[] = {0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0000, 0x8000, 0x0400, 0x8400, 0x3C00, 0x7800};
  return kHalves[rng() % (sizeof kHalves / sizeof kHalves[0])];
}

struct Inputs {
  std::vector<float> q;        // [n_q, n_head, D]
  std::vector<uint16_t> k, v;  // [capacity, n_head_kv, D]
  lf::KvView view;
};

Inputs make_inputs(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t kv_size = static_cast<size_t>(c.capacity) * c.n_head_kv * c.D;
  Inputs in;
  in.q.resize(static_cast<size_t>(c.n_q) * c.n_head * c.D);
  in.k.resize(kv_size);
  in.v.resize(kv_size);
  const float q_scale = c.values == Values::saturating ? 30.0f : c.values == Values::extremes ? 1e-3f : 1.0f;
  for (float& x : in.q) x = q_scale * normal(rng);
  for (size_t i = 0; i < kv_size; ++i) {
    switch (c.values) {
      case Values::saturating: in.k[i] = lf::fp32_to_fp16(30.0f * normal(rng)); break;
      case Values::equal: in.k[i] = lf::fp32_to_fp16(static_cast<float>(i % c.D) * 0.01f); break;
      case Values::extremes: in.k[i] = extreme_half(rng); break;
      default: in.k[i] = lf::fp32_to_fp16(normal(rng)); break;
    }
    in.v[i] = c.values == Values::extremes ? extreme_half(rng) : lf::fp32_to_fp16(normal(rng));
  }
  if (c.values == Values::dominant) {
    // Key slots 0, 7, 14, …: the first query's head-0 direction, scaled up.
    for (int slot = 0; slot < c.capacity; slot += 7) {
      for (int g = 0; g < c.n_head_kv; ++g) {
        for (int d = 0; d < c.D; ++d) {
          in.k[(static_cast<size_t>(slot) * c.n_head_kv + g) * c.D + d] = lf::fp32_to_fp16(50.0f * in.q[d]);
        }
      }
    }
  }
  in.view.k = in.k.data();
  in.view.v = in.v.data();
  in.view.capacity = c.capacity;
  in.view.n_head_kv = c.n_head_kv;
  in.view.head_dim = c.D;
  in.view.first_pos = std::max(0, c.pos0 + c.n_q - c.capacity);
  return in;
}

// Runs both and requires the same bytes; where both are NaN (f16 accumulators that overflowed
// to infinity and were then scaled by 0), the sign bit of the NaN may differ.
void require_identical(const Case& c, uint32_t seed, lf::AttentionWorkspace* ws) {
  INFO(describe(c) << " seed=" << seed);
  const Inputs in = make_inputs(c, seed);
  std::vector<float> expect(in.q.size(), -777.0f), got(in.q.size(), 777.0f);
  lf::attention(in.q.data(), c.n_q, c.pos0, c.n_head, in.view, c.mask, 1.0f, expect.data());
  lf::attention_tiled(in.q.data(), c.n_q, c.pos0, c.n_head, in.view, c.mask, 1.0f, got.data(), ws);
  size_t first_diff = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    if (lf::f32_bits(got[i]) != lf::f32_bits(expect[i]) && !(std::isnan(got[i]) && std::isnan(expect[i]))) {
      first_diff = i;
      break;
    }
  }
  INFO("first difference at " << first_diff << ": " << (first_diff < got.size() ? got[first_diff] : 0.0f) << " vs "
                              << (first_diff < got.size() ? expect[first_diff] : 0.0f));
  REQUIRE(first_diff == got.size());
  // The reference itself must have produced numbers, or the comparison proves little.
  if (c.values != Values::extremes) {
    REQUIRE(std::all_of(expect.begin(), expect.end(), [](float x) { return std::isfinite(x); }));
  }
}

// ggml_vec_dot_f16 as llama.cpp's AVX-512 build runs it (ggml-cpu/vec.cpp, simd-mappings.h,
// GCC's avx512fintrin.h), written from that source apart from lf::attention_score: x, y [n] f16 ->
// the dot. Four accumulators of 16 f32 lanes take each step of 64 elements with an FMA;
// GGML_F32x16_REDUCE adds sum[0] += sum[2], sum[1] += sum[3], sum[0] += sum[1], then
// _mm512_reduce_add_ps adds the 256-bit halves, the 128-bit halves, lanes {2, 3} onto {0, 1},
// and lane 1 onto lane 0; the result, widened to double, takes the leftover products.
float avx512_vec_dot_f16(const uint16_t* x, const uint16_t* y, int n) {
  const int np = n & ~63;
  float sum[4][16] = {};
  for (int i = 0; i < np; i += 64) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 16; ++l) {
        sum[j][l] = std::fma(lf::fp16_to_fp32(x[i + 16 * j + l]), lf::fp16_to_fp32(y[i + 16 * j + l]), sum[j][l]);
      }
    }
  }
  float x0[16];
  for (int l = 0; l < 16; ++l) {
    const float x0_plus_x2 = sum[0][l] + sum[2][l];
    const float x1_plus_x3 = sum[1][l] + sum[3][l];
    x0[l] = x0_plus_x2 + x1_plus_x3;
  }
  float t3[8], t6[4];
  for (int l = 0; l < 8; ++l) t3[l] = x0[8 + l] + x0[l];
  for (int l = 0; l < 4; ++l) t6[l] = t3[4 + l] + t3[l];
  const float t8_0 = t6[0] + t6[2], t8_1 = t6[1] + t6[3];
  double sumf = static_cast<double>(t8_0 + t8_1);
  for (int i = np; i < n; ++i) sumf += static_cast<double>(lf::fp16_to_fp32(x[i]) * lf::fp16_to_fp32(y[i]));
  return static_cast<float>(sumf);
}

// How a score's two f16 rows are drawn.
enum class ScoreValues { normal, large, small, cancelling, any_finite };

void draw_score_rows(ScoreValues values, std::mt19937& rng, std::vector<uint16_t>* k, std::vector<uint16_t>* q) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t D = k->size();
  for (size_t i = 0; i < D; ++i) {
    switch (values) {
      case ScoreValues::normal:
        (*k)[i] = lf::fp32_to_fp16(normal(rng));
        (*q)[i] = lf::fp32_to_fp16(normal(rng));
        break;
      case ScoreValues::large:  // products up to 65504², exponents far apart; finite (no inf - inf)
        (*k)[i] = lf::fp32_to_fp16(std::clamp(std::ldexp(normal(rng), static_cast<int>(rng() % 16)), -65504.0f, 65504.0f));
        (*q)[i] = lf::fp32_to_fp16(std::clamp(std::ldexp(normal(rng), static_cast<int>(rng() % 16)), -65504.0f, 65504.0f));
        if (i % 17 == 0) (*k)[i] = rng() % 2 ? 0x7BFF : 0xFBFF;
        break;
      case ScoreValues::small:  // f16 subnormals and tiny normals
        (*k)[i] = static_cast<uint16_t>((rng() & 0x83FF) | (rng() % 3 == 0 ? 0x0400 : 0));
        (*q)[i] = lf::fp32_to_fp16(std::ldexp(normal(rng), -static_cast<int>(rng() % 14)));
        break;
      case ScoreValues::cancelling:  // a large product, then its negation in another lane, small ones between
        (*q)[i] = lf::fp32_to_fp16(1.0f + 0.01f * normal(rng));
        (*k)[i] = i % 2 == 0 ? lf::fp32_to_fp16(4096.0f * normal(rng)) : static_cast<uint16_t>((*k)[i - 1] ^ 0x8000);
        if (i % 5 == 3) (*k)[i] = lf::fp32_to_fp16(normal(rng));
        break;
      case ScoreValues::any_finite:  // random f16 bit patterns short of inf and NaN
        do (*k)[i] = static_cast<uint16_t>(rng()); while (((*k)[i] & 0x7C00) == 0x7C00);
        do (*q)[i] = static_cast<uint16_t>(rng()); while (((*q)[i] & 0x7C00) == 0x7C00);
        break;
    }
  }
}

constexpr int kScoreDims[] = {1, 7, 16, 32, 48, 63, 64, 65, 67, 80, 96, 127, 128, 192, 256, 320, 512};

// k · q of f16 rows as one double sum of the f32 products, rounded once: ggml's scalar f16 dot.
float double_sum(const std::vector<uint16_t>& k, const std::vector<uint16_t>& q) {
  double sum = 0.0;
  for (size_t i = 0; i < k.size(); ++i) sum += static_cast<double>(lf::fp16_to_fp32(k[i]) * lf::fp16_to_fp32(q[i]));
  return static_cast<float>(sum);
}

}  // namespace

TEST_CASE("attention_score sums as llama.cpp's AVX-512 vec_dot_f16: 4 × 16 f32 lanes, then double", "[attention]") {
  std::mt19937 rng(23);
  for (int D : kScoreDims) {
    for (ScoreValues values : {ScoreValues::normal, ScoreValues::large, ScoreValues::small, ScoreValues::cancelling,
                               ScoreValues::any_finite}) {
      std::vector<uint16_t> k(D), q(D);
      for (int round = 0; round < 40; ++round) {
        draw_score_rows(values, rng, &k, &q);
        INFO("D=" << D << " values=" << static_cast<int>(values) << " round=" << round);
        REQUIRE(lf::f32_bits(lf::attention_score(k.data(), q.data(), D)) ==
                lf::f32_bits(avx512_vec_dot_f16(k.data(), q.data(), D)));
      }
    }
  }
}

TEST_CASE("attention_score: the lane order, not the double sum, past 64 elements", "[attention]") {
  // 4096² = 2^24 in lane 0, 1 in lane 2, -2^24 in lane 1: the lanes' halving adds lane 2 to
  // lane 0 first (2^24 + 1 rounds to 2^24 in f32), then lane 1: 0. The double sum keeps the 1.
  std::vector<uint16_t> k(64, 0), q(64, 0);
  k[0] = lf::fp32_to_fp16(4096.0f);
  q[0] = lf::fp32_to_fp16(4096.0f);
  k[1] = lf::fp32_to_fp16(-4096.0f);
  q[1] = lf::fp32_to_fp16(4096.0f);
  k[2] = q[2] = lf::fp32_to_fp16(1.0f);
  REQUIRE(double_sum(k, q) == 1.0f);
  REQUIRE(lf::f32_bits(lf::attention_score(k.data(), q.data(), 64)) == lf::f32_bits(0.0f));
  // Below 64 elements everything is the double sum.
  REQUIRE(lf::attention_score(k.data(), q.data(), 63) == 1.0f);
  // 2^24 in lane 0 and 1 in each other lane: the halving adds 1, 2, 4, 8, 16, 32 to lane 0, the
  // first lost to rounding (2^24 + 1 ties to 2^24), so 2^24 + 62, where the double sum gives
  // 2^24 + 63, which rounds to 2^24 + 64.
  std::fill(k.begin(), k.end(), lf::fp32_to_fp16(1.0f));
  std::fill(q.begin(), q.end(), lf::fp32_to_fp16(1.0f));
  k[0] = q[0] = lf::fp32_to_fp16(4096.0f);
  REQUIRE(double_sum(k, q) == 16777280.0f);
  REQUIRE(lf::attention_score(k.data(), q.data(), 64) == 16777278.0f);
}

TEST_CASE("score_block equals attention_score per key: head dims, random and edge values", "[attention]") {
  std::mt19937 rng(29);
  constexpr int kBlock = lf::attn_steps::kKeyBlock;
  for (int D : kScoreDims) {
    std::vector<uint16_t> keys(static_cast<size_t>(kBlock) * D), q16(D);
    std::vector<float> q(D), k32(static_cast<size_t>(kBlock) * D), kT(static_cast<size_t>(D) * kBlock);
    for (ScoreValues values : {ScoreValues::normal, ScoreValues::large, ScoreValues::small, ScoreValues::cancelling,
                               ScoreValues::any_finite}) {
      for (int round = 0; round < 10; ++round) {
        std::vector<uint16_t> k(D);
        for (int b = 0; b < kBlock; ++b) {
          draw_score_rows(values, rng, &k, &q16);  // each key its own; the last q16 drawn is the query
          std::copy(k.begin(), k.end(), keys.begin() + static_cast<size_t>(b) * D);
        }
        for (int d = 0; d < D; ++d) q[d] = lf::fp16_to_fp32(q16[d]);
        lf::KvView view;
        view.k = keys.data();
        view.capacity = kBlock;
        view.n_head_kv = 1;
        view.head_dim = D;
        const int nb = round % 3 == 2 ? 5 : kBlock;  // a short last block: its missing keys score 0
        lf::attn_steps::load_keys_transposed(view, 0, 0, nb, k32.data(), kT.data());
        const float kq_scale = round % 2 ? 0.125f : 1.0f;
        float s[kBlock];
        lf::attn_steps::score_block(q.data(), kT.data(), D, kq_scale, s);
        for (int b = 0; b < nb; ++b) {
          INFO("D=" << D << " values=" << static_cast<int>(values) << " round=" << round << " key=" << b);
          const float expect = lf::attention_score(keys.data() + static_cast<size_t>(b) * D, q16.data(), D) * kq_scale;
          REQUIRE(lf::f32_bits(s[b]) == lf::f32_bits(expect));
        }
        for (int b = nb; b < kBlock; ++b) REQUIRE(lf::f32_bits(s[b]) == lf::f32_bits(0.0f));
      }
    }
  }
}

TEST_CASE("attention_tiled and attention: the score's lane order moves the output", "[attention]") {
  // Key 0 scores 0 in the lane order (1 in a double sum), key 1 scores 0: equal weights, so the
  // output is (1 + 0) / 2 exactly; a double sum would give 1 / (1 + e^-1).
  const int D = 64;
  std::vector<uint16_t> k(2 * D, 0), v(2 * D, 0);
  k[0] = lf::fp32_to_fp16(4096.0f);
  k[1] = lf::fp32_to_fp16(-4096.0f);
  k[2] = lf::fp32_to_fp16(1.0f);
  for (int d = 0; d < D; ++d) v[d] = lf::fp32_to_fp16(1.0f);
  std::vector<float> q(D, 0.0f);
  q[0] = q[1] = 4096.0f;
  q[2] = 1.0f;
  lf::KvView view;
  view.k = k.data();
  view.v = v.data();
  view.capacity = 2;
  view.n_head_kv = 1;
  view.head_dim = D;
  std::vector<float> expect(D), got(D);
  lf::attention(q.data(), 1, 1, 1, view, 0, 1.0f, expect.data());
  lf::AttentionWorkspace ws;
  lf::attention_tiled(q.data(), 1, 1, 1, view, 0, 1.0f, got.data(), &ws);
  for (int d = 0; d < D; ++d) {
    INFO("d=" << d);
    REQUIRE(expect[d] == 0.5f);
    REQUIRE(got[d] == 0.5f);
  }
}

TEST_CASE("attention_tiled equals attention byte for byte: head dims past the score's lanes", "[attention]") {
  lf::AttentionWorkspace ws;
  uint32_t seed = 3000;
  for (int D : {16, 32, 40, 48, 64, 80, 96, 128, 192, 200, 256, 512}) {
    for (int group : {2, 8}) {
      for (int n_swa : {0, 6}) {
        // decode after 30 positions, and a prompt of 19 rows after 4
        require_identical({D, group, 1, 31, n_swa, 30, 1}, seed++, &ws);
        require_identical({D, group, 1, 23, n_swa, 4, 19}, seed++, &ws);
      }
      for (Values values : {Values::saturating, Values::dominant, Values::extremes}) {
        require_identical({D, group, 1, 21, 0, 20, 1, values}, seed++, &ws);
        require_identical({D, group, 1, 12, 5, 3, 9, values}, seed++, &ws);
      }
    }
  }
}

TEST_CASE("attention_tiled equals attention byte for byte: head dims, groups, query counts", "[attention]") {
  lf::AttentionWorkspace ws;  // one workspace across all shapes: reuse must not leak state
  uint32_t seed = 1;
  for (int D : {1, 3, 7, 32, 64, 67, 256, 512}) {
    for (int group : {1, 2, 3, 8}) {
      for (int n_q : {1, 5, 17}) {
        const int n_kv = D >= 256 ? 1 : 2;
        const int pos0 = n_q == 1 ? 9 : 2;  // decode after 9 cached positions; a prompt after 2
        require_identical({D, group * n_kv, n_kv, pos0 + n_q, 0, pos0, n_q}, seed++, &ws);
      }
    }
  }
}

TEST_CASE("attention_tiled: sliding windows, rings that wrapped, long prompts", "[attention]") {
  lf::AttentionWorkspace ws;
  uint32_t seed = 100;
  // Windows smaller than the query chunk, of one key, and larger than the prompt; rings sized
  // n_swa + n_q - 1 as the session sizes them, after first_pos has moved past 0.
  for (int D : {8, 64, 256}) {
    for (int group : {1, 2, 8}) {
      for (int n_swa : {1, 3, 5, 16, 100}) {
        for (int n_q : {1, 4, 23}) {
          const int capacity = n_swa + n_q - 1;
          for (int pos0 : {0, 7, 3 * capacity + 2}) require_identical({D, group, 1, capacity + pos0, n_swa, pos0, n_q}, seed++, &ws);
          require_identical({D, group, 1, capacity, n_swa, 5 * capacity + 1, n_q}, seed++, &ws);
        }
      }
    }
  }
  // A 70-row prompt attending its own keys, global and windowed.
  require_identical({64, 8, 1, 70, 0, 0, 70}, seed++, &ws);
  require_identical({32, 2, 1, 70, 9, 0, 70}, seed++, &ws);
}

TEST_CASE("attention_tiled: non-causal spans, alone, inside a prompt and under a window", "[attention]") {
  lf::AttentionWorkspace ws;
  uint32_t seed = 700;
  for (int D : {8, 64, 72, 256}) {
    for (int group : {1, 2, 8}) {
      for (int n_swa : {0, 1, 5, 100}) {
        // the whole call one span (the vision tower's patches); a span between text rows, after
        // 7 cached positions; a span of one row; a span ending at the call's last row
        const int capacity = (n_swa > 0 ? n_swa : 40) + 40;
        require_identical({D, group, 1, capacity, lf::KeyMask(n_swa, 0, 30), 0, 30}, seed++, &ws);
        require_identical({D, group, 1, capacity, lf::KeyMask(n_swa, 10, 27), 7, 23}, seed++, &ws);
        require_identical({D, group, 1, capacity, lf::KeyMask(n_swa, 12, 13), 7, 23}, seed++, &ws);
        require_identical({D, group, 1, capacity, lf::KeyMask(n_swa, 20, 30), 7, 23}, seed++, &ws);
      }
    }
  }
}

TEST_CASE("attention_tiled: a span's rows see every key of the span, as its last row does", "[attention]") {
  // A row of a non-causal span [s, e) computes exactly what a causal query at e - 1 would, over
  // the same keys in the same order: so each of the 30 rows equals the row at 29 run alone.
  lf::AttentionWorkspace ws;
  const Case c{64, 4, 2, 30, lf::KeyMask(0, 0, 30), 0, 30};
  const Inputs in = make_inputs(c, 41);
  const int64_t row = int64_t{c.n_head} * c.D;
  std::vector<float> spanned(in.q.size()), alone(row);
  lf::attention_tiled(in.q.data(), c.n_q, 0, c.n_head, in.view, c.mask, 1.0f, spanned.data(), &ws);
  for (int i = 0; i < c.n_q; ++i) {
    INFO("row " << i);
    lf::attention_tiled(in.q.data() + i * row, 1, c.n_q - 1, c.n_head, in.view, 0, 1.0f, alone.data(), &ws);
    REQUIRE(std::memcmp(spanned.data() + i * row, alone.data(), row * sizeof(float)) == 0);
  }
  // and a causal row differs from it (the span is not ignored)
  lf::attention_tiled(in.q.data(), 1, 0, c.n_head, in.view, 0, 1.0f, alone.data(), &ws);
  REQUIRE(std::memcmp(spanned.data(), alone.data(), row * sizeof(float)) != 0);
}

TEST_CASE("attention_tiled: saturated softmax, a dominant key, equal scores, f16 extremes", "[attention]") {
  lf::AttentionWorkspace ws;
  uint32_t seed = 500;
  for (Values values : {Values::saturating, Values::dominant, Values::equal, Values::extremes}) {
    for (int D : {5, 64, 512}) {
      for (int group : {1, 2, 8}) {
        require_identical({D, group, 1, 40, 0, 0, 40, values}, seed++, &ws);
        require_identical({D, group, 1, 12, 6, 30, 7, values}, seed++, &ws);
        require_identical({D, group, 1, 33, 0, 32, 1, values}, seed++, &ws);
      }
    }
  }
}

TEST_CASE("round_floats_to_halves equals fp32_to_fp16 then back, over f32 bit patterns", "[attention]") {
  // Every (sign, exponent, top 7 mantissa bits) with low halves chosen around each f16
  // rounding position (bits 13..23 for normals, higher for subnormals): ties, ±1 around them,
  // all ones, zero, and a few random ones.
  std::vector<uint32_t> lows = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x2001, 0x3000, 0x3FFF,
                                0x4000, 0x4001, 0x7FFF, 0x8000, 0x8001, 0xFFFF};
  std::mt19937 rng(7);
  for (int i = 0; i < 6; ++i) lows.push_back(rng() & 0xFFFF);
  std::vector<float> x, y;
  x.reserve(size_t{1} << 16);
  for (uint32_t low : lows) {
    x.clear();
    for (uint32_t high = 0; high < (1u << 16); ++high) x.push_back(lf::f32_from_bits(high << 16 | low));
    y.assign(x.size(), 0.0f);
    lf::round_floats_to_halves(x.data(), y.data(), static_cast<int>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const uint32_t expect = lf::f32_bits(lf::fp16_to_fp32(lf::fp32_to_fp16(x[i])));
      if (lf::f32_bits(y[i]) != expect) {
        INFO("f32 0x" << std::hex << lf::f32_bits(x[i]) << " -> 0x" << lf::f32_bits(y[i]) << ", expected 0x" << expect);
        REQUIRE(lf::f32_bits(y[i]) == expect);
      }
    }
  }
  // Odd lengths reach the scalar tail.
  const float tail[3] = {65519.0f, 65520.0f, 0x1p-25f};
  float tail_out[3];
  lf::round_floats_to_halves(tail, tail_out, 3);
  REQUIRE(tail_out[0] == 65504.0f);
  REQUIRE(std::isinf(tail_out[1]));
  REQUIRE(lf::f32_bits(tail_out[2]) == 0);
}

#if LF_SIMD_WASM
// The other backends round with the integer expression this test takes as the reference.
TEST_CASE("Veltkamp's split rounds every f32 of the f16 normal range to nearest even", "[attention]") {
  // Every f32 with 2^-14 <= |x| < 65520, which the WASM backend rounds by Veltkamp's split
  // (docs/attention.md), against the mantissa's low 13 bits rounded off in the integers, which
  // the test above holds to fp32_to_fp16 on their boundaries.
  std::vector<float> x(size_t{1} << 20), y(x.size());
  uint64_t checked = 0, wrong = 0;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t first = lf::simd::kHalfNormalMin; first < lf::simd::kHalfOverflow; first += x.size()) {
      const uint32_t n = std::min<uint32_t>(x.size(), lf::simd::kHalfOverflow - first);
      for (uint32_t i = 0; i < n; ++i) x[i] = lf::f32_from_bits(sign | (first + i));
      for (uint32_t i = 0; i < n; i += 4) {
        lf::simd::store(y.data() + i, lf::simd::round_mantissa_to_half(lf::simd::load_f32x4(x.data() + i)));
      }
      for (uint32_t i = 0; i < n; ++i) {
        const uint32_t u = lf::f32_bits(x[i]), expect = (u + 0xFFFu + ((u >> 13) & 1u)) & 0xFFFFE000u;
        if (lf::f32_bits(y[i]) != expect && wrong++ == 0) {
          UNSCOPED_INFO("first: f32 0x" << std::hex << u << " -> 0x" << lf::f32_bits(y[i]) << ", expected 0x" << expect);
        }
      }
      checked += n;
    }
  }
  REQUIRE(checked == 2 * uint64_t{lf::simd::kHalfOverflow - lf::simd::kHalfNormalMin});
  REQUIRE(wrong == 0);
}
#endif

TEST_CASE("halves_to_floats equals fp16_to_fp32 on all 65536 halves", "[attention]") {
  std::vector<uint16_t> h(65536 + 3);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i * 40503u);  // a permutation, then 3 more
  std::vector<float> f(h.size());
  lf::halves_to_floats(h.data(), f.data(), static_cast<int>(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    if (lf::f32_bits(f[i]) != lf::f32_bits(lf::fp16_to_fp32(h[i]))) {
      INFO("half 0x" << std::hex << h[i]);
      REQUIRE(lf::f32_bits(f[i]) == lf::f32_bits(lf::fp16_to_fp32(h[i])));
    }
  }
}

TEST_CASE("accumulate_weighted_value equals f16(fma(v, w, acc)), incl. sums halfway between f32", "[attention]") {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const int n = 1023;  // not a multiple of 4
  std::vector<float> acc(n), v(n), expect(n);
  for (int round = 0; round < 200; ++round) {
    const float w = round % 10 == 0 ? std::ldexp(unit(rng), -(static_cast<int>(rng() % 140))) : unit(rng);
    for (int i = 0; i < n; ++i) {
      const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 30) - 20);
      acc[i] = lf::fp16_to_fp32(lf::fp32_to_fp16(scale * normal(rng)));
      v[i] = lf::fp16_to_fp32(i % 50 == 0 ? static_cast<uint16_t>(rng()) & 0x7BFF : lf::fp32_to_fp16(normal(rng)));
      expect[i] = lf::fp16_to_fp32(lf::fp32_to_fp16(std::fma(v[i], w, acc[i])));
    }
    lf::accumulate_weighted_value(acc.data(), v.data(), w, n);
    for (int i = 0; i < n; ++i) {
      INFO("round " << round << " i " << i << " w " << w);
      REQUIRE(lf::f32_bits(acc[i]) == lf::f32_bits(expect[i]));
    }
  }
  // 603 · 14245331 = 2^33 + 1, so v·w = 2^-24 + 2^-57 and 1 + v·w rounds in f64 to exactly
  // halfway between two f32: the f64 path's f32 differs from the FMA's (checked), its f16 not.
  const float v_odd = 603.0f * 0x1p-9f, w_odd = 14245331.0f * 0x1p-48f;
  REQUIRE(std::fma(v_odd, w_odd, 1.0f) != static_cast<float>(static_cast<double>(v_odd) * w_odd + 1.0));
  // Also exact f32 halfway sums, overflow to infinity, and signed zeros.
  const float cases[][3] = {{v_odd, w_odd, 1.0f},  {-v_odd, w_odd, -1.0f}, {1.0f, 0x1p-24f, 1.0f},
                            {3.0f, 0x1p-23f, 1.0f}, {-1.0f, 0.0f, 0.0f},    {1.0f, 0.0f, -0.0f},
                            {-0.0f, 1.0f, -0.0f},   {65504.0f, 1.0f, 65504.0f}, {0x1p-24f, 0x1p-30f, -0.0f}};
  for (const auto& c : cases) {
    float a[5], vv[5];
    for (int i = 0; i < 5; ++i) {
      vv[i] = c[0];
      a[i] = c[2];
    }
    const float want = lf::fp16_to_fp32(lf::fp32_to_fp16(std::fma(c[0], c[1], c[2])));
    lf::accumulate_weighted_value(a, vv, c[1], 5);
    for (float x : a) {
      INFO("v " << c[0] << " w " << c[1] << " acc " << c[2]);
      REQUIRE(lf::f32_bits(x) == lf::f32_bits(want));
    }
  }
}

// Not a test: the before/after numbers of docs/attention.md. Attention of one 31B-shape layer,
// single-threaded, called as the engine calls it (one KV head at a time, query chunks of 64).
// Run: lf_tests "[attention_bench]" (natively, or node lf_tests.js under Emscripten).
TEST_CASE("attention bench: 31B shapes, reference vs tiled", "[.][attention_bench]") {
  struct Shape { const char* name; int D, group, n_kv, n_swa; };
  const Shape shapes[] = {{"sliding D=256 2q/kv x16", 256, 2, 16, 1024}, {"global  D=512 8q/kv x4", 512, 8, 4, 0}};
  struct Phase { const char* name; int n_past, n_q; };
  const Phase phases[] = {{"prompt 8", 0, 8}, {"prompt 128", 0, 128}, {"decode @1024", 1024, 1}, {"decode @8192", 8192, 1}};
  constexpr int kChunk = 64;
  lf::AttentionWorkspace ws;
  for (const Shape& s : shapes) {
    for (const Phase& p : phases) {
      const Case c{s.D, s.group, 1, p.n_past + p.n_q, lf::KeyMask(s.n_swa), p.n_past, p.n_q};
      const Inputs in = make_inputs(c, 3);
      std::vector<float> out(in.q.size());
      double ms[2] = {1e30, 1e30};  // the best of 3: the machine is shared
      for (int run = 0; run < 6; ++run) {
        const int fast = run % 2;
        const auto t0 = std::chrono::steady_clock::now();
        for (int h = 0; h < s.n_kv; ++h) {
          for (int c0 = 0; c0 < p.n_q; c0 += kChunk) {
            const int rows = std::min(kChunk, p.n_q - c0);
            const float* q = in.q.data() + static_cast<size_t>(c0) * s.group * s.D;
            float* o = out.data() + static_cast<size_t>(c0) * s.group * s.D;
            if (fast) {
              lf::attention_tiled(q, rows, p.n_past + c0, s.group, in.view, s.n_swa, 1.0f, o, &ws);
            } else {
              lf::attention(q, rows, p.n_past + c0, s.group, in.view, s.n_swa, 1.0f, o);
            }
          }
        }
        ms[fast] = std::min(ms[fast], std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::printf("%-26s %-13s reference %9.2f ms   tiled %8.2f ms   x%.1f\n", s.name, p.name, ms[0], ms[1],
                  ms[0] / ms[1]);
    }
  }
  SUCCEED();
}

namespace {

// Softmax attention of the case's inputs in double, each row over the keys its mask lets it see:
// out [n_q, n_head, D].
std::vector<double> attention_f64(const Case& c, const Inputs& in, float kq_scale) {
  std::vector<double> out(in.q.size(), 0.0);
  for (int i = 0; i < c.n_q; ++i) {
    const int p = c.pos0 + i;
    for (int h = 0; h < c.n_head; ++h) {
      const float* q = in.q.data() + (static_cast<size_t>(i) * c.n_head + h) * c.D;
      const int g = lf::kv_head_for(h, c.n_head, c.n_head_kv);
      const auto row = [&](const std::vector<uint16_t>& kv, int key) {
        return kv.data() + (static_cast<size_t>(key % c.capacity) * c.n_head_kv + g) * c.D;
      };
      std::vector<std::pair<int, double>> scores;
      for (int key = 0; key <= p + c.n_q; ++key) {
        if (!lf::key_visible(key, p, c.mask)) continue;
        double s = 0;
        for (int d = 0; d < c.D; ++d) s += static_cast<double>(q[d]) * lf::fp16_to_fp32(row(in.k, key)[d]);
        scores.emplace_back(key, s * kq_scale);
      }
      double m = -INFINITY, z = 0;
      for (const auto& [key, s] : scores) m = std::max(m, s);
      for (const auto& [key, s] : scores) z += std::exp(s - m);
      double* o = out.data() + (static_cast<size_t>(i) * c.n_head + h) * c.D;
      for (const auto& [key, s] : scores) {
        for (int d = 0; d < c.D; ++d) o[d] += std::exp(s - m) / z * lf::fp16_to_fp32(row(in.v, key)[d]);
      }
    }
  }
  return out;
}

// attention_f32_tiles and its reference on the case's inputs: the same bytes (NaN outputs both
// NaN); and, where the values are ordinary, within 1e-4 of softmax attention in double over the
// keys each row sees (f32 sums part from it by about 1e-6; one key seen or hidden wrongly, by
// about 1e-2).
void require_tiles_identical(const Case& c, uint32_t seed, lf::AttentionWorkspace* ws) {
  INFO(describe(c) << " seed=" << seed);
  const Inputs in = make_inputs(c, seed);
  std::vector<float> expect(in.q.size(), -777.0f), got(in.q.size(), 777.0f);
  lf::attention_f32_tiles_ref(in.q.data(), c.n_q, c.pos0, c.n_head, in.view, c.mask, 0.125f, expect.data());
  lf::attention_f32_tiles(in.q.data(), c.n_q, c.pos0, c.n_head, in.view, c.mask, 0.125f, got.data(), ws);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE((lf::f32_bits(got[i]) == lf::f32_bits(expect[i]) || (std::isnan(got[i]) && std::isnan(expect[i]))));
  }
  if (c.values != Values::normal) return;
  const std::vector<double> exact = attention_f64(c, in, 0.125f);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::fabs(expect[i] - exact[i]) <= 1e-4 * (1.0 + std::fabs(exact[i])));
  }
}

}  // namespace

TEST_CASE("attention_f32_tiles equals its reference byte for byte: tiles, rows, heads, extremes", "[attention]") {
  lf::AttentionWorkspace ws;
  uint32_t seed = 900;
  struct Shape { int n_q, n_head, n_kv, n_head_kv, D; };
  // key counts around the tiles of 64 (one short, exact, one over, several); query counts around
  // the kernel's groups of 16; grouped heads; head dims 16 to 256; every query seeing every key
  const Shape shapes[] = {{1, 1, 63, 1, 16}, {17, 2, 64, 2, 32}, {33, 4, 65, 2, 64}, {16, 8, 200, 1, 128},
                          {70, 2, 70, 2, 64}, {5, 2, 130, 1, 256}};
  for (const Shape& s : shapes) {
    for (Values values : {Values::normal, Values::saturating, Values::extremes}) {
      const int first = s.n_kv - s.n_q;  // the queries are the call's last keys, one span
      require_tiles_identical({s.D, s.n_head, s.n_head_kv, s.n_kv, lf::KeyMask(0, 0, s.n_kv), first, s.n_q, values}, seed++, &ws);
    }
  }
}

TEST_CASE("attention_f32_tiles: causal rows, windows, spans after a prompt, rings that wrapped", "[attention]") {
  lf::AttentionWorkspace ws;
  uint32_t seed = 1300;
  for (int D : {16, 64, 256}) {
    for (int group : {1, 2}) {
      for (Values values : {Values::normal, Values::saturating, Values::extremes}) {
        // a 70-row prompt, causal; a 100-row image span after 30 positions, global (causal) and
        // under windows of 5, 64 and 512; a span past a ring that wrapped (window 40, 64 rows
        // after 500 positions: capacity 40 + 64 - 1); a span not at a tile's start, past 2 tiles
        require_tiles_identical({D, group, 1, 70, lf::KeyMask(), 0, 70, values}, seed++, &ws);
        require_tiles_identical({D, group, 1, 130, lf::KeyMask(0, 30, 130), 30, 100, values}, seed++, &ws);
        for (int n_swa : {5, 64, 512}) {
          require_tiles_identical({D, group, 1, 130, lf::KeyMask(n_swa, 30, 130), 30, 100, values}, seed++, &ws);
        }
        require_tiles_identical({D, group, 1, 103, lf::KeyMask(40, 500, 564), 500, 64, values}, seed++, &ws);
        require_tiles_identical({D, 2 * group, 2, 300, lf::KeyMask(0, 150, 230), 150, 80, values}, seed++, &ws);
      }
    }
  }
}

TEST_CASE("attention_f32_tiles: a tile whose scores past a NaN are all -inf is skipped, as the reference's scan says", "[attention]") {
  // Scores (one query, D = 16): key 2 scores 0, key 61 NaN (a NaN key), every other key -inf
  // (-1e35 · 65504). The reference's scan in key order ends at -inf (past the NaN only -inf), so
  // the tile adds nothing; a scan by lanes would end at 0 and let the NaN into the sum.
  const int D = 16, n_kv = 64;
  std::vector<float> q(D, 0.0f);
  q[0] = -1e35f;
  std::vector<uint16_t> k(static_cast<size_t>(n_kv) * D, 0), v(k.size(), lf::fp32_to_fp16(1.0f));
  for (int p = 0; p < n_kv; ++p) k[static_cast<size_t>(p) * D] = p == 2 ? 0 : p == 61 ? 0x7E00 : 0x7BFF;
  lf::KvView view;
  view.k = k.data();
  view.v = v.data();
  view.capacity = n_kv;
  view.n_head_kv = 1;
  view.head_dim = D;
  const lf::KeyMask all(0, 0, n_kv);
  std::vector<float> expect(D, -1.0f), got(D, 1.0f);
  lf::attention_f32_tiles_ref(q.data(), 1, 0, 1, view, all, 0.125f, expect.data());
  lf::AttentionWorkspace ws;
  lf::attention_f32_tiles(q.data(), 1, 0, 1, view, all, 0.125f, got.data(), &ws);
  for (int d = 0; d < D; ++d) {
    REQUIRE(!std::isnan(expect[d]));
    REQUIRE(lf::f32_bits(got[d]) == lf::f32_bits(expect[d]));
  }
}

TEST_CASE("expf_ggml: ggml's AVX-512 exponential, its range ends and its accuracy", "[attention]") {
  // close to the true value over the softmax's range: the polynomial's own error reaches 2.14
  // ulp here (ggml's AVX-512 code gives the same bits: docs/attention.md, "The f32 tile path")
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    const double exact = std::exp(static_cast<double>(x));
    const float got = lf::expf_ggml(x);
    const double ulp = std::ldexp(1.0, std::ilogb(static_cast<float>(exact)) - 23);
    REQUIRE(std::fabs(got - exact) <= 2.5 * ulp);
  }
  REQUIRE(lf::expf_ggml(0.0f) == 1.0f);
  REQUIRE(lf::expf_ggml(-INFINITY) == 0.0f);  // n = -inf: past the range, flushed to 0
  REQUIRE(lf::expf_ggml(-200.0f) == 0.0f);
  REQUIRE(lf::expf_ggml(100.0f) == INFINITY);
  REQUIRE(lf::expf_ggml(-100.0f) > 0.0f);     // a subnormal from scalef, not 0
  REQUIRE(lf::expf_ggml(-100.0f) < 1e-38f);
  REQUIRE(std::isnan(lf::expf_ggml(NAN)));
}

TEST_CASE("sum_exp_lanes_simd equals sum_exp_lanes: the softmax's range, its ends, NaN and infinities", "[attention]") {
  // groups of 16 arguments x - max from 0 down past -104 (where the result turns subnormal) and
  // past -133 (n below -192: 0), with infinities and a NaN among them
  std::vector<float> xs;
  for (float x = 0.0f; x > -140.0f; x -= 0.0371f) xs.push_back(x);
  const float specials[] = {-INFINITY, NAN, -0.0f, 0.0f, -87.3f, -103.97f, -104.1f, -150.0f, -1e-30f, 3.0f, 89.0f, 200.0f};
  xs.insert(xs.end(), std::begin(specials), std::end(specials));
  while (xs.size() % lf::kExpLanes != 0) xs.push_back(-1.0f);
  for (const float max : {0.0f, -0.5f, 2.0f}) {
    std::vector<float> a = xs, b = xs;
    for (size_t g = 0; g < xs.size(); g += lf::kExpLanes) {
      INFO("group " << g << " max " << max);
      const float sa = lf::sum_exp_lanes(a.data() + g, max), sb = lf::sum_exp_lanes_simd(b.data() + g, max);
      REQUIRE((lf::f32_bits(sa) == lf::f32_bits(sb) || (std::isnan(sa) && std::isnan(sb))));
      for (int l = 0; l < lf::kExpLanes; ++l) {
        REQUIRE((lf::f32_bits(a[g + l]) == lf::f32_bits(b[g + l]) || (std::isnan(a[g + l]) && std::isnan(b[g + l]))));
      }
    }
  }
}
