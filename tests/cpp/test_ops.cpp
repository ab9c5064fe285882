// Ops against hand-derived values and brute force (docs/gemma-architecture.md, "Primitive ops" and
// "CPU backend numerics").
#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/ops.h"
#include "quant/quant.h"

namespace {

using lf::GgmlType;

// Values in [-1, 1) from a seed, independent of the code under test.
std::vector<float> random_values(int n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

}  // namespace

TEST_CASE("rmsnorm matches the hand-derived values, with and without weight", "[ops]") {
  // mean(x²) = (1 + 4 + 9 + 16) / 4 = 7.5
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<float> w = {1, 0.5f, 2, -1};
  std::vector<float> y(4);
  lf::rmsnorm(x.data(), nullptr, 4, 0.0f, y.data());
  for (int i = 0; i < 4; ++i) CHECK(y[i] == Approx(x[i] / std::sqrt(7.5)).epsilon(1e-6));
  lf::rmsnorm(x.data(), w.data(), 4, 0.0f, y.data());
  for (int i = 0; i < 4; ++i) CHECK(y[i] == Approx(x[i] * w[i] / std::sqrt(7.5)).epsilon(1e-6));
  // eps inside the square root: x = {0, 0} stays finite and zero.
  const std::vector<float> zeros = {0, 0};
  std::vector<float> z(2, 1.0f);
  lf::rmsnorm(zeros.data(), nullptr, 2, 1e-6f, z.data());
  CHECK(z[0] == 0.0f);
  CHECK(z[1] == 0.0f);
}

TEST_CASE("rmsnorm_rows normalizes each row on its own", "[ops]") {
  const std::vector<float> x = {3, 4, 30, 40};  // rows {3, 4} and {30, 40}: same direction
  std::vector<float> y(4);
  lf::rmsnorm_rows(x.data(), nullptr, 2, 2, 0.0f, y.data());
  const double r = std::sqrt(12.5);  // rms of {3, 4}
  CHECK(y[0] == Approx(3 / r).epsilon(1e-6));
  CHECK(y[1] == Approx(4 / r).epsilon(1e-6));
  CHECK(y[2] == Approx(3 / r).epsilon(1e-6));
  CHECK(y[3] == Approx(4 / r).epsilon(1e-6));
}

TEST_CASE("rope_neox rotates pairs (j, j + n_rot/2) by pos * base^(-2j/n_rot)", "[ops]") {
  // head_dim 8, n_rot 8, base 10000: theta_scale = 10000^(-1/4) = 0.1, angles at pos 3:
  // 3, 0.3, 0.03, 0.003.
  const double angles[4] = {3.0, 0.3, 0.03, 0.003};
  for (int j = 0; j < 4; ++j) {
    std::vector<float> x(8, 0.0f);
    x[j] = 1.0f;  // (1, 0) in pair j -> (cos, sin)
    lf::rope_neox(x.data(), 1, 8, 8, 3, 10000.0f, 1.0f, nullptr);
    for (int i = 0; i < 8; ++i) {
      if (i == j) {
        CHECK(x[i] == Approx(std::cos(angles[j])).margin(2e-6));
      } else if (i == j + 4) {
        CHECK(x[i] == Approx(std::sin(angles[j])).margin(2e-6));
      } else {
        CHECK(x[i] == 0.0f);
      }
    }
  }
  // (0, 1) in pair 1 -> (-sin, cos)
  std::vector<float> x(8, 0.0f);
  x[5] = 1.0f;
  lf::rope_neox(x.data(), 1, 8, 8, 3, 10000.0f, 1.0f, nullptr);
  CHECK(x[1] == Approx(-std::sin(0.3)).margin(2e-6));
  CHECK(x[5] == Approx(std::cos(0.3)).margin(2e-6));
}

TEST_CASE("rope_neox: position 0 is the identity, freq_scale scales the angle, every head alike", "[ops]") {
  const std::vector<float> x0 = random_values(16, 3);  // 2 heads of 8
  std::vector<float> x = x0;
  lf::rope_neox(x.data(), 2, 8, 8, 0, 10000.0f, 1.0f, nullptr);
  CHECK(x == x0);

  x = x0;
  lf::rope_neox(x.data(), 2, 8, 8, 5, 10000.0f, 0.125f, nullptr);
  // pair 0 of head 1 turned by 5 · 0.125 = 0.625 rad
  const double c = std::cos(0.625), s = std::sin(0.625);
  CHECK(x[8] == Approx(x0[8] * c - x0[12] * s).margin(2e-6));
  CHECK(x[12] == Approx(x0[8] * s + x0[12] * c).margin(2e-6));
  CHECK(x[0] == Approx(x0[0] * c - x0[4] * s).margin(2e-6));
}

TEST_CASE("rope_neox: freq factors divide the angle; 1e30 leaves a pair unrotated; dims past n_rot untouched", "[ops]") {
  // head_dim 10, n_rot 8: dims 8 and 9 are not rotated.
  const std::vector<float> x0 = random_values(10, 7);
  const std::vector<float> factors = {1.0f, 2.0f, 1e30f, 1e30f};
  std::vector<float> x = x0;
  lf::rope_neox(x.data(), 1, 10, 8, 3, 10000.0f, 1.0f, factors.data());
  const double a0 = 3.0, a1 = 0.3 / 2.0;
  CHECK(x[0] == Approx(x0[0] * std::cos(a0) - x0[4] * std::sin(a0)).margin(2e-6));
  CHECK(x[1] == Approx(x0[1] * std::cos(a1) - x0[5] * std::sin(a1)).margin(2e-6));
  CHECK(x[5] == Approx(x0[1] * std::sin(a1) + x0[5] * std::cos(a1)).margin(2e-6));
  // angle 0.03/1e30: cos rounds to 1 and the sin term is far below half an ulp
  CHECK(x[2] == x0[2]);
  CHECK(x[6] == x0[6]);
  CHECK(x[3] == x0[3]);
  CHECK(x[7] == x0[7]);
  CHECK(x[8] == x0[8]);
  CHECK(x[9] == x0[9]);
}

TEST_CASE("rope_neox fuses the first product of each rotated value, as ggml's FMA builds do", "[ops]") {
  const std::vector<float> x0 = random_values(64, 11);
  std::vector<float> x = x0;
  lf::rope_neox(x.data(), 1, 64, 64, 7, 10000.0f, 1.0f, nullptr);
  const float theta_scale = powf(10000.0f, -2.0f / 64.0f);
  float theta = 7.0f;
  int fusion_matters = 0;
  for (int j = 0; j < 32; ++j) {
    const float c = lf::cos_f32(theta), s = lf::sin_f32(theta);
    theta *= theta_scale;
    const float y0 = lf::fma_f32(x0[j], c, -(x0[j + 32] * s)), y1 = lf::fma_f32(x0[j], s, x0[j + 32] * c);
    CHECK(std::memcmp(&x[j], &y0, sizeof y0) == 0);
    CHECK(std::memcmp(&x[j + 32], &y1, sizeof y1) == 0);
    volatile float p0 = x0[j] * c, p1 = x0[j + 32] * s;  // volatile: no contraction here
    if (y0 != p0 - p1) ++fusion_matters;
  }
  CHECK(fusion_matters > 0);
}

TEST_CASE("gelu_table is the exact tanh gelu within f16 resolution, with the +-10 clamps", "[ops]") {
  for (int i = -13000; i <= 13000; ++i) {
    const float x = static_cast<float>(i) * 0.001f;
    const float got = lf::gelu_table(x);
    if (x <= -10.0f) {
      REQUIRE(got == 0.0f);
    } else if (x >= 10.0f) {
      REQUIRE(got == x);
    } else {
      const double exact = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * x * (1.0 + 0.044715 * x * x)));
      // input rounded to f16 (relative 2^-11, slope of gelu <= 1.13) + output rounded to f16
      const double tol = std::ldexp(1.0, -11) * (1.13 * std::fabs(x) + std::fabs(exact)) + 1e-7;
      REQUIRE(std::fabs(got - exact) <= tol);
    }
  }
  CHECK(lf::gelu_exact(1.0f) == Approx(0.8411920).epsilon(1e-6));
  CHECK(lf::gelu_exact(-1.0f) == Approx(-0.1588080).epsilon(1e-5));
}

TEST_CASE("geglu multiplies gelu(gate) by up, and the raw gate past 10", "[ops]") {
  const std::vector<float> gate = {-11.0f, 0.0f, 1.0f, 12.0f};
  const std::vector<float> up = {5.0f, 3.0f, 2.0f, 0.5f};
  std::vector<float> out(4);
  lf::geglu(gate.data(), up.data(), 4, out.data());
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == 0.0f);
  CHECK(out[2] == Approx(0.8411920 * 2).epsilon(2e-3));  // f16 table
  CHECK(out[3] == 6.0f);
}

TEST_CASE("softmax matches the hand-derived values and survives large inputs", "[ops]") {
  std::vector<float> x = {1, 2, 3};
  lf::softmax(x.data(), 3);
  CHECK(x[0] == Approx(0.09003057).epsilon(1e-6));
  CHECK(x[1] == Approx(0.24472847).epsilon(1e-6));
  CHECK(x[2] == Approx(0.66524096).epsilon(1e-6));
  std::vector<float> big = {1000, 1000, -INFINITY};
  lf::softmax(big.data(), 3);
  CHECK(big[0] == Approx(0.5).epsilon(1e-7));
  CHECK(big[1] == Approx(0.5).epsilon(1e-7));
  CHECK(big[2] == 0.0f);
}

TEST_CASE("softcap is cap * tanh(x / cap)", "[ops]") {
  std::vector<float> x = {0.0f, 30.0f, -30.0f, 1e6f, 3.0f};
  lf::softcap(x.data(), 5, 30.0f);
  CHECK(x[0] == 0.0f);
  CHECK(x[1] == Approx(30 * std::tanh(1.0)).epsilon(1e-6));
  CHECK(x[2] == Approx(-30 * std::tanh(1.0)).epsilon(1e-6));
  CHECK(x[3] == Approx(30.0).epsilon(1e-7));
  CHECK(x[4] == Approx(30 * std::tanh(0.1)).epsilon(1e-6));
}

TEST_CASE("GQA: consecutive query heads share a KV head", "[ops]") {
  const int groups_8_2[8] = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int h = 0; h < 8; ++h) CHECK(lf::kv_head_for(h, 8, 2) == groups_8_2[h]);
  for (int h = 0; h < 3; ++h) CHECK(lf::kv_head_for(h, 3, 1) == 0);
  for (int h = 0; h < 3; ++h) CHECK(lf::kv_head_for(h, 3, 3) == h);
  const int groups_32_4[5] = {0, 7, 8, 15, 31};
  const int expect_32_4[5] = {0, 0, 1, 1, 3};
  for (int i = 0; i < 5; ++i) CHECK(lf::kv_head_for(groups_32_4[i], 32, 4) == expect_32_4[i]);
}

TEST_CASE("mask: a query at p1 sees exactly p1-n_swa+1 .. p1 in a window, 0 .. p1 globally", "[ops]") {
  for (int p0 = 0; p0 <= 12; ++p0) {
    CHECK(lf::key_visible(p0, 10, 4) == (p0 >= 7 && p0 <= 10));
    CHECK(lf::key_visible(p0, 10, 0) == (p0 <= 10));
    CHECK(lf::key_visible(p0, 2, 4) == (p0 <= 2));
  }
}

namespace {

// Brute-force attention on f16-rounded q, k, v with a plain softmax in double.
std::vector<float> brute_attention(const std::vector<float>& q, int n_q, int pos0, int n_head,
                                   const std::vector<uint16_t>& k, const std::vector<uint16_t>& v, int n_head_kv,
                                   int D, int capacity, int n_swa) {
  std::vector<float> out(q.size());
  for (int i = 0; i < n_q; ++i) {
    const int p1 = pos0 + i;
    for (int h = 0; h < n_head; ++h) {
      const int g = h / (n_head / n_head_kv);
      std::vector<double> s;
      std::vector<int> pos;
      for (int p0 = 0; p0 <= p1; ++p0) {
        if (n_swa > 0 && p1 - p0 >= n_swa) continue;
        double dot = 0;
        for (int d = 0; d < D; ++d) {
          const float qd = lf::fp16_to_fp32(lf::fp32_to_fp16(q[(i * n_head + h) * D + d]));
          dot += qd * lf::fp16_to_fp32(k[((p0 % capacity) * n_head_kv + g) * D + d]);
        }
        s.push_back(dot);
        pos.push_back(p0);
      }
      double max = -INFINITY, sum = 0;
      for (double x : s) max = std::max(max, x);
      for (double& x : s) sum += (x = std::exp(x - max));
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (size_t j = 0; j < s.size(); ++j) o += s[j] / sum * lf::fp16_to_fp32(v[((pos[j] % capacity) * n_head_kv + g) * D + d]);
        out[(i * n_head + h) * D + d] = static_cast<float>(o);
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("attention matches brute force: GQA, causal and window masks, ring slots", "[ops]") {
  const int D = 8, n_head = 3, n_head_kv = 1;
  struct Case { int capacity, n_swa, pos0, n_q; };
  // Global cache of 12; a ring of 5 slots for window 4 holding positions 5..9 (queries 8, 9).
  const Case cases[] = {{12, 0, 0, 12}, {12, 4, 3, 6}, {5, 4, 8, 2}};
  for (const Case& c : cases) {
    const std::vector<float> kf = random_values(c.capacity * n_head_kv * D, 11);
    const std::vector<float> vf = random_values(c.capacity * n_head_kv * D, 12);
    std::vector<uint16_t> k(kf.size()), v(vf.size());
    for (size_t i = 0; i < kf.size(); ++i) k[i] = lf::fp32_to_fp16(4.0f * kf[i]);
    for (size_t i = 0; i < vf.size(); ++i) v[i] = lf::fp32_to_fp16(vf[i]);
    const std::vector<float> q = random_values(c.n_q * n_head * D, 13);
    lf::KvView view;
    view.k = k.data();
    view.v = v.data();
    view.capacity = c.capacity;
    view.n_head_kv = n_head_kv;
    view.head_dim = D;
    view.first_pos = std::max(0, c.pos0 + c.n_q - c.capacity);
    std::vector<float> out(q.size());
    lf::attention(q.data(), c.n_q, c.pos0, n_head, view, c.n_swa, 1.0f, out.data());
    const std::vector<float> expect =
        brute_attention(q, c.n_q, c.pos0, n_head, k, v, n_head_kv, D, c.capacity, c.n_swa);
    // V is summed in f16 as ggml does: one f16 rounding (2^-11 relative) per visited key.
    for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == Approx(expect[i]).margin(12 * 0x1p-11));
  }
}

TEST_CASE("matmul: F32 equals the plain dot product, quantized within the quantization error", "[ops]") {
  const int n_in = 64, n_out = 5, n_tok = 3;
  const std::vector<float> w = random_values(n_in * n_out, 21);
  const std::vector<float> x = random_values(n_in * n_tok, 22);
  std::vector<double> expect(n_tok * n_out);
  for (int t = 0; t < n_tok; ++t) {
    for (int o = 0; o < n_out; ++o) {
      double s = 0;
      for (int i = 0; i < n_in; ++i) s += static_cast<double>(w[o * n_in + i]) * x[t * n_in + i];
      expect[t * n_out + o] = s;
    }
  }
  lf::WeightView W{GgmlType::F32, n_in, n_out, reinterpret_cast<const uint8_t*>(w.data()), n_in * sizeof(float)};
  std::vector<float> y(n_tok * n_out);
  REQUIRE(lf::matmul(W, x.data(), n_tok, y.data()).ok());
  for (int i = 0; i < n_tok * n_out; ++i) CHECK(y[i] == Approx(expect[i]).margin(1e-6));

  // Q8_0 weights and Q8_0 activations: each side off by at most half a step of amax/127.
  std::vector<lf::block_q8_0> wq(n_out * n_in / 32);
  lf::quantize_row_q8_0_ref(w.data(), wq.data(), n_in * n_out);
  lf::WeightView Wq{GgmlType::Q8_0, n_in, n_out, reinterpret_cast<const uint8_t*>(wq.data()), n_in / 32 * 34};
  REQUIRE(lf::matmul(Wq, x.data(), n_tok, y.data()).ok());
  for (int i = 0; i < n_tok * n_out; ++i) CHECK(y[i] == Approx(expect[i]).margin(n_in * 2.0 / 127));
}

TEST_CASE("matmul_rows over a split of the output rows equals the whole, bit for bit", "[ops]") {
  const int n_in = 64, n_out = 7, n_tok = 2;
  const std::vector<float> w = random_values(n_in * n_out, 31);
  const std::vector<float> x = random_values(n_in * n_tok, 32);
  std::vector<lf::block_q4_0> wq(n_out * n_in / 32);
  lf::quantize_row_q4_0_ref(w.data(), wq.data(), n_in * n_out);
  lf::WeightView W{GgmlType::Q4_0, n_in, n_out, reinterpret_cast<const uint8_t*>(wq.data()), n_in / 32 * 18};
  std::vector<float> whole(n_tok * n_out);
  REQUIRE(lf::matmul(W, x.data(), n_tok, whole.data()).ok());
  std::vector<uint8_t> xc;
  REQUIRE(lf::convert_activations(W, x.data(), n_tok, &xc).ok());
  for (int k = 0; k <= n_out; ++k) {
    std::vector<float> split(n_tok * n_out, -1.0f);
    lf::matmul_rows(W, xc.data(), n_tok, split.data(), 0, k);
    lf::matmul_rows(W, xc.data(), n_tok, split.data(), k, n_out);
    CHECK(split == whole);
  }
}
