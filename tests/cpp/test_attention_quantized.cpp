// Attention over a quantized K/V cache (Q8_0, Q4_0, mixed with F16): the block score against a
// loop written from ggml's AVX2 source, the reference on hand-worked cases, and the tiled kernel
// against the reference byte for byte.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace {

using lf::GgmlType;

const char* name(GgmlType t) { return t == GgmlType::F16 ? "f16" : t == GgmlType::Q8_0 ? "q8_0" : "q4_0"; }

// ggml_vec_dot_q8_0_q8_0 / _q4_0_q8_0 under __AVX2__ (ggml-cpu/arch/x86/quants.c), written from
// that source apart from lf::vec_dot_q8_0_lanes: x [nb] rows as int8 values with scales
// dx, y [nb] Q8_0 blocks. mul_sum_i8_pairs_float: maddubs of |x| and sign(y, x) into 16 int16
// (pairs), madd with ones into 8 int32 (quads), to float; acc = fmadd(d, q, acc); then
// hsum_float_8: the high 128 bits onto the low, movehl (lanes 2, 3 onto 0, 1), movehdup (lane 1
// onto 0).
float avx2_vec_dot_blocks(const int8_t* x, const float* dx, const lf::block_q8_0* y, int nb) {
  float acc[8] = {};
  for (int ib = 0; ib < nb; ++ib) {
    const float d = dx[ib] * lf::fp16_to_fp32(y[ib].d);
    int16_t pairs[16];
    for (int p = 0; p < 16; ++p) {
      int prod = 0;
      for (int e = 2 * p; e < 2 * p + 2; ++e) {
        const int ax = std::abs(x[ib * 32 + e]);
        const int sy = x[ib * 32 + e] < 0 ? -y[ib].qs[e] : x[ib * 32 + e] == 0 ? 0 : y[ib].qs[e];
        prod += ax * sy;
      }
      pairs[p] = static_cast<int16_t>(std::clamp(prod, -32768, 32767));
    }
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, static_cast<float>(pairs[2 * l] + pairs[2 * l + 1]), acc[l]);
  }
  float res[4];
  for (int l = 0; l < 4; ++l) res[l] = acc[4 + l] + acc[l];
  res[0] += res[2];
  res[1] += res[3];
  return res[0] + res[1];
}

// A row of D floats -> the cache's row in type t, as ggml's set_rows stores it (the CPU
// backend's from_float: x86 quantize_row_q8_0, the reference quantize_row_q4_0).
std::vector<uint8_t> store_row(GgmlType t, const float* x, int D) {
  std::vector<uint8_t> row(lf::kv_row_bytes(t, D));
  if (t == GgmlType::F16) {
    for (int d = 0; d < D; ++d) {
      const uint16_t h = lf::fp32_to_fp16(x[d]);
      std::memcpy(row.data() + 2 * d, &h, 2);
    }
  } else if (t == GgmlType::Q8_0) {
    lf::quantize_row_q8_0_x86(x, reinterpret_cast<lf::block_q8_0*>(row.data()), D);
  } else {
    lf::quantize_row_q4_0_ref(x, reinterpret_cast<lf::block_q4_0*>(row.data()), D);
  }
  return row;
}

struct Case {
  GgmlType k_type, v_type;
  int D, n_head, n_head_kv;
  int capacity;
  lf::KeyMask mask;  // a window size converts to one
  int pos0, n_q;
  float scale = 1.0f;  // of q and k: large scores saturate the softmax
};

std::string describe(const Case& c) {
  return std::string("K=") + name(c.k_type) + " V=" + name(c.v_type) + " D=" + std::to_string(c.D) +
         " heads=" + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) +
         " capacity=" + std::to_string(c.capacity) + " n_swa=" + std::to_string(c.mask.n_swa) +
         " span=[" + std::to_string(c.mask.span_begin) + ", " + std::to_string(c.mask.span_end) + ")" +
         " pos0=" + std::to_string(c.pos0) + " n_q=" + std::to_string(c.n_q) + " scale=" + std::to_string(c.scale);
}

struct Inputs {
  std::vector<float> q;        // [n_q, n_head, D]
  std::vector<uint8_t> k, v;   // [capacity, n_head_kv] rows
  lf::KvView view;
};

Inputs make_inputs(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Inputs in;
  in.q.resize(static_cast<size_t>(c.n_q) * c.n_head * c.D);
  for (float& x : in.q) x = c.scale * normal(rng);
  std::vector<float> row(c.D);
  for (int slot = 0; slot < c.capacity * c.n_head_kv; ++slot) {
    for (float& x : row) x = c.scale * normal(rng);
    const std::vector<uint8_t> k = store_row(c.k_type, row.data(), c.D);
    in.k.insert(in.k.end(), k.begin(), k.end());
    for (float& x : row) x = normal(rng);
    const std::vector<uint8_t> v = store_row(c.v_type, row.data(), c.D);
    in.v.insert(in.v.end(), v.begin(), v.end());
  }
  in.view.k = in.k.data();
  in.view.v = in.v.data();
  in.view.k_type = c.k_type;
  in.view.v_type = c.v_type;
  in.view.capacity = c.capacity;
  in.view.n_head_kv = c.n_head_kv;
  in.view.head_dim = c.D;
  in.view.first_pos = std::max(0, c.pos0 + c.n_q - c.capacity);
  return in;
}

void require_identical(const Case& c, uint32_t seed, lf::AttentionWorkspace* ws) {
  INFO(describe(c) << " seed=" << seed);
  const Inputs in = make_inputs(c, seed);
  std::vector<float> expect(in.q.size(), -777.0f), got(in.q.size(), 777.0f);
  lf::attention(in.q.data(), c.n_q, c.pos0, c.n_head, in.view, c.mask, 1.0f, expect.data());
  lf::attention_tiled(in.q.data(), c.n_q, c.pos0, c.n_head, in.view, c.mask, 1.0f, got.data(), ws);
  REQUIRE(std::all_of(expect.begin(), expect.end(), [](float x) { return std::isfinite(x); }));
  size_t first_diff = got.size();
  for (size_t i = 0; i < got.size() && first_diff == got.size(); ++i) {
    if (lf::f32_bits(got[i]) != lf::f32_bits(expect[i])) first_diff = i;
  }
  REQUIRE(first_diff == got.size());
}

const GgmlType kTypes[] = {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0};

}  // namespace

TEST_CASE("a quantized key's score sums as ggml's AVX2 block dot", "[attention]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (const int D : {32, 64, 96, 256, 512}) {
      for (int draw = 0; draw < 50; ++draw) {
        INFO(name(t) << " D=" << D << " draw=" << draw);
        std::vector<float> k(D), q(D);
        // Magnitudes vary by block, so lanes of different size meet in the f32 sums.
        for (int d = 0; d < D; ++d) k[d] = std::ldexp(normal(rng), static_cast<int>(d / 32 % 7) - 3);
        for (float& x : q) x = normal(rng);
        if (draw % 5 == 0) std::fill(k.begin(), k.begin() + 32, -1.0f);  // -127 or -8 values
        const std::vector<uint8_t> row = store_row(t, k.data(), D);
        std::vector<lf::block_q8_0> qb(D / 32);
        lf::quantize_row_q8_0_x86(q.data(), qb.data(), D);
        std::vector<int8_t> values(D);
        std::vector<float> scales(D / 32);
        lf::unpack_kv_blocks(t, row.data(), D, values.data(), scales.data());
        const float got = lf::vec_dot_q8_0_lanes(values.data(), scales.data(), qb.data(), D);
        REQUIRE(lf::f32_bits(got) == lf::f32_bits(avx2_vec_dot_blocks(values.data(), scales.data(), qb.data(), D / 32)));
      }
    }
  }
}

TEST_CASE("Q4_0 and Q8_0 rows unpack to their values", "[attention]") {
  // Q4_0: byte j holds value j in its low nibble and value j + 16 in its high one, minus 8.
  lf::block_q4_0 b4{};
  b4.d = lf::fp32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b4.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  int8_t q[32];
  float scale = 0.0f;
  lf::unpack_kv_blocks(GgmlType::Q4_0, &b4, 32, q, &scale);
  CHECK(scale == 0.5f);
  for (int j = 0; j < 16; ++j) {
    CHECK(q[j] == j - 8);
    CHECK(q[j + 16] == 7 - j);
  }
  lf::block_q8_0 b8{};
  b8.d = lf::fp32_to_fp16(0.25f);
  for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<int8_t>(j * 8 - 127);
  lf::unpack_kv_blocks(GgmlType::Q8_0, &b8, 32, q, &scale);
  CHECK(scale == 0.25f);
  for (int j = 0; j < 32; ++j) CHECK(q[j] == j * 8 - 127);
}

TEST_CASE("attention over a quantized V: one key gives its value, two equal keys their mean", "[attention]") {
  const int D = 32;
  lf::block_q8_0 k[2]{}, v[2]{};
  for (int p = 0; p < 2; ++p) {
    k[p].d = lf::fp32_to_fp16(0.125f);
    v[p].d = lf::fp32_to_fp16(p == 0 ? 0.5f : 0.25f);
    for (int j = 0; j < 32; ++j) {
      k[p].qs[j] = static_cast<int8_t>(j - 16);
      v[p].qs[j] = static_cast<int8_t>(p == 0 ? j : -3 * j);
    }
  }
  std::vector<float> q(2 * D);  // [2 positions, 1 head, D], the same query twice
  for (int d = 0; d < 2 * D; ++d) q[d] = 0.01f * static_cast<float>(d % D % 5);
  lf::KvView view;
  view.k = k;
  view.v = v;
  view.k_type = view.v_type = GgmlType::Q8_0;
  view.capacity = 2;
  view.n_head_kv = 1;
  view.head_dim = D;
  float out[2 * 32];
  lf::attention(q.data(), 2, 0, 1, view, 0, 1.0f, out);
  for (int j = 0; j < 32; ++j) {
    INFO("j=" << j);
    CHECK(out[j] == 0.5f * static_cast<float>(j));  // position 0 sees itself only
    // Position 1 sees two keys with one score: weights 1 and 1, sum 2.
    CHECK(out[32 + j] == (0.5f * static_cast<float>(j) + 0.25f * static_cast<float>(-3 * j)) * 0.5f);
  }
}

TEST_CASE("attention over a quantized cache stays near the f16 cache's", "[attention]") {
  for (const GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    INFO(name(t));
    const Case quantized{t, t, 128, 4, 2, 40, 0, 30, 10};
    const Case f16{GgmlType::F16, GgmlType::F16, 128, 4, 2, 40, 0, 30, 10};
    const Inputs a = make_inputs(quantized, 3), b = make_inputs(f16, 3);  // the same floats underneath
    std::vector<float> out_q(a.q.size()), out_f(b.q.size());
    lf::attention(a.q.data(), 10, 30, 4, a.view, 0, 1.0f / std::sqrt(128.0f), out_q.data());
    lf::attention(b.q.data(), 10, 30, 4, b.view, 0, 1.0f / std::sqrt(128.0f), out_f.data());
    double err = 0, norm = 0;
    for (size_t i = 0; i < out_q.size(); ++i) {
      err += (out_q[i] - out_f[i]) * (out_q[i] - out_f[i]);
      norm += out_f[i] * out_f[i];
    }
    CHECK(std::sqrt(err / norm) < (t == GgmlType::Q8_0 ? 0.02 : 0.2));
    CHECK(std::sqrt(err / norm) > 0.0);
  }
}

TEST_CASE("the tiled kernel gives the reference's bytes over quantized caches", "[attention]") {
  lf::AttentionWorkspace ws;
  uint32_t seed = 1;
  for (const GgmlType kt : kTypes) {
    for (const GgmlType vt : kTypes) {
      if (kt == GgmlType::F16 && vt == GgmlType::F16) continue;
      for (const int D : {32, 64, 96, 256, 512}) {
        for (const int group : {1, 2, 8}) {
          for (const int n_q : {1, 5, 17}) {
            const int n_head_kv = D <= 64 ? 2 : 1;
            require_identical(Case{kt, vt, D, group * n_head_kv, n_head_kv, 24 + n_q, 0, 24, n_q}, seed++, &ws);
          }
        }
      }
      // Sliding windows on rings that wrapped, decode and prompt; saturated scores.
      for (const int n_swa : {1, 3, 16}) {
        for (const int n_q : {1, 9}) {
          const int capacity = n_swa + n_q - 1 + 2;
          require_identical(Case{kt, vt, 64, 2, 1, capacity, n_swa, 50, n_q}, seed++, &ws);
        }
      }
      require_identical(Case{kt, vt, 128, 4, 2, 70, 0, 0, 70, 30.0f}, seed++, &ws);
      // Non-causal spans: a whole call, and one inside a prompt under a window.
      require_identical(Case{kt, vt, 64, 4, 2, 30, lf::KeyMask(0, 0, 30), 0, 30}, seed++, &ws);
      require_identical(Case{kt, vt, 64, 2, 1, 40, lf::KeyMask(5, 12, 22), 8, 17}, seed++, &ws);
    }
  }
}

TEST_CASE("a quantized V block with an infinite or NaN scale gives the reference's values", "[attention]") {
  lf::AttentionWorkspace ws;
  for (const GgmlType vt : {GgmlType::Q8_0, GgmlType::Q4_0}) {
    for (const uint16_t scale : {uint16_t{0x7C00}, uint16_t{0xFC00}, uint16_t{0x7E00}}) {
      const Case c{GgmlType::F16, vt, 64, 2, 1, 20, 0, 19, 1};
      INFO(describe(c) << " scale 0x" << std::hex << scale);
      Inputs in = make_inputs(c, 41);
      // Key 7's second block of V.
      const size_t block_bytes = vt == GgmlType::Q8_0 ? sizeof(lf::block_q8_0) : sizeof(lf::block_q4_0);
      std::memcpy(in.v.data() + 7 * lf::kv_row_bytes(vt, c.D) + block_bytes, &scale, sizeof scale);
      std::vector<float> expect(in.q.size()), got(in.q.size());
      lf::attention(in.q.data(), c.n_q, c.pos0, c.n_head, in.view, c.mask, 1.0f, expect.data());
      lf::attention_tiled(in.q.data(), c.n_q, c.pos0, c.n_head, in.view, c.mask, 1.0f, got.data(), &ws);
      REQUIRE(std::any_of(expect.begin(), expect.end(), [](float x) { return !std::isfinite(x); }));
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("output " << i);
        if (std::isnan(expect[i])) {
          REQUIRE(std::isnan(got[i]));
        } else {
          REQUIRE(lf::f32_bits(got[i]) == lf::f32_bits(expect[i]));
        }
      }
    }
  }
}
