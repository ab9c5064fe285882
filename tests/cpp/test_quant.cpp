// Block formats: hand-made blocks whose values are worked out here from the formulas
// (docs/gguf.md, "Legacy blocks" and "K-quants"), and the reference quantizers' rounding
// (docs/gguf.md, "Reference quantizers" and "Activation quantization").
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "quant/quant.h"
#include "support/quant_test_data.h"

namespace {

// f16 bit patterns of small exact values, written out so blocks can be built by hand.
constexpr uint16_t kHalf0_125 = 0x3000;
constexpr uint16_t kHalf0_25 = 0x3400;
constexpr uint16_t kHalf0_5 = 0x3800;
constexpr uint16_t kHalf1 = 0x3C00;
constexpr uint16_t kHalf2 = 0x4000;
constexpr uint16_t kHalf3 = 0x4200;
constexpr uint16_t kHalfMinus1 = 0xBC00;

std::vector<float> dequantized(lf::GgmlType type, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  const lf::Status s = lf::dequantize_row(type, src, out.data(), n);
  REQUIRE(s.ok());
  return out;
}

// The Q4_K/Q5_K scale bytes used below, worked out by hand for these (scale, min) pairs:
//   j    0  1  2  3   4   5   6   7
//   sc   1  2  3  4  33  50  17  63
//   m    5  6  7  8  40   9  63  20
// bytes 0..3 = sc_j | (sc_{j+4} >> 4) << 6, bytes 4..7 = m_j | (m_{j+4} >> 4) << 6,
// bytes 8..11 = (sc_{j+4} & 15) | (m_{j+4} & 15) << 4.
constexpr uint8_t kKScales[12] = {0x81, 0xC2, 0x43, 0xC4, 0x85, 0x06, 0xC7, 0x48, 0x81, 0x92, 0xF1, 0x4F};
constexpr int kKSc[8] = {1, 2, 3, 4, 33, 50, 17, 63};
constexpr int kKMin[8] = {5, 6, 7, 8, 40, 9, 63, 20};

// A Q8 block with amax 127 (d = 1 exactly), halves of both signs, zeros after element 8.
void halves_block(float x[32]) {
  const float head[9] = {127.0f, -127.0f, 2.5f, -2.5f, 0.49f, -0.5f, 1.5f, 126.5f, 10.0f};
  for (int i = 0; i < 32; ++i) x[i] = i < 9 ? head[i] : 0.0f;
}

}  // namespace

TEST_CASE("dequantize F32, F16, BF16", "[quant]") {
  const float f32[3] = {1.5f, -2.25f, 1e-30f};
  CHECK(dequantized(lf::GgmlType::F32, f32, 3) == std::vector<float>{1.5f, -2.25f, 1e-30f});
  const uint16_t f16[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF};
  CHECK(dequantized(lf::GgmlType::F16, f16, 4) == std::vector<float>{1.0f, -2.0f, 0x1p-24f, 65504.0f});
  const uint16_t bf16[3] = {0x3F80, 0xC040, 0x4780};
  CHECK(dequantized(lf::GgmlType::BF16, bf16, 3) == std::vector<float>{1.0f, -3.0f, 65536.0f});
}

TEST_CASE("dequantize Q4_0 and Q4_1 hand-made blocks", "[quant]") {
  lf::block_q4_0 q40{};
  q40.d = kHalf0_5;
  lf::block_q4_1 q41{};
  q41.d = kHalf0_25;
  q41.m = kHalfMinus1;
  for (int j = 0; j < 16; ++j) {
    q40.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    q41.qs[j] = static_cast<uint8_t>(((j * 3) & 15) | (((j + 5) & 15) << 4));
  }
  const auto y40 = dequantized(lf::GgmlType::Q4_0, &q40, 32);
  const auto y41 = dequantized(lf::GgmlType::Q4_1, &q41, 32);
  for (int j = 0; j < 16; ++j) {
    // Element j is the low nibble of byte j, element j + 16 its high nibble.
    CHECK(y40[j] == (j - 8) * 0.5f);
    CHECK(y40[j + 16] == ((15 - j) - 8) * 0.5f);
    CHECK(y41[j] == ((j * 3) & 15) * 0.25f - 1.0f);
    CHECK(y41[j + 16] == ((j + 5) & 15) * 0.25f - 1.0f);
  }
}

TEST_CASE("dequantize Q5_0 and Q5_1 hand-made blocks", "[quant]") {
  // qh as a little-endian uint32 = 0xFF000FA5: bits 0, 2, 5, 7, 8..11 and 24..31 are set.
  const uint8_t qh[4] = {0xA5, 0x0F, 0x00, 0xFF};
  const uint32_t high_bits = 0xFF000FA5u;
  lf::block_q5_0 q50{};
  q50.d = kHalf2;
  lf::block_q5_1 q51{};
  q51.d = kHalf0_5;
  q51.m = kHalf3;
  std::memcpy(q50.qh, qh, 4);
  std::memcpy(q51.qh, qh, 4);
  for (int j = 0; j < 16; ++j) {
    q50.qs[j] = static_cast<uint8_t>((j * 7) & 0xFF);
    q51.qs[j] = static_cast<uint8_t>((j * 7) & 0xFF);
  }
  const auto y50 = dequantized(lf::GgmlType::Q5_0, &q50, 32);
  const auto y51 = dequantized(lf::GgmlType::Q5_1, &q51, 32);
  for (int i = 0; i < 32; ++i) {
    const int byte = ((i % 16) * 7) & 0xFF;
    const int nibble = i < 16 ? byte & 15 : byte >> 4;
    const int q = nibble | static_cast<int>((high_bits >> i) & 1) << 4;
    CHECK(y50[i] == (q - 16) * 2.0f);
    CHECK(y51[i] == q * 0.5f + 3.0f);
  }
  CHECK(y50[0] == 0.0f);    // element 0: nibble 0, bit 0 set -> (16 - 16)·2
  CHECK(y50[1] == -18.0f);  // element 1: nibble 7, bit 1 clear -> (7 - 16)·2
  CHECK(y51[31] == 14.0f);  // element 31: high nibble of byte 15 (0x69) is 6, bit 31 set -> 22·0.5 + 3
}

TEST_CASE("dequantize Q8_0 hand-made block", "[quant]") {
  lf::block_q8_0 b{};
  b.d = kHalf0_125;
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(i * 8 - 128);
  const auto y = dequantized(lf::GgmlType::Q8_0, &b, 32);
  for (int i = 0; i < 32; ++i) CHECK(y[i] == (i * 8 - 128) * 0.125f);
  CHECK(y[0] == -16.0f);
}

TEST_CASE("dequantize Q4_K and Q5_K hand-made super-blocks", "[quant]") {
  lf::block_q4_K q4{};
  q4.d = kHalf1;
  q4.dmin = kHalf0_5;
  std::memcpy(q4.scales, kKScales, 12);
  lf::block_q5_K q5{};
  q5.d = kHalf0_25;
  q5.dmin = kHalf2;
  std::memcpy(q5.scales, kKScales, 12);
  for (int i = 0; i < 128; ++i) {
    q4.qs[i] = static_cast<uint8_t>((i * 7 + 3) & 0xFF);
    q5.qs[i] = static_cast<uint8_t>((i * 13 + 1) & 0xFF);
  }
  for (int l = 0; l < 32; ++l) q5.qh[l] = static_cast<uint8_t>((l * 37) & 0xFF);

  const auto y4 = dequantized(lf::GgmlType::Q4_K, &q4, 256);
  const auto y5 = dequantized(lf::GgmlType::Q5_K, &q5, 256);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      // Chunk c: byte 32c + l holds element 64c + l (low, sub-block 2c) and 64c + 32 + l (high).
      const int lo = 64 * c + l;
      const int hi = lo + 32;
      const int s_lo = 2 * c;
      const int s_hi = 2 * c + 1;
      const int b4 = ((c * 32 + l) * 7 + 3) & 0xFF;
      CHECK(y4[lo] == 1.0f * kKSc[s_lo] * (b4 & 15) - 0.5f * kKMin[s_lo]);
      CHECK(y4[hi] == 1.0f * kKSc[s_hi] * (b4 >> 4) - 0.5f * kKMin[s_hi]);
      const int b5 = ((c * 32 + l) * 13 + 1) & 0xFF;
      const int qh = (l * 37) & 0xFF;
      const int q5_lo = (b5 & 15) + 16 * (qh >> (2 * c) & 1);
      const int q5_hi = (b5 >> 4) + 16 * (qh >> (2 * c + 1) & 1);
      CHECK(y5[lo] == 0.25f * kKSc[s_lo] * q5_lo - 2.0f * kKMin[s_lo]);
      CHECK(y5[hi] == 0.25f * kKSc[s_hi] * q5_hi - 2.0f * kKMin[s_hi]);
    }
  }
  // Spot values worked out fully by hand: element 0 is nibble 3 of byte 0x03, sub-block 0.
  CHECK(y4[0] == 1 * 3 - 0.5f * 5);
  // Element 255: byte 127 = (127·7 + 3) & 255 = 0x7C, high nibble 7, sub-block 7 (sc 63, m 20).
  CHECK(y4[255] == 63 * 7 - 0.5f * 20);
}

TEST_CASE("dequantize Q6_K hand-made super-block", "[quant]") {
  lf::block_q6_K b{};
  b.d = kHalf0_5;
  const int8_t scales[16] = {-3, 5, 127, -128, 1, 2, 3, 4, 9, -9, 17, -17, 64, 0, 1, -1};
  std::memcpy(b.scales, scales, 16);
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>((i * 11 + 5) & 0xFF);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>((i * 29 + 1) & 0xFF);
  const auto y = dequantized(lf::GgmlType::Q6_K, &b, 256);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int L0 = ((64 * half + l) * 11 + 5) & 0xFF;
      const int L32 = ((64 * half + l + 32) * 11 + 5) & 0xFF;
      const int H = ((32 * half + l) * 29 + 1) & 0xFF;
      const int8_t* sc = scales + 8 * half;
      const int q0 = (L0 & 15) | (H & 3) << 4;
      const int q1 = (L32 & 15) | (H >> 2 & 3) << 4;
      const int q2 = (L0 >> 4) | (H >> 4 & 3) << 4;
      const int q3 = (L32 >> 4) | (H >> 6 & 3) << 4;
      const int base = 128 * half;
      CHECK(y[base + l] == 0.5f * sc[is + 0] * (q0 - 32));
      CHECK(y[base + l + 32] == 0.5f * sc[is + 2] * (q1 - 32));
      CHECK(y[base + l + 64] == 0.5f * sc[is + 4] * (q2 - 32));
      CHECK(y[base + l + 96] == 0.5f * sc[is + 6] * (q3 - 32));
    }
  }
  // Element 0: ql[0] = 5, qh[0] = 1 -> q = 5 | 1 << 4 = 21, scale -3: 0.5·-3·(21 - 32) = 16.5.
  CHECK(y[0] == 16.5f);
}

TEST_CASE("dequantize_row refuses what it cannot do", "[quant]") {
  uint8_t bytes[512] = {};
  float out[256];
  lf::Status s = lf::dequantize_row(lf::GgmlType::Q2_K, bytes, out, 256);
  CHECK(s.code() == lf::Code::unsupported);
  CHECK_THAT(s.message(), Catch::Contains("Q2_K"));
  s = lf::dequantize_row(lf::GgmlType::Q8_K, bytes, out, 256);
  CHECK(s.code() == lf::Code::unsupported);
  s = lf::dequantize_row(static_cast<lf::GgmlType>(99), bytes, out, 32);
  CHECK(s.code() == lf::Code::unsupported);
  CHECK_THAT(s.message(), Catch::Contains("99"));
  s = lf::dequantize_row(lf::GgmlType::Q4_0, bytes, out, 33);
  CHECK(s.code() == lf::Code::invalid_argument);
  CHECK_THAT(s.message(), Catch::Contains("33") && Catch::Contains("Q4_0"));
  s = lf::dequantize_row(lf::GgmlType::Q6_K, bytes, out, 128);
  CHECK(s.code() == lf::Code::invalid_argument);
  s = lf::dequantize_row(lf::GgmlType::F32, bytes, out, -1);
  CHECK(s.code() == lf::Code::invalid_argument);
  CHECK(lf::dequantize_row(lf::GgmlType::Q4_K, bytes, out, 0).ok());
}

TEST_CASE("quantize Q4_0: exact nibbles, ties, zeros", "[quant]") {
  lf::block_q4_0 b{};
  SECTION("x = (i mod 16 - 8)·0.5 gives nibble i mod 16 and d = 0.5") {
    float x[32];
    for (int i = 0; i < 32; ++i) x[i] = (i % 16 - 8) * 0.5f;
    lf::quantize_row_q4_0_ref(x, &b, 32);
    CHECK(b.d == kHalf0_5);
    for (int j = 0; j < 16; ++j) CHECK(b.qs[j] == (j | j << 4));
  }
  SECTION("the first value of largest magnitude sets the sign of d") {
    float x[32] = {};
    x[5] = 3.0f;
    x[9] = -3.0f;
    x[20] = 1.5f;
    lf::quantize_row_q4_0_ref(x, &b, 32);
    CHECK(b.d == 0xB600);  // f16(3 / -8) = -0.375
    CHECK((b.qs[5] & 15) == 0);    //  3 · (1/-0.375) = -8 -> 0
    CHECK((b.qs[9] & 15) == 15);   // -3 -> 8 + 8.5 = 16.5 -> 16, clamped to 15
    CHECK((b.qs[4] >> 4) == 4);    // x[20] = 1.5 -> -4 + 8.5 = 4.5, truncated to 4
    CHECK((b.qs[0] & 15) == 8);    // zero -> 8
    x[5] = -3.0f;
    x[9] = 3.0f;
    lf::quantize_row_q4_0_ref(x, &b, 32);
    CHECK(b.d == 0x3600);  // +0.375
    CHECK((b.qs[5] & 15) == 0);
    CHECK((b.qs[9] & 15) == 15);
  }
  SECTION("all zeros give d = 0 and nibbles 8") {
    const float x[32] = {};
    lf::quantize_row_q4_0_ref(x, &b, 32);
    CHECK(b.d == 0x8000);  // 0 / -8 is -0 in llama.cpp too
    CHECK(lf::fp16_to_fp32(b.d) == 0.0f);
    for (int j = 0; j < 16; ++j) CHECK(b.qs[j] == 0x88);
  }
}

TEST_CASE("quantize Q8_0: exact values, half away from zero, zeros; Q8_1's zeros and saturated sum", "[quant]") {
  float x[32] = {};
  // amax = 127 makes d = 1 and id = 1 exactly, so q = roundf(x).
  halves_block(x);
  const int8_t expected[9] = {127, -127, 3, -3, 0, -1, 2, 127, 10};
  lf::block_q8_0 b{};
  lf::quantize_row_q8_0_ref(x, &b, 32);
  CHECK(b.d == kHalf1);
  for (int i = 0; i < 32; ++i) CHECK(b.qs[i] == (i < 9 ? expected[i] : 0));

  const float zeros[32] = {};
  lf::quantize_row_q8_0_ref(zeros, &b, 32);
  CHECK(b.d == 0);
  for (int i = 0; i < 32; ++i) CHECK(b.qs[i] == 0);
  lf::block_q8_1 b1{};
  lf::quantize_row_q8_1_x86(zeros, &b1, 32);
  CHECK(b1.d == 0);
  CHECK(b1.s == 0);

  // s is an f16: a block summing past 65504 saturates it to inf, exactly as in llama.cpp.
  float big[32];
  for (float& v : big) v = 3000.0f;
  lf::quantize_row_q8_1_x86(big, &b1, 32);
  CHECK(b1.s == 0x7C00);
}

TEST_CASE("the x86 activation quantizer: id = 127/amax, halves to even, saturating as cvtps2dq", "[quant]") {
  // The same block as above: with amax = 127 both quantizers multiply by 1, so only the rounding
  // of halves differs: 2.5 -> 2, -2.5 -> -2, -0.5 -> -0, 1.5 -> 2, 126.5 -> 126.
  float x[32] = {};
  halves_block(x);
  const int8_t expected[9] = {127, -127, 2, -2, 0, 0, 2, 126, 10};
  lf::block_q8_0 b{};
  lf::quantize_row_q8_0_x86(x, &b, 32);
  CHECK(b.d == kHalf1);
  lf::block_q8_1 b1{};
  lf::quantize_row_q8_1_x86(x, &b1, 32);
  CHECK(b1.d == kHalf1);
  CHECK(lf::fp16_to_fp32(b1.s) == 138.0f);  // Σq = 127 - 127 + 2 - 2 + 2 + 126 + 10
  for (int i = 0; i < 32; ++i) {
    CHECK(b.qs[i] == (i < 9 ? expected[i] : 0));
    CHECK(b1.qs[i] == b.qs[i]);
  }

  // 127/amax is not 1/(amax/127): with amax = 2.75, x = 0x1.0a1428p-5 times the first is 1.5
  // exactly (-> 2, the even one) and times the second 0x1.7ffffep+0 (-> 1).
  float y[32] = {};
  y[0] = 2.75f;
  y[1] = 0x1.0a1428p-5f;
  lf::quantize_row_q8_0_x86(y, &b, 32);
  CHECK(b.qs[0] == 127);
  CHECK(b.qs[1] == 2);
  lf::quantize_row_q8_0_ref(y, &b, 32);
  CHECK(b.qs[1] == 1);

  // amax so small that 127/amax overflows: x·id is inf (or NaN at 0), and cvtps2dq's INT_MIN
  // saturates to -128; d still rounds to an f16 zero.
  float tiny[32] = {};
  tiny[0] = 1e-40f;
  lf::quantize_row_q8_0_x86(tiny, &b, 32);
  CHECK(b.d == 0);
  CHECK(b.qs[0] == -128);
  CHECK(b.qs[1] == -128);

  const float zeros[32] = {};
  lf::quantize_row_q8_0_x86(zeros, &b, 32);
  CHECK(b.d == 0);
  for (int i = 0; i < 32; ++i) CHECK(b.qs[i] == 0);
}

TEST_CASE("Q8_0 and Q4_0 round trips stay within their step", "[quant]") {
  std::mt19937 rng(1234);
  const int64_t n = 32 * 64;
  const auto x = lf_test::random_row(rng, n);
  std::vector<lf::block_q8_0> q8(n / 32);
  std::vector<lf::block_q4_0> q4(n / 32);
  lf::quantize_row_q8_0_ref(x.data(), q8.data(), n);
  lf::quantize_row_q4_0_ref(x.data(), q4.data(), n);
  const auto y8 = dequantized(lf::GgmlType::Q8_0, q8.data(), n);
  const auto y4 = dequantized(lf::GgmlType::Q4_0, q4.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    double amax = 0.0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[32 * b + i])));
    // d as computed, and the extra error from storing it as f16 (q is found with the exact d).
    const double d8 = amax / 127;
    const double d8_err = std::fabs(d8 - lf::fp16_to_fp32(q8[b].d));
    const double d4 = amax / 8;
    const double d4_err = std::fabs(d4 - std::fabs(lf::fp16_to_fp32(q4[b].d)));
    for (int i = 0; i < 32; ++i) {
      const size_t k = static_cast<size_t>(32 * b + i);
      CHECK(std::fabs(x[k] - y8[k]) <= d8 / 2 + 127 * d8_err + 1e-6 * amax);
      CHECK(std::fabs(x[k] - y4[k]) <= d4 + 8 * d4_err + 1e-6 * amax);
    }
  }
}

TEST_CASE("quantize Q8_K: half-even rounding, signed max, bsums", "[quant]") {
  std::vector<float> x(256, 0.0f);
  // max = 127 (first of ±127) makes iscale = -1 and d = -1, so q = nearest_int(-x).
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -0.5f;
  x[4] = -1.5f;
  x[5] = 126.5f;
  x[6] = -127.0f;
  x[17] = 0.5f;
  lf::block_q8_K b{};
  lf::quantize_row_q8_K_ref(x.data(), &b, 256);
  CHECK(b.d == -1.0f);
  const int8_t expected[7] = {-127, -2, -4, 0, 2, -126, 127};
  for (int i = 0; i < 7; ++i) CHECK(b.qs[i] == expected[i]);
  CHECK(b.qs[17] == 0);
  CHECK(b.bsums[0] == -127 - 2 - 4 + 0 + 2 - 126 + 127);
  for (int g = 1; g < 16; ++g) CHECK(b.bsums[g] == 0);

  x[0] = -127.0f;  // now the negative one comes first
  x[6] = 127.0f;
  lf::quantize_row_q8_K_ref(x.data(), &b, 256);
  CHECK(b.d == 1.0f);
  CHECK(b.qs[0] == -127);
  CHECK(b.qs[1] == 2);
  CHECK(b.qs[2] == 4);
  CHECK(b.qs[6] == 127);

  std::mt19937 rng(99);
  const auto r = lf_test::random_row(rng, 1024);
  std::vector<lf::block_q8_K> q(4);
  lf::quantize_row_q8_K_ref(r.data(), q.data(), 1024);
  for (int s = 0; s < 4; ++s) {
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += q[s].qs[16 * g + l];
      CHECK(q[s].bsums[g] == sum);
    }
    for (int i = 0; i < 256; ++i) {
      const float v = r[static_cast<size_t>(256 * s + i)];
      CHECK(std::fabs(v - q[s].d * q[s].qs[i]) <= std::fabs(q[s].d) * 0.5001f);
    }
  }

  const std::vector<float> zeros(256, 0.0f);
  std::memset(&b, 0x55, sizeof b);
  lf::quantize_row_q8_K_ref(zeros.data(), &b, 256);
  CHECK(b.d == 0.0f);
  for (int i = 0; i < 256; ++i) CHECK(b.qs[i] == 0);
  for (int g = 0; g < 16; ++g) CHECK(b.bsums[g] == 0);
}
