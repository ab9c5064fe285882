// The feature-major layout (src/layout/feature_major.h): a lossless permutation laid out
// as documented, and a kernel whose outputs are gemm_q8_0_strided's on the row layout — and the
// vec_dot_ref loop's — bit for bit, whatever the activations' sparsity.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "layout/feature_major.h"
#include "kernels/gemm.h"
#include "ops/ops.h"
#include "quant/quant.h"
#include "support/quant_test_data.h"

namespace {

using lf::GgmlType;

constexpr float kUntouched = -777.0f;  // Y outside the requested rows must keep this

uint64_t block_bytes(GgmlType type) { return type == GgmlType::Q4_0 ? sizeof(lf::block_q4_0) : sizeof(lf::block_q8_0); }

// How the weight blocks are made.
enum class Weights {
  quantized,       // quantize_row_*_ref of random rows (1e-6, 1, 1e4 scales per block)
  raw_bytes,       // arbitrary quants and finite f16 scales, subnormals included
  most_negative,   // every quant -8 (Q4_0) or -128 (Q8_0), scale 1
  special_scales,  // quantized, then some scales +inf, -inf or NaN
  typical,         // quantized from N(0, 0.02), as trained weights (benchmark)
};

// W [n_out, n_in] in the file's layout, and the same weight feature-major.
struct Weight {
  std::vector<uint8_t> rows, fm;
  lf::WeightView row_view, fm_view;
};

Weight make_weight(std::mt19937& rng, GgmlType type, int64_t n_in, int64_t n_out, Weights kind) {
  Weight w;
  const uint64_t row_bytes = block_bytes(type) * static_cast<uint64_t>(n_in / 32);
  w.rows.resize(static_cast<size_t>(row_bytes * static_cast<uint64_t>(n_out)));
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t r = 0; r < n_out; ++r) {
    uint8_t* row = w.rows.data() + row_bytes * static_cast<uint64_t>(r);
    if (kind == Weights::raw_bytes || kind == Weights::most_negative) {
      for (uint64_t i = 0; i < row_bytes; ++i) row[i] = kind == Weights::raw_bytes ? static_cast<uint8_t>(byte(rng)) : 0x00;
      if (kind == Weights::most_negative && type == GgmlType::Q8_0) std::memset(row, 0x80, static_cast<size_t>(row_bytes));
      for (uint64_t b = 0; b < row_bytes / block_bytes(type); ++b) {
        uint16_t d = kind == Weights::raw_bytes ? static_cast<uint16_t>(byte(rng) << 8 | byte(rng)) : uint16_t{0x3C00};
        if ((d & 0x7C00) == 0x7C00) d &= 0xBFFF;
        std::memcpy(row + block_bytes(type) * b, &d, sizeof d);
      }
      continue;
    }
    std::vector<float> x = lf_test::random_row(rng, n_in);
    if (kind == Weights::typical) {
      std::normal_distribution<float> normal(0.0f, 0.02f);
      for (float& v : x) v = normal(rng);
    }
    if (type == GgmlType::Q4_0) {
      lf::quantize_row_q4_0_ref(x.data(), reinterpret_cast<lf::block_q4_0*>(row), n_in);
    } else {
      lf::quantize_row_q8_0_ref(x.data(), reinterpret_cast<lf::block_q8_0*>(row), n_in);
    }
    if (kind == Weights::special_scales && r % 7 == 3) {
      const uint16_t specials[3] = {0x7C00, 0xFC00, 0x7E00};
      const uint64_t b = static_cast<uint64_t>(r) % (row_bytes / block_bytes(type));
      std::memcpy(row + block_bytes(type) * b, &specials[r % 3], sizeof(uint16_t));
    }
  }
  w.row_view.type = type;
  w.row_view.n_in = n_in;
  w.row_view.n_out = n_out;
  w.row_view.data = w.rows.data();
  w.row_view.row_bytes = row_bytes;
  REQUIRE(lf::can_feature_major(w.row_view));
  w.fm.resize(w.rows.size());
  lf::to_feature_major(w.row_view, w.rows.data(), w.fm.data());
  w.fm_view = w.row_view;
  w.fm_view.data = w.fm.data();
  w.fm_view.layout = lf::WeightLayout::feature_major;
  return w;
}

// How the activations are made: which features of each token are nonzero.
enum class Activations {
  dense,
  sparse,         // each token keeps a random `density` of its features, different per token
  zero_blocks,    // sparse, and every third block of each token entirely zero (scale 0 too)
  zero,           // every activation 0
  extreme,        // every quant -128 or 127 (random), scales kept
};

// X [n_tok, n_in] -> Q8_0 rows
std::vector<uint8_t> make_activations(std::mt19937& rng, GgmlType type, int64_t n_in, int n_tok, Activations kind,
                                      double density = 0.25) {
  const uint64_t x_row = lf::activation_row_bytes(type, n_in);
  std::vector<uint8_t> xc(static_cast<size_t>(x_row * static_cast<uint64_t>(n_tok)));
  std::bernoulli_distribution keep(density);
  for (int t = 0; t < n_tok; ++t) {
    std::vector<float> x = lf_test::random_row(rng, n_in);
    for (int64_t i = 0; i < n_in; ++i) {
      const bool zero = kind == Activations::zero ||
                        ((kind == Activations::sparse || kind == Activations::zero_blocks) && !keep(rng)) ||
                        (kind == Activations::zero_blocks && (i / 32) % 3 == t % 3);
      if (zero) x[static_cast<size_t>(i)] = 0.0f;
    }
    uint8_t* row = xc.data() + x_row * static_cast<uint64_t>(t);
    REQUIRE(lf::convert_activation_row(type, x.data(), row, n_in).ok());
    if (kind == Activations::extreme) {
      for (int64_t b = 0; b < n_in / 32; ++b) {
        for (int i = 0; i < 32; ++i) row[34 * b + 2 + i] = rng() % 2 ? 0x80 : 0x7F;
      }
    }
  }
  return xc;
}

// One product of the sweep: W columns [k0, k1), rows [r0, r1), n_tok tokens.
struct Case {
  int64_t k0, k1, r0, r1;
  int n_tok;
};

// Y of gemm_feature_major on the feature-major weight and of gemm_q8_0_strided on the row layout
// must be the same bytes (outside [r0, r1) untouched), and the vec_dot_ref loop's values;
// returns the number of nonzero outputs.
int64_t check_case(const Weight& w, const std::vector<uint8_t>& xc, const Case& c) {
  const lf::WeightView& W = w.row_view;
  const uint64_t x_row = lf::activation_row_bytes(W.type, W.n_in);
  const uint8_t* x = xc.data() + lf::activation_row_bytes(W.type, c.k0);
  const size_t n = static_cast<size_t>(c.n_tok) * static_cast<size_t>(W.n_out);
  std::vector<float> fm(n, kUntouched), rows(n, kUntouched), ref(n, kUntouched);
  lf::gemm_feature_major(w.fm_view.columns(c.k0, c.k1), x, x_row, c.n_tok, fm.data(), c.r0, c.r1);
  lf::gemm_q8_0_strided(W.columns(c.k0, c.k1), x, x_row, c.n_tok, rows.data(), c.r0, c.r1);
  for (int t = 0; t < c.n_tok; ++t) {
    for (int64_t r = c.r0; r < c.r1; ++r) {
      ref[static_cast<size_t>(t * W.n_out + r)] =
          lf::vec_dot_ref(W.type, W.row(r) + W.column_bytes(c.k0), x + x_row * static_cast<uint64_t>(t), c.k1 - c.k0);
    }
  }
  INFO(lf::gemm_kernel_isa() << " n_in " << W.n_in << " n_out " << W.n_out << " cols [" << c.k0 << ", " << c.k1
                             << ") rows [" << c.r0 << ", " << c.r1 << ") n_tok " << c.n_tok);
  CHECK(std::memcmp(fm.data(), rows.data(), n * sizeof(float)) == 0);
  // Against the scalar reference, a NaN may differ in sign: where two NaNs meet in a sum, which
  // one survives depends on the operand order the compiler gives a commutative addition.
  CHECK(std::equal(fm.begin(), fm.end(), ref.begin(), [](float a, float b) {
    return lf::f32_bits(a) == lf::f32_bits(b) || (std::isnan(a) && std::isnan(b));
  }));
  return std::count_if(fm.begin(), fm.end(), [](float v) { return v != 0.0f && v != kUntouched; });
}

// Whole weight and whole rows
Case whole(const lf::WeightView& W, int n_tok) { return Case{0, W.n_in, 0, W.n_out, n_tok}; }

const GgmlType kTypes[2] = {GgmlType::Q4_0, GgmlType::Q8_0};

}  // namespace

TEST_CASE("feature_major: the layout is a permutation of the tensor's nibbles, and round-trips", "[feature_major]") {
  for (GgmlType type : kTypes) {
    for (int64_t n_out : {2, 30, 32, 34, 96}) {
      for (int64_t n_in : {32, 96}) {
        lf::WeightView W;
        W.type = type;
        W.n_in = n_in;
        W.n_out = n_out;
        W.row_bytes = block_bytes(type) * static_cast<uint64_t>(n_in / 32);
        REQUIRE(lf::can_feature_major(W));
        const size_t bytes = static_cast<size_t>(W.row_bytes * static_cast<uint64_t>(n_out));
        // Nibble i of the source is labelled i, spread over 4 planes of 4 bits: the permuted
        // planes name, for every destination nibble, the source nibble it came from.
        std::vector<uint32_t> origin(2 * bytes, 0);
        for (int plane = 0; plane < 4; ++plane) {
          std::vector<uint8_t> src(bytes), dst(bytes);
          for (size_t i = 0; i < bytes; ++i) {
            src[i] = static_cast<uint8_t>(((2 * i) >> (4 * plane) & 0xF) | ((2 * i + 1) >> (4 * plane) & 0xF) << 4);
          }
          lf::to_feature_major(W, src.data(), dst.data());
          for (size_t i = 0; i < bytes; ++i) {
            origin[2 * i] |= static_cast<uint32_t>(dst[i] & 0xF) << (4 * plane);
            origin[2 * i + 1] |= static_cast<uint32_t>(dst[i] >> 4) << (4 * plane);
          }
        }
        REQUIRE(2 * bytes < (size_t{1} << 16));
        std::vector<uint32_t> sorted = origin;
        std::sort(sorted.begin(), sorted.end());
        for (size_t i = 0; i < sorted.size(); ++i) REQUIRE(sorted[i] == i);

        std::mt19937 rng(static_cast<uint32_t>(n_out * 1000 + n_in));
        std::vector<uint8_t> src(bytes), fm(bytes), back(bytes);
        for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
        lf::to_feature_major(W, src.data(), fm.data());
        lf::from_feature_major(W, fm.data(), back.data());
        REQUIRE(back == src);
      }
    }
  }
}

TEST_CASE("feature_major: stripes hold each block's scales, then each column's quants, as documented", "[feature_major]") {
  std::mt19937 rng(7);
  for (GgmlType type : kTypes) {
    for (int64_t n_out : {2, 30, 34, 96}) {
      const Weight w = make_weight(rng, type, 64, n_out, Weights::raw_bytes);
      const uint64_t stripe = block_bytes(type) * static_cast<uint64_t>(n_out);
      for (int64_t r = 0; r < n_out; ++r) {
        std::vector<float> want(64);
        REQUIRE(lf::dequantize_row(type, w.row_view.row(r), want.data(), 64).ok());
        for (int64_t b = 0; b < 2; ++b) {
          const uint8_t* s = w.fm.data() + stripe * static_cast<uint64_t>(b);
          uint16_t d;
          std::memcpy(&d, s + 2 * r, sizeof d);
          for (int64_t f = 0; f < 32; ++f) {
            int q;
            if (type == GgmlType::Q8_0) {
              q = static_cast<int8_t>(s[2 * n_out + f * n_out + r]);
            } else {
              const int64_t group = r / 32, p = r % 32, rows = std::min<int64_t>(32, n_out - 32 * group);
              const uint8_t byte = s[2 * n_out + f * (n_out / 2) + 16 * group + p % (rows / 2)];
              q = (p < rows / 2 ? byte & 0xF : byte >> 4) - 8;
            }
            const float got = static_cast<float>(q) * lf::fp16_to_fp32(d);
            INFO("type " << static_cast<int>(type) << " n_out " << n_out << " row " << r << " column " << 32 * b + f);
            REQUIRE(lf::f32_bits(got) == lf::f32_bits(want[static_cast<size_t>(32 * b + f)]));
          }
        }
      }
    }
  }
}

TEST_CASE("feature_major: which weights the layout can hold", "[feature_major]") {
  lf::WeightView W;
  W.n_in = 64;
  W.n_out = 34;
  const auto with = [&](GgmlType type, int64_t n_out) {
    lf::WeightView v = W;
    v.type = type;
    v.n_out = n_out;
    v.row_bytes = v.column_bytes(v.n_in);
    return v;
  };
  CHECK(lf::can_feature_major(with(GgmlType::Q4_0, 34)));
  CHECK(lf::can_feature_major(with(GgmlType::Q4_0, 5376)));
  CHECK(lf::can_feature_major(with(GgmlType::Q4_0, 2)));
  CHECK_FALSE(lf::can_feature_major(with(GgmlType::Q4_0, 33)));  // two rows per byte of a column
  CHECK_FALSE(lf::can_feature_major(with(GgmlType::Q4_0, 1)));
  CHECK(lf::can_feature_major(with(GgmlType::Q8_0, 33)));
  CHECK(lf::can_feature_major(with(GgmlType::Q8_0, 1)));
  CHECK_FALSE(lf::can_feature_major(with(GgmlType::Q8_0, 0)));
  CHECK_FALSE(lf::can_feature_major(with(GgmlType::F16, 34)));
  CHECK_FALSE(lf::can_feature_major(with(GgmlType::Q4_1, 34)));
  lf::WeightView k = with(GgmlType::Q4_K, 34);
  k.n_in = 256;
  k.row_bytes = k.column_bytes(256);
  CHECK_FALSE(lf::can_feature_major(k));
  lf::WeightView slice = with(GgmlType::Q4_0, 34).columns(0, 32);  // rows still 2 blocks apart
  CHECK_FALSE(lf::can_feature_major(slice));
  lf::WeightView already = with(GgmlType::Q8_0, 34);
  already.layout = lf::WeightLayout::feature_major;
  CHECK_FALSE(lf::can_feature_major(already));
}

TEST_CASE("feature_major: columns() of a feature-major view starts at the block's stripe", "[feature_major]") {
  lf::WeightView W;
  W.type = GgmlType::Q4_0;
  W.n_in = 96;
  W.n_out = 34;
  W.row_bytes = W.column_bytes(96);
  W.layout = lf::WeightLayout::feature_major;
  const std::vector<uint8_t> bytes(3 * 18 * 34);
  W.data = bytes.data();
  const lf::WeightView v = W.columns(64, 96);
  CHECK(v.data == bytes.data() + 2 * 18 * 34);
  CHECK(v.n_in == 32);
  CHECK(v.n_out == 34);
  CHECK(v.layout == lf::WeightLayout::feature_major);
}

TEST_CASE("feature_major: GEMM equals the row kernel and vec_dot_ref over shapes and sparsity", "[feature_major]") {
  std::mt19937 rng(11);
  for (GgmlType type : kTypes) {
    for (int64_t n_out : {2, 30, 32, 34, 96, 130, 258}) {
      for (int64_t n_in : {32, 64, 96, 672}) {
        const Weight w = make_weight(rng, type, n_in, n_out, Weights::quantized);
        for (Activations kind : {Activations::dense, Activations::sparse, Activations::zero_blocks}) {
          for (int n_tok : {1, 3, 17}) {
            const std::vector<uint8_t> xc = make_activations(rng, type, n_in, n_tok, kind);
            check_case(w, xc, whole(w.row_view, n_tok));
          }
        }
      }
    }
  }
}

TEST_CASE("feature_major: every token count 1..17 and 33 across the token tiles", "[feature_major]") {
  std::mt19937 rng(12);
  for (GgmlType type : kTypes) {
    const Weight w = make_weight(rng, type, 96, 162, Weights::quantized);
    for (int n_tok = 1; n_tok <= 33; n_tok = n_tok == 17 ? 33 : n_tok + 1) {
      for (double density : {0.05, 0.5}) {
        const std::vector<uint8_t> xc = make_activations(rng, type, 96, n_tok, Activations::sparse, density);
        check_case(w, xc, whole(w.row_view, n_tok));
      }
    }
  }
}

TEST_CASE("feature_major: column slices (rows wider than the slice) and row ranges, as shards use them",
          "[feature_major]") {
  std::mt19937 rng(13);
  for (GgmlType type : kTypes) {
    for (int64_t n_out : {34, 290}) {
      const Weight w = make_weight(rng, type, 672, n_out, Weights::quantized);
      const std::vector<uint8_t> xc = make_activations(rng, type, 672, 5, Activations::sparse, 0.5);
      const int64_t cols[][2] = {{0, 32}, {32, 64}, {640, 672}, {96, 480}, {64, 64}};
      const int64_t rows[][2] = {{0, n_out}, {0, 1}, {5, 30}, {n_out - 3, n_out}, {31, 33}, {33, n_out - 1}, {7, 7}};
      for (const auto& k : cols) {
        for (const auto& r : rows) check_case(w, xc, Case{k[0], k[1], r[0], r[1], 5});
      }
    }
  }
}

TEST_CASE("feature_major: raw weights, special scales, extreme quants, zero activations", "[feature_major]") {
  std::mt19937 rng(14);
  for (GgmlType type : kTypes) {
    for (Weights weights : {Weights::raw_bytes, Weights::special_scales, Weights::most_negative}) {
      for (int64_t n_out : {30, 96}) {
        const Weight w = make_weight(rng, type, 128, n_out, weights);
        for (Activations kind : {Activations::dense, Activations::zero_blocks, Activations::zero, Activations::extreme}) {
          for (int n_tok : {1, 4, 17}) {
            const std::vector<uint8_t> xc = make_activations(rng, type, 128, n_tok, kind);
            check_case(w, xc, whole(w.row_view, n_tok));
            check_case(w, xc, Case{32, 96, 3, n_out - 1, n_tok});
          }
        }
      }
    }
  }
}

TEST_CASE("feature_major: Q4_0 block sums of +32768 (weights -8, activations -128) stay exact", "[feature_major]") {
  std::mt19937 rng(15);
  const Weight w = make_weight(rng, GgmlType::Q4_0, 64, 34, Weights::most_negative);
  std::vector<uint8_t> xc = make_activations(rng, GgmlType::Q4_0, 64, 2, Activations::dense);
  for (size_t b = 0; b < xc.size(); b += 34) {
    const uint16_t one = 0x3C00;
    std::memcpy(&xc[b], &one, sizeof one);
    std::memset(&xc[b + 2], 0x80, 32);
  }
  std::vector<float> y(2 * 34, kUntouched);
  lf::gemm_feature_major(w.fm_view, xc.data(), 68, 2, y.data(), 0, 34);
  for (float v : y) REQUIRE(v == 65536.0f);  // 2 blocks of 32·(-8)·(-128), scales 1
  check_case(w, xc, whole(w.row_view, 2));
}

TEST_CASE("feature_major: a dy of 0 with nonzero quants, an infinite dy, infinite weight scales", "[feature_major]") {
  // The engine's tiny activations quantize to nonzero quants under an f16 scale of 0: their
  // term is ±0 and skipped, unless a weight scale is infinite or NaN, where the reference makes
  // NaN. An infinite dy makes NaN from zero quants too (0·dw·inf).
  std::mt19937 rng(16);
  for (GgmlType type : kTypes) {
    const Weight w = make_weight(rng, type, 96, 40, Weights::special_scales);
    std::vector<uint8_t> xc = make_activations(rng, type, 96, 3, Activations::dense);
    for (size_t b = 0; b < xc.size(); b += 2 * 34) std::memset(&xc[b], 0, 2);  // every other block: dy = 0
    check_case(w, xc, whole(w.row_view, 3));
    const uint16_t inf = 0x7C00;
    std::vector<uint8_t> inf_dy = xc;
    std::memcpy(&inf_dy[34], &inf, sizeof inf);  // token 0, block 1: quants nonzero
    check_case(w, inf_dy, whole(w.row_view, 3));
    std::memset(&inf_dy[34 + 2], 0, 32);  // and now zero
    check_case(w, inf_dy, whole(w.row_view, 3));
    const Weight finite = make_weight(rng, type, 96, 40, Weights::quantized);
    check_case(finite, inf_dy, whole(finite.row_view, 3));
    std::vector<float> y(3 * 40);
    lf::gemm_feature_major(finite.fm_view, inf_dy.data(), 3 * 34, 3, y.data(), 0, 40);
    CHECK(std::all_of(y.begin(), y.begin() + 40, [](float v) { return std::isnan(v); }));
  }
}

TEST_CASE("feature_major: the outputs compared are not trivially zero", "[feature_major]") {
  std::mt19937 rng(17);
  for (GgmlType type : kTypes) {
    const Weight w = make_weight(rng, type, 672, 96, Weights::quantized);
    const std::vector<uint8_t> xc = make_activations(rng, type, 672, 9, Activations::sparse, 0.25);
    CHECK(check_case(w, xc, whole(w.row_view, 9)) > 9 * 96 * 9 / 10);
  }
}

TEST_CASE("feature_major: matmul_rows sends a feature-major weight to its kernel", "[feature_major]") {
  std::mt19937 rng(18);
  const Weight w = make_weight(rng, GgmlType::Q4_0, 96, 66, Weights::quantized);
  const std::vector<uint8_t> xc = make_activations(rng, GgmlType::Q4_0, 96, 3, Activations::sparse, 0.5);
  std::vector<float> fm(3 * 66, kUntouched), rows(3 * 66, kUntouched);
  lf::matmul_rows(w.fm_view, xc.data(), 3, fm.data(), 10, 60, 32, 96);
  lf::matmul_rows(w.row_view, xc.data(), 3, rows.data(), 10, 60, 32, 96);
  CHECK(std::memcmp(fm.data(), rows.data(), fm.size() * sizeof(float)) == 0);
  CHECK(std::count(fm.begin(), fm.end(), kUntouched) == 3 * (66 - 50));
}

TEST_CASE("feature_major: bench against the row kernel on the 31B ffn_down shape", "[.][feature_major-bench]") {
  // Q4_0 W_down [5376, 21504] (n_embd x n_ff); densities are the fraction of features each token
  // keeps (random, per token), as the top-K gate FFN leaves them.
  std::mt19937 rng(19);
  const int64_t n_out = 5376, n_in = 21504;
  const Weight w = make_weight(rng, GgmlType::Q4_0, n_in, n_out, Weights::typical);
  const uint64_t x_row = lf::activation_row_bytes(GgmlType::Q4_0, n_in);
  // Best of 3, the two kernels alternating so that both see the same load on a shared machine.
  const auto best_of_3 = [&](auto run_a, auto run_b, double* a, double* b) {
    const auto seconds = [](auto run) {
      const auto start = std::chrono::steady_clock::now();
      run();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    *a = *b = 1e30;
    for (int i = 0; i < 3; ++i) {
      *a = std::min(*a, seconds(run_a));
      *b = std::min(*b, seconds(run_b));
    }
  };
  std::vector<uint8_t> back(w.rows.size());
  const auto start = std::chrono::steady_clock::now();
  lf::from_feature_major(w.row_view, w.fm.data(), back.data());
  const double relayout = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(back == w.rows);
  std::printf("feature_major bench (%s), Q4_0 %lld -> %lld, best of 3 (ms); one relayout %.0f ms\n",
              lf::gemm_kernel_isa(), static_cast<long long>(n_in), static_cast<long long>(n_out), relayout * 1e3);
  std::printf("%6s %8s %10s %10s %8s\n", "n_tok", "density", "row", "feature", "ratio");
  for (int n_tok : {1, 8, 32}) {
    for (double density : {1.0, 0.75, 0.5, 0.25}) {
      const std::vector<uint8_t> xc = make_activations(rng, GgmlType::Q4_0, n_in, n_tok, Activations::sparse, density);
      std::vector<float> fm(static_cast<size_t>(n_tok * n_out)), rows(fm.size());
      double t_rows, t_fm;
      best_of_3([&] { lf::gemm_q8_0_strided(w.row_view, xc.data(), x_row, n_tok, rows.data(), 0, n_out); },
                [&] { lf::gemm_feature_major(w.fm_view, xc.data(), x_row, n_tok, fm.data(), 0, n_out); }, &t_rows, &t_fm);
      CHECK(std::memcmp(fm.data(), rows.data(), fm.size() * sizeof(float)) == 0);
      std::printf("%6d %7.0f%% %10.2f %10.2f %8.2f\n", n_tok, density * 100, t_rows * 1e3, t_fm * 1e3, t_fm / t_rows);
    }
  }
}
