// Reference dot products (docs/gguf.md, "Quantized matmul in llama.cpp's CPU backend"): every
// weight type against a double-precision sum of dequantized products, and bit-exact against integer
// references written here in llama.cpp's own loop shape.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "quant/quant.h"
#include "support/quant_test_data.h"

namespace {

using lf::GgmlType;

constexpr GgmlType kDotTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                                  GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                                  GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

bool is_k_quant(GgmlType t) { return t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K; }

// A random f16 scale: a mantissa in [0.5, 1.5) times `magnitude`, with a random sign if `signed_`.
uint16_t random_half(std::mt19937& rng, float magnitude, bool signed_) {
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  const float sign = signed_ && (rng() & 1) ? -1.0f : 1.0f;
  return lf::fp32_to_fp16(sign * u(rng) * magnitude);
}

template <typename Block>
std::vector<Block> random_blocks(std::mt19937& rng, int64_t count) {
  std::vector<Block> blocks(static_cast<size_t>(count));
  auto* bytes = reinterpret_cast<uint8_t*>(blocks.data());
  for (size_t i = 0; i < blocks.size() * sizeof(Block); ++i) bytes[i] = static_cast<uint8_t>(rng());
  return blocks;
}

template <typename Block>
std::vector<uint8_t> as_bytes(const std::vector<Block>& blocks) {
  std::vector<uint8_t> out(blocks.size() * sizeof(Block));
  std::memcpy(out.data(), blocks.data(), out.size());
  return out;
}

// A weight row of n elements of `type`: quantized from random floats where we have a quantizer,
// random bits with sane f16 scales otherwise.
std::vector<uint8_t> random_weight_row(std::mt19937& rng, GgmlType type, int64_t n) {
  const auto x = lf_test::random_row(rng, n);
  std::uniform_int_distribution<int> pick(0, 2);
  const float magnitudes[3] = {1e-6f, 1e-2f, 10.0f};
  switch (type) {
    case GgmlType::F32: {
      std::vector<uint8_t> out(x.size() * sizeof(float));
      std::memcpy(out.data(), x.data(), out.size());
      return out;
    }
    case GgmlType::F16:
    case GgmlType::BF16: {
      std::vector<uint16_t> h(x.size());
      for (size_t i = 0; i < x.size(); ++i) h[i] = type == GgmlType::F16 ? lf::fp32_to_fp16(x[i]) : lf::fp32_to_bf16(x[i]);
      return as_bytes(h);
    }
    case GgmlType::Q4_0: {
      std::vector<lf::block_q4_0> b(static_cast<size_t>(n / 32));
      lf::quantize_row_q4_0_ref(x.data(), b.data(), n);
      return as_bytes(b);
    }
    case GgmlType::Q8_0: {
      std::vector<lf::block_q8_0> b(static_cast<size_t>(n / 32));
      lf::quantize_row_q8_0_ref(x.data(), b.data(), n);
      return as_bytes(b);
    }
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: {
      auto set = [&](auto& blk) {
        const float mag = magnitudes[pick(rng)];
        blk.d = random_half(rng, mag, false);
        blk.m = random_half(rng, 8 * mag, true);
      };
      if (type == GgmlType::Q4_1) {
        auto b = random_blocks<lf::block_q4_1>(rng, n / 32);
        for (auto& blk : b) set(blk);
        return as_bytes(b);
      }
      auto b = random_blocks<lf::block_q5_1>(rng, n / 32);
      for (auto& blk : b) set(blk);
      return as_bytes(b);
    }
    case GgmlType::Q5_0: {
      auto b = random_blocks<lf::block_q5_0>(rng, n / 32);
      for (auto& blk : b) blk.d = random_half(rng, magnitudes[pick(rng)], true);
      return as_bytes(b);
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      auto set = [&](auto& blk) {
        const float mag = magnitudes[pick(rng)];
        blk.d = random_half(rng, mag, false);
        blk.dmin = random_half(rng, mag / 4, false);
      };
      if (type == GgmlType::Q4_K) {
        auto b = random_blocks<lf::block_q4_K>(rng, n / 256);
        for (auto& blk : b) set(blk);
        return as_bytes(b);
      }
      auto b = random_blocks<lf::block_q5_K>(rng, n / 256);
      for (auto& blk : b) set(blk);
      return as_bytes(b);
    }
    case GgmlType::Q6_K: {
      auto b = random_blocks<lf::block_q6_K>(rng, n / 256);
      for (auto& blk : b) blk.d = random_half(rng, magnitudes[pick(rng)] / 16, true);
      return as_bytes(b);
    }
    default: FAIL("no generator for this type"); return {};
  }
}

// The converted activation row read back as doubles, decoded here from the block layouts.
std::vector<double> activation_values(GgmlType act_type, const std::vector<uint8_t>& a, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  const uint8_t* p = a.data();
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    uint16_t h;
    switch (act_type) {
      case GgmlType::F32: {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        v[k] = f;
        break;
      }
      case GgmlType::Q8_0: {  // d f16 @0, qs @2, 34 bytes
        const uint8_t* blk = p + 34 * (i / 32);
        std::memcpy(&h, blk, 2);
        v[k] = static_cast<double>(lf::fp16_to_fp32(h)) * static_cast<int8_t>(blk[2 + i % 32]);
        break;
      }
      case GgmlType::Q8_1: {  // d f16 @0, s f16 @2, qs @4, 36 bytes
        const uint8_t* blk = p + 36 * (i / 32);
        std::memcpy(&h, blk, 2);
        v[k] = static_cast<double>(lf::fp16_to_fp32(h)) * static_cast<int8_t>(blk[4 + i % 32]);
        break;
      }
      case GgmlType::Q8_K: {  // d f32 @0, qs @4, 292 bytes
        const uint8_t* blk = p + 292 * (i / 256);
        float d;
        std::memcpy(&d, blk, 4);
        v[k] = static_cast<double>(d) * static_cast<int8_t>(blk[4 + i % 256]);
        break;
      }
      default: FAIL("unexpected activation type");
    }
  }
  return v;
}

// Q4_1/Q5_1 dots take Σa of a block from the f16 field s (docs/gguf.md, "Q8_1"), not from the quantized
// values: the exact value llama.cpp computes is Σ w·a + Σ_blocks m·(s − Σa).
double q8_1_min_correction(GgmlType weight_type, const std::vector<uint8_t>& w, const std::vector<uint8_t>& a,
                           const std::vector<double>& a_values, int64_t n) {
  if (weight_type != GgmlType::Q4_1 && weight_type != GgmlType::Q5_1) return 0.0;
  const size_t w_block = weight_type == GgmlType::Q4_1 ? 20 : 24;
  double correction = 0.0;
  for (int64_t b = 0; b < n / 32; ++b) {
    uint16_t m, s;
    std::memcpy(&m, w.data() + w_block * b + 2, 2);
    std::memcpy(&s, a.data() + 36 * b + 2, 2);
    double sum_a = 0.0;
    for (int i = 0; i < 32; ++i) sum_a += a_values[static_cast<size_t>(32 * b + i)];
    correction += static_cast<double>(lf::fp16_to_fp32(m)) * (lf::fp16_to_fp32(s) - sum_a);
  }
  return correction;
}

std::vector<uint8_t> converted(GgmlType weight_type, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> a(static_cast<size_t>(lf::activation_row_bytes(weight_type, n)));
  const lf::Status s = lf::convert_activation_row(weight_type, x.data(), a.data(), n);
  REQUIRE(s.ok());
  return a;
}

}  // namespace

TEST_CASE("vec_dot_type pairs each weight type with its activation format", "[quant]") {
  CHECK(lf::vec_dot_type(GgmlType::F32) == GgmlType::F32);
  CHECK(lf::vec_dot_type(GgmlType::F16) == GgmlType::F32);  // unrounded, unlike llama.cpp's builds without AMX
  CHECK(lf::vec_dot_type(GgmlType::BF16) == GgmlType::F32);
  CHECK(lf::vec_dot_type(GgmlType::Q4_0) == GgmlType::Q8_0);
  CHECK(lf::vec_dot_type(GgmlType::Q5_0) == GgmlType::Q8_0);
  CHECK(lf::vec_dot_type(GgmlType::Q8_0) == GgmlType::Q8_0);
  CHECK(lf::vec_dot_type(GgmlType::Q4_1) == GgmlType::Q8_1);
  CHECK(lf::vec_dot_type(GgmlType::Q5_1) == GgmlType::Q8_1);
  CHECK(lf::vec_dot_type(GgmlType::Q4_K) == GgmlType::Q8_K);
  CHECK(lf::vec_dot_type(GgmlType::Q5_K) == GgmlType::Q8_K);
  CHECK(lf::vec_dot_type(GgmlType::Q6_K) == GgmlType::Q8_K);

  CHECK(lf::activation_row_bytes(GgmlType::F32, 32) == 128);
  CHECK(lf::activation_row_bytes(GgmlType::BF16, 32) == 128);
  CHECK(lf::activation_row_bytes(GgmlType::Q4_0, 64) == 68);
  CHECK(lf::activation_row_bytes(GgmlType::Q5_1, 64) == 72);
  CHECK(lf::activation_row_bytes(GgmlType::Q6_K, 5376) == 21 * 292);
  CHECK(lf::activation_row_bytes(GgmlType::F32, int64_t{1} << 31) == uint64_t{1} << 33);  // > 4 GiB
}

TEST_CASE("convert_activation_row matches the direct converters", "[quant]") {
  std::mt19937 rng(7);
  const int64_t n = 512;
  const auto x = lf_test::random_row(rng, n);
  for (const GgmlType type : kDotTypes) {
    CAPTURE(static_cast<int>(type));
    const auto a = converted(type, x);
    std::vector<uint8_t> expected(a.size());
    switch (lf::vec_dot_type(type)) {
      case GgmlType::F32: std::memcpy(expected.data(), x.data(), expected.size()); break;
      case GgmlType::Q8_0:
        lf::quantize_row_q8_0_x86(x.data(), reinterpret_cast<lf::block_q8_0*>(expected.data()), n);
        break;
      case GgmlType::Q8_1:
        lf::quantize_row_q8_1_x86(x.data(), reinterpret_cast<lf::block_q8_1*>(expected.data()), n);
        break;
      case GgmlType::Q8_K:
        lf::quantize_row_q8_K_ref(x.data(), reinterpret_cast<lf::block_q8_K*>(expected.data()), n);
        break;
      default: FAIL("unexpected activation type");
    }
    CHECK(a == expected);
  }
}

TEST_CASE("convert_activation_row refuses what it cannot do", "[quant]") {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> dst(4096);
  lf::Status s = lf::convert_activation_row(GgmlType::Q2_K, x.data(), dst.data(), 256);
  CHECK(s.code() == lf::Code::unsupported);
  CHECK_THAT(s.message(), Catch::Contains("Q2_K"));
  s = lf::convert_activation_row(GgmlType::Q8_1, x.data(), dst.data(), 32);
  CHECK(s.code() == lf::Code::unsupported);
  s = lf::convert_activation_row(static_cast<GgmlType>(77), x.data(), dst.data(), 32);
  CHECK(s.code() == lf::Code::unsupported);
  CHECK_THAT(s.message(), Catch::Contains("77"));
  s = lf::convert_activation_row(GgmlType::Q4_K, x.data(), dst.data(), 100);
  CHECK(s.code() == lf::Code::invalid_argument);
  CHECK_THAT(s.message(), Catch::Contains("100"));
  s = lf::convert_activation_row(GgmlType::Q4_0, x.data(), dst.data(), 48);
  CHECK(s.code() == lf::Code::invalid_argument);
  s = lf::convert_activation_row(GgmlType::F16, x.data(), dst.data(), -2);
  CHECK(s.code() == lf::Code::invalid_argument);
}

TEST_CASE("vec_dot_ref agrees with a double-precision sum of dequantized products", "[quant]") {
  std::mt19937 rng(2024);
  for (const GgmlType type : kDotTypes) {
    for (const int64_t n : {int64_t{32}, int64_t{256}, int64_t{1024}, int64_t{5376}}) {
      if (is_k_quant(type) && n % 256 != 0) continue;
      CAPTURE(static_cast<int>(type), n);
      const auto w = random_weight_row(rng, type, n);
      auto x = lf_test::random_row(rng, n);
      if (lf::vec_dot_type(type) == GgmlType::Q8_1) {
        // Q8_1 keeps Σa per block in an f16, which saturates past 65504 (as llama.cpp's does):
        // keep these activations where that sum is finite.
        for (float& v : x) v *= 1e-2f;
      }
      const auto a = converted(type, x);
      std::vector<float> w_values(static_cast<size_t>(n));
      REQUIRE(lf::dequantize_row(type, w.data(), w_values.data(), n).ok());
      const auto a_values = activation_values(lf::vec_dot_type(type), a, n);

      double expected = q8_1_min_correction(type, w, a, a_values, n);
      double magnitude = std::fabs(expected);
      for (size_t i = 0; i < w_values.size(); ++i) {
        expected += w_values[i] * a_values[i];
        magnitude += std::fabs(w_values[i] * a_values[i]);
      }
      const float got = lf::vec_dot_ref(type, w.data(), a.data(), n);
      CHECK(std::isfinite(got));
      CHECK(std::fabs(got - expected) <= 1e-5 * magnitude + 1e-30);
    }
  }
}

TEST_CASE("Q4_0 x Q8_0 and Q8_0 x Q8_0 are bit-exact with an integer reference and one fused step per block", "[quant]") {
  std::mt19937 rng(5);
  constexpr int kBlocks = 64;
  const int64_t n = 32 * kBlocks;
  // Activations that follow the weights' signs (a = 15·w) give large |sumi| and so products
  // sumi·dw·da with more bits than an f32 holds: the fused step and an add of the rounded
  // product then differ on some blocks.
  auto w4 = random_blocks<lf::block_q4_0>(rng, kBlocks);
  std::vector<lf::block_q8_0> w8(kBlocks), a(kBlocks);
  for (int b = 0; b < kBlocks; ++b) {
    w4[b].d = random_half(rng, 0.1f, true);
    a[b].d = random_half(rng, 0.01f, true);
    w8[b].d = random_half(rng, 0.1f, true);
    for (int j = 0; j < 16; ++j) {
      a[b].qs[j] = static_cast<int8_t>(((w4[b].qs[j] & 0x0F) - 8) * 15);
      a[b].qs[j + 16] = static_cast<int8_t>(((w4[b].qs[j] >> 4) - 8) * 15);
    }
    for (int i = 0; i < 32; ++i) w8[b].qs[i] = static_cast<int8_t>(a[b].qs[i] + static_cast<int>(rng() % 7) - 3);
  }

  // sumf = fma(sumi, dw·da, sumf) block after block (std::fma: the platform's, an independent
  // check of lf::fma_f32 wherever results are normal floats, as all of these are), and how often
  // the unfused step would differ.
  float expected4 = 0.0f;
  float expected8 = 0.0f;
  int fusion_matters = 0;
  for (int b = 0; b < kBlocks; ++b) {
    int sumi4 = 0;
    int sumi8 = 0;
    for (int j = 0; j < 16; ++j) {
      sumi4 += ((w4[b].qs[j] & 0x0F) - 8) * a[b].qs[j] + ((w4[b].qs[j] >> 4) - 8) * a[b].qs[j + 16];
      sumi8 += w8[b].qs[j] * a[b].qs[j] + w8[b].qs[j + 16] * a[b].qs[j + 16];
    }
    const float da = lf::fp16_to_fp32(a[b].d);
    const float d4 = lf::fp16_to_fp32(w4[b].d) * da;
    const float d8 = lf::fp16_to_fp32(w8[b].d) * da;
    const float fused4 = std::fma(static_cast<float>(sumi4), d4, expected4);
    const float fused8 = std::fma(static_cast<float>(sumi8), d8, expected8);
    const float p4 = static_cast<float>(sumi4) * d4;
    if (fused4 != expected4 + p4) ++fusion_matters;
    CHECK(lf::vec_dot_ref(GgmlType::Q4_0, &w4[b], &a[b], 32) == p4);  // one block from 0: the rounded product
    expected4 = fused4;
    expected8 = fused8;
  }
  CHECK(fusion_matters > 0);
  CHECK(lf::vec_dot_ref(GgmlType::Q4_0, w4.data(), a.data(), n) == expected4);
  CHECK(lf::vec_dot_ref(GgmlType::Q8_0, w8.data(), a.data(), n) == expected8);
}

TEST_CASE("fma_f32 is a correctly rounded fused multiply-add, halfway points and subnormals included", "[quant]") {
  const auto same = [](float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; };
  // Random operands over many binades, and products placed next to c's midpoints: the same bits
  // as the platform's fma (std::fma, correctly rounded for the normal results these give).
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> exponent(-60, 60);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  const auto random_float = [&] { return (rng() & 1 ? -1.0f : 1.0f) * std::ldexp(mantissa(rng), exponent(rng)); };
  int mismatches = 0;
  int double_rounded = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = random_float(), y = random_float();
    float z = random_float();
    if (i % 2) z = std::ldexp(std::fabs(x * y), 24 + static_cast<int>(rng() % 3)) * (rng() & 1 ? 1.0f : -1.0f);
    if (!same(lf::fma_f32(x, y, z), std::fma(x, y, z))) ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(same(lf::fma_f32(0.0f, -1.0f, 0.0f), 0.0f));
  CHECK(same(lf::fma_f32(0.0f, -1.0f, -0.0f), -0.0f));
  CHECK(same(lf::fma_f32(1e30f, 1e30f, 1.0f), INFINITY));
  CHECK(same(lf::fma_f32(-1e30f, 1e30f, 1.0f), -INFINITY));
  CHECK(std::isnan(lf::fma_f32(INFINITY, 0.0f, 1.0f)));
  CHECK(std::isnan(lf::fma_f32(1.0f, 1.0f, NAN)));

  // Constructed double roundings, with their values by hand. Normal: a·b = 2^-24 - 2^-64 is half
  // an ulp of c = 1 + 2^-23 minus a hair, so the exact sum rounds down to c; double drops the
  // hair, lands on the midpoint and ties to even, up to 1 + 2^-22. Both signs.
  for (const float sign : {1.0f, -1.0f}) {
    const float a = 1.0f + 0x1p-20f, b = 0x1p-24f * (1.0f - 0x1p-20f), c = sign * (1.0f + 0x1p-23f);
    if (static_cast<float>(static_cast<double>(sign * a) * b + c) == sign * (1.0f + 0x1p-22f)) ++double_rounded;
    CHECK(same(lf::fma_f32(sign * a, b, c), sign * (1.0f + 0x1p-23f)));
    // and a hair above the midpoint: the exact sum rounds up, as the double sum does
    CHECK(same(lf::fma_f32(sign * (1.0f + 0x1p-20f), 0x1p-24f * (1.0f + 0x1p-20f), c), sign * (1.0f + 0x1p-22f)));
  }
  // Subnormal result: a·b = 2^-150 - 2^-196, c = 2^-127 + 2^-149 (odd in units of 2^-149): the
  // exact sum lies just below the midpoint c + 2^-150, so it rounds down to c; double lands on
  // the midpoint and ties to even, up to c + 2^-149 (as Emscripten's fmaf returns).
  const float sa = 0x1p-75f * (1.0f + 0x1p-23f), sb = 0x1p-75f * (1.0f - 0x1p-23f), sc = 0x1p-127f + 0x1p-149f;
  if (static_cast<float>(static_cast<double>(sa) * sb + sc) == sc + 0x1p-149f) ++double_rounded;
  CHECK(same(lf::fma_f32(sa, sb, sc), sc));
  CHECK(same(lf::fma_f32(0x1p-75f, 0x1p-75f, 0x1p-149f), 0x1p-148f));  // 2^-150 + 2^-149 exactly: ties to even
  CHECK(double_rounded == 3);  // the cases above are the ones double arithmetic gets wrong
}

namespace {

// llama.cpp's generic Q4_K x Q8_K in its own shape: scales and mins unpacked with the kmask
// word trick (not get_scale_min_k4), products into 8 int32 lanes, lanes summed last.
float q4_K_dot_as_llama_cpp(const lf::block_q4_K* x, const lf::block_q8_K* y, int nb) {
  const uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  float sums[8] = {};
  float sumf = 0.0f;
  for (int i = 0; i < nb; ++i) {
    int8_t aux8[256];
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) aux8[64 * j + l] = static_cast<int8_t>(x[i].qs[32 * j + l] & 0xF);
      for (int l = 0; l < 32; ++l) aux8[64 * j + 32 + l] = static_cast<int8_t>(x[i].qs[32 * j + l] >> 4);
    }
    uint32_t utmp[4];
    std::memcpy(utmp, x[i].scales, 12);
    utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4);
    const uint32_t uaux = utmp[1] & kmask1;
    utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4);
    utmp[2] = uaux;
    utmp[0] &= kmask1;
    uint8_t scales[8], mins[8];
    std::memcpy(scales, &utmp[0], 8);
    std::memcpy(mins, &utmp[2], 8);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) sumi += y[i].bsums[j] * mins[j / 2];
    int32_t aux32[8] = {};
    for (int j = 0; j < 8; ++j) {
      for (int chunk = 0; chunk < 4; ++chunk) {
        for (int l = 0; l < 8; ++l) {
          const int e = 32 * j + 8 * chunk + l;
          aux32[l] += scales[j] * static_cast<int16_t>(y[i].qs[e] * aux8[e]);
        }
      }
    }
    const float d = lf::fp16_to_fp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
    const float dmin = lf::fp16_to_fp32(x[i].dmin) * y[i].d;
    sumf -= dmin * static_cast<float>(sumi);
  }
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

// llama.cpp's generic Q6_K x Q8_K in its own shape.
float q6_K_dot_as_llama_cpp(const lf::block_q6_K* x, const lf::block_q8_K* y, int nb) {
  float sums[8] = {};
  for (int i = 0; i < nb; ++i) {
    int8_t aux8[256];
    const uint8_t* q4 = x[i].ql;
    const uint8_t* qh = x[i].qh;
    int8_t* a = aux8;
    for (int j = 0; j < 256; j += 128) {
      for (int l = 0; l < 32; ++l) {
        a[l + 0] = static_cast<int8_t>(((q4[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        a[l + 32] = static_cast<int8_t>(((q4[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        a[l + 64] = static_cast<int8_t>(((q4[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        a[l + 96] = static_cast<int8_t>(((q4[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
      a += 128;
      q4 += 64;
      qh += 32;
    }
    int32_t aux32[8] = {};
    for (int j = 0; j < 16; ++j) {
      for (int chunk = 0; chunk < 2; ++chunk) {
        for (int l = 0; l < 8; ++l) {
          const int e = 16 * j + 8 * chunk + l;
          aux32[l] += x[i].scales[j] * static_cast<int16_t>(y[i].qs[e] * aux8[e]);
        }
      }
    }
    const float d = lf::fp16_to_fp32(x[i].d) * y[i].d;
    for (int l = 0; l < 8; ++l) sums[l] += d * static_cast<float>(aux32[l]);
  }
  float sumf = 0.0f;
  for (int l = 0; l < 8; ++l) sumf += sums[l];
  return sumf;
}

}  // namespace

TEST_CASE("Q4_K and Q6_K x Q8_K are bit-exact with llama.cpp's loop shape", "[quant]") {
  std::mt19937 rng(11);
  for (const int nb : {1, 4, 21}) {
    const int64_t n = 256 * nb;
    const auto w4 = random_weight_row(rng, GgmlType::Q4_K, n);
    const auto w6 = random_weight_row(rng, GgmlType::Q6_K, n);
    const auto a = converted(GgmlType::Q4_K, lf_test::random_row(rng, n));
    const auto* ay = reinterpret_cast<const lf::block_q8_K*>(a.data());
    CHECK(lf::vec_dot_ref(GgmlType::Q4_K, w4.data(), a.data(), n) ==
          q4_K_dot_as_llama_cpp(reinterpret_cast<const lf::block_q4_K*>(w4.data()), ay, nb));
    CHECK(lf::vec_dot_ref(GgmlType::Q6_K, w6.data(), a.data(), n) ==
          q6_K_dot_as_llama_cpp(reinterpret_cast<const lf::block_q6_K*>(w6.data()), ay, nb));
  }
}
