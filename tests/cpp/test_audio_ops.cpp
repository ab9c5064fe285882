// The audio encoder's ops against their definitions: glibc's expf and tanhf (which llama.cpp
// calls) bit for bit where the test runs on glibc, the LayerNorm and SiLU of ggml's AVX-512
// build against hand-derived sums, and mtmd's frame and token counts.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "audio/audio_config.h"
#include "kernels/exp_ggml.h"
#include "ops/ops.h"
#include "quant/quant.h"

#ifdef __GLIBC__
TEST_CASE("exp_f32 and tanh_f32 are glibc's expf and tanhf, bit for bit", "[ops]") {
  // Every 2039th f32 (about 2.1 million, all exponents and signs) and the soft cap's range densely.
  // The two inputs where exp_f32 and glibc 2.36's expf part (docs in ops/expf.cpp) are skipped.
  const uint32_t kExpExceptions[] = {lf::f32_bits(0x1.04845ep+5f), lf::f32_bits(-0x1.f8cbb2p+5f)};
  uint64_t checked = 0;
  const auto check = [&](float x) {
    if (std::isnan(x)) return;
    ++checked;
    INFO("x = " << x << " (" << std::hexfloat << x << ")");
    REQUIRE(lf::f32_bits(lf::tanh_f32(x)) == lf::f32_bits(::tanhf(x)));
    const uint32_t b = lf::f32_bits(x);
    if (b != kExpExceptions[0] && b != kExpExceptions[1]) REQUIRE(lf::f32_bits(lf::exp_f32(x)) == lf::f32_bits(::expf(x)));
  };
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 2039) check(lf::f32_from_bits(static_cast<uint32_t>(u)));
  for (float x = -2.0f; x <= 2.0f; x += 1e-5f) check(x);
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, 1e-40f, 88.7f, -103.0f, 22.0f, -22.0f, 0.34657359f}) check(x);
  REQUIRE(checked > 2000000);
}
#endif

TEST_CASE("exp_f32 and tanh_f32 at their edges", "[ops]") {
  REQUIRE(lf::exp_f32(0.0f) == 1.0f);
  REQUIRE(lf::exp_f32(-INFINITY) == 0.0f);
  REQUIRE(lf::exp_f32(INFINITY) == INFINITY);
  REQUIRE(lf::exp_f32(100.0f) == INFINITY);
  REQUIRE(lf::exp_f32(-110.0f) == 0.0f);
  REQUIRE(std::isnan(lf::exp_f32(NAN)));
  REQUIRE(std::fabs(lf::exp_f32(1.0f) - 2.7182817f) <= 2.4e-7f);
  REQUIRE(lf::tanh_f32(0.0f) == 0.0f);
  REQUIRE(std::signbit(lf::tanh_f32(-0.0f)));
  REQUIRE(lf::tanh_f32(30.0f) == 1.0f);
  REQUIRE(lf::tanh_f32(-INFINITY) == -1.0f);
  REQUIRE(std::isnan(lf::tanh_f32(NAN)));
  REQUIRE(lf::tanh_f32(1e-30f) == 1e-30f);
  for (float x : {-5.0f, -0.7f, -0.01f, 0.003f, 0.5f, 1.3f, 9.0f}) {
    INFO("x = " << x);
    REQUIRE(std::fabs(lf::tanh_f32(x) - static_cast<float>(std::tanh(static_cast<double>(x)))) <= 2.4e-7f * std::fabs(std::tanh(x)));
  }
}

TEST_CASE("layernorm: the mean and variance of ggml_norm, weight applied after", "[ops]") {
  // 20 values (one 16-lane group and a tail of 4): mean 9.5, variance (20² - 1) / 12.
  std::vector<float> x(20), w(20, 2.0f), y(20);
  for (int i = 0; i < 20; ++i) x[i] = static_cast<float>(i);
  lf::layernorm(x.data(), w.data(), 20, 1e-6f, y.data());
  const float scale = 1.0f / std::sqrt(399.0f / 12.0f + 1e-6f);
  for (int i = 0; i < 20; ++i) REQUIRE(y[i] == ((static_cast<float>(i) - 9.5f) * scale) * 2.0f);
  lf::layernorm(x.data(), nullptr, 20, 1e-6f, x.data());  // in place, no weight
  for (int i = 0; i < 20; ++i) REQUIRE(x[i] == y[i] / 2.0f);
}

TEST_CASE("silu: ggml_v_expf for each 16, glibc's expf for the tail", "[ops]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(37), y(37);
  for (float& v : x) v = normal(rng);
  lf::silu(x.data(), 37, y.data());
  for (int i = 0; i < 37; ++i) {
    INFO("i = " << i);
    const float e = i < 32 ? lf::expf_ggml(0.0f - x[i]) : lf::exp_f32(-x[i]);
    REQUIRE(lf::f32_bits(y[i]) == lf::f32_bits(x[i] / (1.0f + e)));
  }
}

TEST_CASE("audio: mtmd's frames and tokens per clip length", "[ops]") {
  const lf::AudioConfig c;  // llama.cpp's front-end constants: 320-sample frames every 160
  // PyTorch's unfold of 321 every 160 after 160 zeros, counted in C++'s truncating division.
  REQUIRE(c.frames(1) == 0);
  REQUIRE(c.frames(2) == 1);
  REQUIRE(c.frames(320) == 1);
  REQUIRE(c.frames(321) == 2);
  REQUIRE(c.frames(16000) == 99);
  REQUIRE(c.frames(480000) == 2999);
  REQUIRE(lf::AudioConfig::tokens(1) == 1);
  REQUIRE(lf::AudioConfig::tokens(4) == 1);
  REQUIRE(lf::AudioConfig::tokens(5) == 2);
  REQUIRE(lf::AudioConfig::tokens(2999) == 750);
}
