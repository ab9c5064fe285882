// The GEMM kernels (src/kernels/gemm.h) against a loop of vec_dot_ref, bit for bit:
// the engine's agreement with llama.cpp and its thread-count invariance rest on that.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <utility>
#include <vector>

#if defined(__EMSCRIPTEN__)
#include <emscripten.h>
#endif

#include "kernels/gemm.h"
#include "ops/ops.h"
#include "quant/quant.h"
#include "layout/row_strips.h"
#include "support/quant_test_data.h"
#include "kernels/simd.h"  // the read-bandwidth probe uses the kernels' vectors

namespace {

constexpr float kUntouched = -777.0f;  // Y outside the requested rows must keep this

// How the weight blocks are made.
enum class Weights {
  quantized,  // quantize_row_*_ref of random rows (1e-6, 1, 1e4 scales per block)
  raw_bytes,  // arbitrary quants (Q8_0 includes -128) and scales (any finite f16, subnormals too)
  zero_blocks,  // quantized, then every third block zeroed (d = 0, quants 0)
  typical,      // quantized from normal values of deviation 0.02, as trained weights (benchmarks)
};

struct Matrix {
  std::vector<uint8_t> bytes;
  lf::WeightView view;
};

// m->view onto m->bytes as W [n_out, n_in] of `type`, rows row_bytes apart.
void describe(Matrix* m, lf::GgmlType type, int64_t n_in, int64_t n_out, uint64_t row_bytes) {
  m->view.type = type;
  m->view.n_in = n_in;
  m->view.n_out = n_out;
  m->view.data = m->bytes.data();
  m->view.row_bytes = row_bytes;
}

// W [n_out, n_in] of type (Q4_0 or Q8_0)
Matrix make_weights(std::mt19937& rng, lf::GgmlType type, int64_t n_in, int64_t n_out, Weights kind) {
  const bool q4 = type == lf::GgmlType::Q4_0;
  const uint64_t block = q4 ? sizeof(lf::block_q4_0) : sizeof(lf::block_q8_0);
  const int64_t nb = n_in / 32;
  Matrix m;
  m.bytes.resize(static_cast<size_t>(block * nb * n_out));
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t r = 0; r < n_out; ++r) {
    uint8_t* row = m.bytes.data() + block * nb * r;
    if (kind == Weights::raw_bytes) {
      for (uint64_t i = 0; i < block * nb; ++i) row[i] = static_cast<uint8_t>(byte(rng));
      for (int64_t b = 0; b < nb; ++b) {
        uint16_t d = static_cast<uint16_t>(byte(rng) << 8 | byte(rng));
        if ((d & 0x7C00) == 0x7C00) d &= 0xBFFF;  // an infinite or NaN scale would make NaN outputs
        std::memcpy(row + block * b, &d, sizeof d);
      }
      continue;
    }
    std::vector<float> x = lf_test::random_row(rng, n_in);
    if (kind == Weights::typical) {
      std::normal_distribution<float> normal(0.0f, 0.02f);
      for (float& v : x) v = normal(rng);
    }
    if (q4) {
      lf::quantize_row_q4_0_ref(x.data(), reinterpret_cast<lf::block_q4_0*>(row), n_in);
    } else {
      lf::quantize_row_q8_0_ref(x.data(), reinterpret_cast<lf::block_q8_0*>(row), n_in);
    }
    if (kind == Weights::zero_blocks) {
      for (int64_t b = 0; b < nb; b += 3) std::memset(row + block * b, q4 ? 0x88 : 0, block);  // q4: nibbles 8 = 0
      for (int64_t b = 0; b < nb; b += 3) std::memset(row + block * b, 0, sizeof(uint16_t));
    }
  }
  describe(&m, type, n_in, n_out, block * nb);
  return m;
}

// Q8_0 rows xc with every quant replaced by a random byte (-128 included), scales kept: the
// kernels must be exact for any bytes, not only for what quantize_row_q8_0_ref makes.
void randomize_activation_quants(std::mt19937& rng, std::vector<uint8_t>* xc) {
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t b = 0; b + sizeof(lf::block_q8_0) <= xc->size(); b += sizeof(lf::block_q8_0)) {
    for (size_t i = 2; i < sizeof(lf::block_q8_0); ++i) (*xc)[b + i] = static_cast<uint8_t>(byte(rng));
  }
}

// X [n_tok, n_in] -> Q8_0 rows; every fourth token all zeros when `zero_tokens`.
std::vector<uint8_t> make_activations(std::mt19937& rng, const lf::WeightView& W, int n_tok, bool zero_tokens) {
  std::vector<float> x;
  for (int t = 0; t < n_tok; ++t) {
    std::vector<float> row = lf_test::random_row(rng, W.n_in);
    if (zero_tokens && t % 4 == 3) row.assign(row.size(), 0.0f);
    x.insert(x.end(), row.begin(), row.end());
  }
  std::vector<uint8_t> xc;
  REQUIRE(lf::convert_activations(W, x.data(), n_tok, &xc).ok());
  return xc;
}

// The scalar reference: one vec_dot_ref per output row and token, into Y [n_tok, n_out].
std::vector<float> reference(const lf::WeightView& W, const uint8_t* xc, int n_tok, int64_t r0, int64_t r1,
                             int64_t k0, int64_t k1) {
  std::vector<float> y(static_cast<size_t>(n_tok * W.n_out), kUntouched);
  const uint64_t x_row = lf::activation_row_bytes(W.type, W.n_in);
  const uint64_t x_skip = lf::activation_row_bytes(W.type, k0);
  const uint64_t w_skip = W.row_bytes * static_cast<uint64_t>(k0) / static_cast<uint64_t>(W.n_in);
  for (int t = 0; t < n_tok; ++t) {
    for (int64_t r = r0; r < r1; ++r) {
      y[static_cast<size_t>(t * W.n_out + r)] =
          lf::vec_dot_ref(W.type, W.row(r) + w_skip, xc + x_row * static_cast<uint64_t>(t) + x_skip, k1 - k0);
    }
  }
  return y;
}

// W in row strips, its bytes in *storage, where this build's kernel reads W's type so (the
// relaxed-SIMD build's Q4_0) and W can be; else W itself.
lf::WeightView kernel_layout(const lf::WeightView& W, std::vector<uint8_t>* storage) {
  if (!lf::gemm_uses_row_strips(W.type) || !lf::can_row_strips(W)) return W;
  storage->resize(static_cast<size_t>(W.n_out) * W.row_bytes);
  lf::to_row_strips(W, W.data, storage->data());
  lf::WeightView S = W;
  S.data = storage->data();
  S.layout = lf::WeightLayout::row_strips;
  return S;
}

// Outputs whose bits differ from the reference's. With any_nan a NaN output only has to be a
// NaN: which NaN an f32 operation returns when both operands are NaNs (their order, which the
// compiler may swap) is not something C++ or WASM fixes, for the reference either.
size_t differing(const std::vector<float>& got, const std::vector<float>& want, bool any_nan) {
  size_t n = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool same = any_nan && std::isnan(want[i]) ? std::isnan(got[i]) : std::memcmp(&got[i], &want[i], sizeof(float)) == 0;
    n += same ? 0 : 1;
  }
  return n;
}

// Runs matmul_rows (the kernels) on W and, where this build's kernel reads W's type in row
// strips (the relaxed-SIMD build's Q4_0), on a copy of W laid out in strips through each dot
// form's kernels: every one must equal the reference bit for bit (NaNs aside with any_nan).
void check_exact(const lf::WeightView& W, const std::vector<uint8_t>& xc, int n_tok, int64_t r0, int64_t r1,
                 int64_t k0, int64_t k1, bool any_nan = false) {
  INFO("ggml type " << static_cast<int>(W.type) << " n_in " << W.n_in << " n_out " << W.n_out
               << " n_tok " << n_tok << " rows [" << r0 << ", " << r1 << ") cols [" << k0 << ", " << k1 << ")");
  const std::vector<float> want = reference(W, xc.data(), n_tok, r0, r1, k0, k1);
  std::vector<float> got(want.size(), kUntouched);
  lf::matmul_rows(W, xc.data(), n_tok, got.data(), r0, r1, k0, k1);
  CHECK(differing(got, want, any_nan) == 0);
  std::vector<uint8_t> strips;
  const lf::WeightView S = kernel_layout(W, &strips);
  if (!S.in_row_strips()) return;
  const lf::DotForm chosen = lf::dot_form();
  for (const lf::DotForm form : {lf::DotForm::dot_add, lf::DotForm::pairs}) {
    INFO("in row strips, dot form " << lf::dot_form_name(form));
    lf::set_dot_form(form);
    std::fill(got.begin(), got.end(), kUntouched);
    lf::matmul_rows(S, xc.data(), n_tok, got.data(), r0, r1, k0, k1);
    CHECK(differing(got, want, any_nan) == 0);
  }
  lf::set_dot_form(chosen);
}

const lf::GgmlType kTypes[] = {lf::GgmlType::Q4_0, lf::GgmlType::Q8_0};

}  // namespace

TEST_CASE("kernels: Q4_0, Q8_0, Q4_K, Q5_K and Q6_K are the types with a GEMM kernel", "[kernels]") {
  CHECK(lf::has_gemm_kernel(lf::GgmlType::Q4_0));
  CHECK(lf::has_gemm_kernel(lf::GgmlType::Q8_0));
  CHECK(lf::has_gemm_kernel(lf::GgmlType::Q4_K));
  CHECK(lf::has_gemm_kernel(lf::GgmlType::Q5_K));
  CHECK(lf::has_gemm_kernel(lf::GgmlType::Q6_K));
  CHECK_FALSE(lf::has_gemm_kernel(lf::GgmlType::Q5_0));
  CHECK_FALSE(lf::has_gemm_kernel(lf::GgmlType::F32));
  // only the relaxed build runs its kernels (under V8 on x86-64 with FMA3 or ARM64, whose
  // relaxed_madd is fused, as every host these tests run on) and reads Q4_0 in row strips: there
  // check_exact runs every case on strips too
  CHECK(lf::relaxed_kernels_run() == (LF_RELAXED_SIMD != 0));
  CHECK(lf::gemm_uses_row_strips(lf::GgmlType::Q4_0) == (LF_RELAXED_SIMD != 0));
  CHECK_FALSE(lf::gemm_uses_row_strips(lf::GgmlType::Q8_0));
#if LF_RELAXED_SIMD
  CHECK(std::string(lf::gemm_kernel_isa()) == "wasm-relaxed-simd");
  // the forms are timed (the clock advances under Node) and the pairs form runs only where it is
  // 5% faster; check_exact runs every strip case through both
  const lf::DotFormChoice seen = lf::choose_dot_form();
  CHECK(seen.dot_add_ms > 0);
  CHECK(seen.pairs_ms > 0);
  CHECK((seen.form == lf::DotForm::pairs) == (seen.pairs_ms < 0.95 * seen.dot_add_ms));
  CHECK(lf::dot_form() == seen.form);
#elif defined(__wasm_simd128__)
  CHECK(std::string(lf::gemm_kernel_isa()) == "wasm-simd128");
#elif defined(__SSE2__)
  CHECK(std::string(lf::gemm_kernel_isa()) == "sse2");
#else
  CHECK(std::string(lf::gemm_kernel_isa()) == "scalar");
#endif
#if !LF_RELAXED_SIMD
  const lf::DotFormChoice seen = lf::choose_dot_form();  // nothing to time here
  CHECK(seen.dot_add_ms == 0);
  CHECK(seen.pairs_ms == 0);
#endif
}

TEST_CASE("kernels: fused_madd is fma_f32 on every lane", "[kernels]") {
  // Integer sums up to Q8_0's 32·128·128, scales from f16 products (subnormal ones included)
  // and beyond, running sums next to half an ulp of the product, zeros, infinities and NaN.
  std::vector<int32_t> s = {32767, -32768, 524288, 0, 1, -1, 7, 3};
  std::vector<float> d = {0x1p-48f, 1e30f, 1.0f, INFINITY, NAN, 0x1.ffcp-1f, 1e-20f, -2.5f},
                     c = {1.0f, 1.0f, -0.0f, 1.0f, 1.0f, 0x1p-149f, 1e-45f, INFINITY};
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> sumi(-524288, 524288);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (int i = 0; i < 4000; ++i) {
    s.push_back(sumi(rng));
    d.push_back(std::ldexp(u(rng), static_cast<int>(rng() % 40) - 20));
    c.push_back(i % 3 ? u(rng) : std::ldexp(static_cast<float>(s.back()) * d.back(), 24));
  }
  for (size_t i = 0; i + 4 <= s.size(); ++i) {
    float got[4];
    lf::simd::store(got, lf::simd::fused_madd(lf::simd::load_i32x4(&s[i]), lf::simd::load_f32x4(&d[i]),
                                              lf::simd::load_f32x4(&c[i])));
    for (int k = 0; k < 4; ++k) {
      const float want = lf::fma_f32(static_cast<float>(s[i + k]), d[i + k], c[i + k]);
      INFO("lane " << i + k << ": " << s[i + k] << " * " << d[i + k] << " + " << c[i + k]);
      CHECK(std::memcmp(&got[k], &want, sizeof want) == 0);
    }
  }
}

TEST_CASE("kernels: keep_greater and keep_less pick as a > b ? a : b and a < b ? a : b, NaN, zeros and infinities too", "[kernels]") {
  const float values[] = {NAN, -NAN, 0.0f, -0.0f, INFINITY, -INFINITY, 1.0f, -2.5f, 1e-40f, 3e38f};
  for (const float a : values) {
    for (const float b : values) {
      INFO("a=" << a << " b=" << b);
      alignas(16) float g[4], l[4];
      lf::simd::store(g, lf::simd::keep_greater(lf::simd::make(a, b, a, 0.0f), lf::simd::make(b, a, a, 0.0f)));
      lf::simd::store(l, lf::simd::keep_less(lf::simd::make(a, b, a, 0.0f), lf::simd::make(b, a, a, 0.0f)));
      REQUIRE(lf::f32_bits(g[0]) == lf::f32_bits(a > b ? a : b));
      REQUIRE(lf::f32_bits(g[1]) == lf::f32_bits(b > a ? b : a));
      REQUIRE(lf::f32_bits(g[2]) == lf::f32_bits(a));
      REQUIRE(lf::f32_bits(l[0]) == lf::f32_bits(a < b ? a : b));
      REQUIRE(lf::f32_bits(l[1]) == lf::f32_bits(b < a ? b : a));
      REQUIRE(lf::f32_bits(l[2]) == lf::f32_bits(a));
      REQUIRE(lf::simd::any_nan(lf::simd::make(0.0f, a, b, 1.0f)) == (std::isnan(a) || std::isnan(b)));
    }
  }
}

TEST_CASE("kernels: clamp_floats is ggml_clamp's MAX(MIN(x, hi), lo), NaN, zeros, infinities and tails too", "[kernels]") {
  const float values[] = {NAN, -NAN, 0.0f, -0.0f, INFINITY, -INFINITY, 1.0f, -2.5f, 3.0f, 1e-40f, -3e38f};
  std::vector<float> x;
  for (const float a : values) {
    for (const float b : values) x.insert(x.end(), {a, b});
  }
  x.push_back(7.0f);  // a tail past the vectors
  for (const auto& [lo, hi] : {std::pair{-1.0f, 2.0f}, std::pair{-3.4028235e38f, 3.4028235e38f}, std::pair{0.0f, 0.0f}}) {
    std::vector<float> got(x.size()), in_place = x;
    lf::clamp_floats(x.data(), static_cast<int64_t>(x.size()), lo, hi, got.data());
    lf::clamp_floats(in_place.data(), static_cast<int64_t>(in_place.size()), lo, hi, in_place.data());
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("x=" << x[i] << " lo=" << lo << " hi=" << hi);
      const float a = x[i] < hi ? x[i] : hi;
      const float expect = a > lo ? a : lo;
      REQUIRE(lf::f32_bits(got[i]) == lf::f32_bits(expect));
      REQUIRE(lf::f32_bits(in_place[i]) == lf::f32_bits(expect));
    }
  }
}

TEST_CASE("kernels: fused_madd rounds once where the double sum lands on a halfway point", "[kernels]") {
  // sumi·d = (2^20 + 1)·2^-44·(1 - 2^-20) = 2^-24 - 2^-64, added to c = 1 + 2^-23: the exact sum
  // lies 2^-64 below the midpoint 1 + 2^-23 + 2^-24, so it rounds down to c; in double the 2^-64
  // is lost, the sum is the midpoint, and f32 ties to even, up to 1 + 2^-22. Each lane in turn,
  // the others ordinary, so that the flagged vector is taken through the scalar step whole.
  const int32_t halfway_sumi = (1 << 20) + 1;
  const float halfway_d = 0x1p-44f * (1.0f - 0x1p-20f), halfway_c = 1.0f + 0x1p-23f;
  REQUIRE(static_cast<float>(static_cast<double>(halfway_sumi) * halfway_d + halfway_c) == 1.0f + 0x1p-22f);
  for (int lane = 0; lane < 4; ++lane) {
    int32_t s[4] = {3, -7, 11, 100};
    float d[4] = {0.25f, 1.5f, -0.125f, 0x1p-10f}, c[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    s[lane] = halfway_sumi;
    d[lane] = halfway_d;
    c[lane] = halfway_c;
    float got_int[4], got_float[4];
    lf::simd::store(got_int, lf::simd::fused_madd(lf::simd::load_i32x4(s), lf::simd::load_f32x4(d), lf::simd::load_f32x4(c)));
    lf::simd::store(got_float, lf::simd::fused_madd(lf::simd::to_f32(lf::simd::load_i32x4(s)), lf::simd::load_f32x4(d),
                                                    lf::simd::load_f32x4(c)));
    const float want[4] = {lane == 0 ? 1.0f + 0x1p-23f : 1.75f, lane == 1 ? 1.0f + 0x1p-23f : -8.5f,
                           lane == 2 ? 1.0f + 0x1p-23f : 1.625f, lane == 3 ? 1.0f + 0x1p-23f : 4.09765625f};
    for (int k = 0; k < 4; ++k) {
      INFO("halfway case in lane " << lane << ", lane " << k);
      CHECK(std::memcmp(&got_int[k], &want[k], sizeof want[k]) == 0);
      CHECK(std::memcmp(&got_float[k], &want[k], sizeof want[k]) == 0);
    }
  }
}

TEST_CASE("kernels: fused_madd of floats is fma_f32 on every lane", "[kernels]") {
  // Products of any two floats (attention's value times its softmax weight), sums that cancel
  // them, running sums far above and below them, subnormals, zeros of both signs, infinities, NaN.
  std::vector<float> a = {0x1p-149f, -0.0f, 3.0f, INFINITY, NAN, 0x1.fffffep127f, 1e-30f, 0x1.000002p0f},
                     b = {0.5f, 1.0f, 0x1.555556p-2f, 0.0f, 1.0f, 2.0f, 1e-20f, 0x1.fffffcp-1f},
                     c = {0x1p-149f, 0.0f, -1.0f, 1.0f, 1.0f, -INFINITY, 0x1p-126f, -1.0f};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (int i = 0; i < 6000; ++i) {
    a.push_back(std::ldexp(u(rng), static_cast<int>(rng() % 60) - 30));
    b.push_back(std::ldexp(u(rng), static_cast<int>(rng() % 60) - 30));
    // every third sum the product's negation or a value an exact f32 sum away from it
    const float ab = a.back() * b.back();
    c.push_back(i % 3 == 0 ? -ab : i % 3 == 1 ? std::ldexp(ab, 24) : u(rng));
  }
  for (size_t i = 0; i + 4 <= a.size(); ++i) {
    float got[4];
    lf::simd::store(got, lf::simd::fused_madd(lf::simd::load_f32x4(&a[i]), lf::simd::load_f32x4(&b[i]),
                                              lf::simd::load_f32x4(&c[i])));
    for (int k = 0; k < 4; ++k) {
      const float want = lf::fma_f32(a[i + k], b[i + k], c[i + k]);
      INFO("lane " << i + k << ": " << a[i + k] << " * " << b[i + k] << " + " << c[i + k]);
      CHECK(std::memcmp(&got[k], &want, sizeof want) == 0);
    }
  }
}

TEST_CASE("kernels: GEMM equals the vec_dot_ref loop bit for bit over shapes around the tiles", "[kernels]") {
  std::mt19937 rng(20261129);
  for (const lf::GgmlType type : kTypes) {
    for (const int64_t n_in : {32, 64, 96, 5376}) {
      for (const int64_t n_out : {1, 3, 7, 8, 9, 33}) {
        const Matrix W = make_weights(rng, type, n_in, n_out, Weights::quantized);
        for (const int n_tok : {1, 2, 3, 5, 8, 13}) {
          const std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, false);
          check_exact(W.view, xc, n_tok, 0, n_out, 0, n_in);
        }
      }
    }
  }
}

TEST_CASE("kernels: raw quants (Q8_0 -128 included), zero blocks, zero tokens, large scales", "[kernels]") {
  std::mt19937 rng(7);
  for (const lf::GgmlType type : kTypes) {
    for (const Weights kind : {Weights::raw_bytes, Weights::zero_blocks}) {
      for (const int64_t n_out : {9, 12}) {
        const Matrix W = make_weights(rng, type, 5376, n_out, kind);
        for (const int n_tok : {1, 5, 13}) {
          const std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, true);
          check_exact(W.view, xc, n_tok, 0, n_out, 0, 5376);
        }
      }
    }
  }
}

TEST_CASE("kernels: every token count 1..17 and 33 across the token tiles and block runs", "[kernels]") {
  std::mt19937 rng(17);
  for (const lf::GgmlType type : kTypes) {
    // 17 blocks: one whole run of 16 and a tail of 1; 33 rows: 8 strips and a tail of 1 (36:
    // 9 whole strips, which the relaxed build also runs in row strips)
    for (const int64_t n_out : {33, 36}) {
      const Matrix W = make_weights(rng, type, 544, n_out, Weights::quantized);
      for (int n_tok = 1; n_tok <= 17; ++n_tok) {
        const std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, false);
        check_exact(W.view, xc, n_tok, 0, n_out, 0, 544);
      }
      const std::vector<uint8_t> xc = make_activations(rng, W.view, 33, true);
      check_exact(W.view, xc, 33, 0, n_out, 0, 544);
      check_exact(W.view, xc, 33, 2, 31, 32, 512);
    }
  }
}

TEST_CASE("kernels: arbitrary activation quants (-128 included) against raw and typical weights", "[kernels]") {
  std::mt19937 rng(29);
  for (const lf::GgmlType type : kTypes) {
    for (const Weights kind : {Weights::raw_bytes, Weights::typical}) {
      for (const int64_t n_out : {11, 12}) {
        const Matrix W = make_weights(rng, type, 1024, n_out, kind);
        for (const int n_tok : {1, 4, 16, 19}) {
          std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, false);
          randomize_activation_quants(rng, &xc);
          check_exact(W.view, xc, n_tok, 0, n_out, 0, 1024);
        }
      }
    }
  }
}

TEST_CASE("kernels: extreme quants: every weight -8 or -128, every activation quant -128 or 127", "[kernels]") {
  // The largest block products there are: exact in every kernel's integer lanes or not at all.
  for (const lf::GgmlType type : kTypes) {
    std::mt19937 rng(31);
    Matrix W = make_weights(rng, type, 256, 8, Weights::quantized);
    const bool q4 = type == lf::GgmlType::Q4_0;
    const size_t block = q4 ? sizeof(lf::block_q4_0) : sizeof(lf::block_q8_0);
    for (size_t b = 0; b < W.bytes.size(); b += block) {
      const uint16_t d = 0x3C00;  // 1.0
      std::memcpy(&W.bytes[b], &d, sizeof d);
      std::memset(&W.bytes[b + 2], q4 ? 0x00 : 0x80, block - 2);  // q4 nibble 0 = -8; q8 0x80 = -128
    }
    for (const int8_t q : {int8_t{-128}, int8_t{127}}) {
      std::vector<uint8_t> xc = make_activations(rng, W.view, 17, false);
      for (size_t b = 0; b < xc.size(); b += sizeof(lf::block_q8_0)) {
        const uint16_t d = 0x3C00;
        std::memcpy(&xc[b], &d, sizeof d);
        std::memset(&xc[b + 2], static_cast<uint8_t>(q), sizeof(lf::block_q8_0) - 2);
      }
      for (const int n_tok : {1, 2, 3, 8, 9, 16, 17}) {  // GEMV, tiles, two-strip kernels
        check_exact(W.view, xc, n_tok, 0, 8, 0, 256);
        std::vector<float> y(static_cast<size_t>(8 * n_tok));
        lf::matmul_rows(W.view, xc.data(), n_tok, y.data(), 0, 8, 0, 256);
        const float per_block = (q4 ? -8.0f : -128.0f) * q * 32.0f;  // exact in f32
        CHECK(y[0] == per_block * 8.0f);
        CHECK(y[static_cast<size_t>(8 * n_tok - 1)] == per_block * 8.0f);
      }
    }
  }
}

// W [n_out, n_in] of K-quant type: arbitrary bytes (every scale, min and quant pattern), with
// f16 super-block scales d (and dmin) finite and at most 2^5, so no output overflows.
Matrix make_k_weights(std::mt19937& rng, lf::GgmlType type, int64_t n_in, int64_t n_out) {
  const bool mins = type != lf::GgmlType::Q6_K;  // Q4_K and Q5_K start with d, dmin
  const uint64_t block = type == lf::GgmlType::Q4_K ? sizeof(lf::block_q4_K)
                         : type == lf::GgmlType::Q5_K ? sizeof(lf::block_q5_K) : sizeof(lf::block_q6_K);
  const int64_t nb = n_in / 256;
  Matrix m;
  m.bytes.resize(static_cast<size_t>(block * nb * n_out));
  std::uniform_int_distribution<int> byte(0, 255), exponent(1, 20);
  for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(byte(rng));
  const auto scale = [&] { return static_cast<uint16_t>((byte(rng) & 0x80) << 8 | exponent(rng) << 10 | byte(rng) << 2); };
  for (uint64_t b = 0; b < m.bytes.size(); b += block) {
    const uint16_t d = scale(), dmin = scale();
    std::memcpy(&m.bytes[b + (mins ? 0 : offsetof(lf::block_q6_K, d))], &d, sizeof d);
    if (mins) std::memcpy(&m.bytes[b + sizeof d], &dmin, sizeof dmin);
  }
  describe(&m, type, n_in, n_out, block * nb);
  return m;
}

TEST_CASE("kernels: Q4_K, Q5_K and Q6_K GEMM equal the vec_dot_ref loop bit for bit", "[kernels]") {
  std::mt19937 rng(43);
  for (const lf::GgmlType type : {lf::GgmlType::Q4_K, lf::GgmlType::Q5_K, lf::GgmlType::Q6_K}) {
    for (const int64_t n_in : {256, 512, 5376}) {
      const Matrix W = make_k_weights(rng, type, n_in, 5);
      for (const int n_tok : {1, 2, 7, 16, 17}) {
        const std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, true);
        check_exact(W.view, xc, n_tok, 0, 5, 0, n_in);
        check_exact(W.view, xc, n_tok, 1, 4, n_in - 256, n_in);  // the last super-block
        check_exact(W.view, xc, n_tok, 0, 5, 0, 0);                // an empty slice sums to 0
      }
    }
    const Matrix W = make_k_weights(rng, type, 2560, 3);
    const std::vector<uint8_t> xc = make_activations(rng, W.view, 4, false);
    check_exact(W.view, xc, 4, 0, 3, 512, 2048);  // a middle slice
    std::vector<float> y(12);
    lf::matmul_rows(W.view, xc.data(), 4, y.data(), 0, 3, 0, 2560);
    int nonzero = 0;
    for (const float v : y) nonzero += v != 0.0f && std::isfinite(v);
    CHECK(nonzero == 12);
  }
}

TEST_CASE("kernels: F32, F16 and BF16 GEMM equal the vec_dot_ref loop bit for bit", "[kernels]") {
  // Row counts around the kernel's 8 rows side by side (tails of 1 and 7, 128 as the MoE
  // router), rows from mid-group, column slices; values of every magnitude with zeros, -0,
  // subnormals, infinities and NaNs in weights and activations, and halves from arbitrary bits.
  // NaN outputs compare as NaNs (check_exact's any_nan); everything else bit for bit.
  std::mt19937 rng(27);
  std::uniform_int_distribution<int> pick(0, 15), byte(0, 255);
  const float specials[] = {0.0f, -0.0f, 1e-40f, -3e-39f, INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 65504.0f};
  // long rows get only the specials that leave their sums finite (zeros and subnormals), or
  // nearly every output would be a NaN
  const auto value = [&](std::normal_distribution<float>& normal, int64_t n_in) {
    const int k = pick(rng);
    return k < (n_in <= 64 ? 10 : 4) && pick(rng) == 0 ? specials[k] : normal(rng);
  };
  for (const lf::GgmlType type : {lf::GgmlType::F32, lf::GgmlType::F16, lf::GgmlType::BF16}) {
    const uint64_t elem = type == lf::GgmlType::F32 ? 4 : 2;
    for (const int64_t n_in : {1, 5, 64, 2816}) {
      for (const int64_t n_out : {1, 7, 8, 9, 17, 128}) {
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> w(static_cast<size_t>(n_in * n_out)), x(static_cast<size_t>(n_in * 3));
        for (float& v : w) v = value(normal, n_in);
        for (float& v : x) v = value(normal, n_in);
        Matrix W;
        W.bytes.resize(static_cast<size_t>(elem * n_in * n_out));
        describe(&W, type, n_in, n_out, elem * n_in);
        for (size_t i = 0; i < w.size(); ++i) {
          if (type == lf::GgmlType::F32) {
            std::memcpy(W.bytes.data() + 4 * i, &w[i], 4);
          } else {
            const uint16_t h = type == lf::GgmlType::F16 ? lf::fp32_to_fp16(w[i]) : lf::fp32_to_bf16(w[i]);
            std::memcpy(W.bytes.data() + 2 * i, &h, 2);
          }
        }
        if (type != lf::GgmlType::F32 && n_out == 9 && n_in <= 64) {  // arbitrary halves, NaN and infinity patterns included
          for (uint8_t& b : W.bytes) b = static_cast<uint8_t>(byte(rng));
        }
        for (const int n_tok : {1, 3}) {
          std::vector<uint8_t> xc;
          REQUIRE(lf::convert_activations(W.view, x.data(), n_tok, &xc).ok());
          check_exact(W.view, xc, n_tok, 0, n_out, 0, n_in, true);
          check_exact(W.view, xc, n_tok, n_out / 2, n_out, 0, n_in, true);  // from mid-group
          if (n_in > 1) check_exact(W.view, xc, n_tok, 0, n_out, 1, n_in - 1, true);  // a column slice
        }
      }
    }
  }
}

TEST_CASE("kernels: row ranges and input-column ranges, as thread shards use them", "[kernels]") {
  std::mt19937 rng(11);
  for (const lf::GgmlType type : kTypes) {
    for (const int64_t n_out : {33, 36}) {
      const Matrix W = make_weights(rng, type, 5376, n_out, Weights::quantized);
      for (const int n_tok : {1, 3, 8, 13}) {
        const std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, false);
        check_exact(W.view, xc, n_tok, 1, 32, 0, 5376);       // unaligned strip start, row tail of 3
        check_exact(W.view, xc, n_tok, 5, 6, 0, 5376);        // a single row
        check_exact(W.view, xc, n_tok, 0, n_out, 0, 32);      // the first block only
        check_exact(W.view, xc, n_tok, 0, n_out, 224, 3200);  // a middle slice
        check_exact(W.view, xc, n_tok, 7, 30, 5344, 5376);    // the last block only
        check_exact(W.view, xc, n_tok, 0, n_out, 2688, 2688);  // an empty slice sums to 0
      }
    }
  }
}

TEST_CASE("kernels: many tokens split the columns into cache chunks without changing a bit", "[kernels]") {
  std::mt19937 rng(3);
  for (const lf::GgmlType type : kTypes) {
    for (const int64_t n_out : {5, 8}) {
      const Matrix W = make_weights(rng, type, 5376, n_out, Weights::quantized);
      const std::vector<uint8_t> xc = make_activations(rng, W.view, 100, true);
      check_exact(W.view, xc, 100, 0, n_out, 0, 5376);
      check_exact(W.view, xc, 100, 2, 5, 96, 5280);
    }
  }
}

// W [n_scales, 32] of `type`: one block per row, scale h[r] and quants (1, 0, ..., 0).
Matrix unit_rows(lf::GgmlType type, const std::vector<uint16_t>& h) {
  const bool q4 = type == lf::GgmlType::Q4_0;
  const size_t block = q4 ? sizeof(lf::block_q4_0) : sizeof(lf::block_q8_0);
  Matrix m;
  m.bytes.assign(block * h.size(), q4 ? 0x88 : 0);  // q4: nibbles 8, i.e. weights 0
  for (size_t r = 0; r < h.size(); ++r) {
    std::memcpy(&m.bytes[block * r], &h[r], sizeof(uint16_t));
    m.bytes[block * r + 2] = q4 ? 0x89 : 1;  // element 0 is 1 (Q4_0: low nibble 9)
  }
  describe(&m, type, 32, static_cast<int64_t>(h.size()), block);
  return m;
}

// n_tok activation rows with element 0 = 127 (q 127, d = 1), the rest 0.
std::vector<uint8_t> unit_activations(const lf::WeightView& W, int n_tok) {
  std::vector<float> x(static_cast<size_t>(32 * n_tok), 0.0f);
  for (int t = 0; t < n_tok; ++t) x[static_cast<size_t>(32 * t)] = 127.0f;
  std::vector<uint8_t> xc;
  REQUIRE(lf::convert_activations(W, x.data(), n_tok, &xc).ok());
  return xc;
}

TEST_CASE("kernels: every finite f16 weight scale converts as fp16_to_fp32 does", "[kernels]") {
  // One block per row with the row's scale h and quants (1, 0, ...): the output is f32(h)·127.
  std::vector<uint16_t> scales;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7C00u) != 0x7C00u) scales.push_back(static_cast<uint16_t>(h));  // infinities and NaNs are no scales
  }
  for (const lf::GgmlType type : kTypes) {
    const Matrix W = unit_rows(type, scales);
    for (const int n_tok : {1, 2, 5, 9, 17}) {  // GEMV, tiles, two-strip kernels
      const std::vector<uint8_t> xc = unit_activations(W.view, n_tok);
      check_exact(W.view, xc, n_tok, 0, W.view.n_out, 0, 32);
      std::vector<float> y(scales.size() * static_cast<size_t>(n_tok));
      lf::matmul_rows(W.view, xc.data(), n_tok, y.data(), 0, W.view.n_out, 0, 32);
      CHECK(y[0x3C00] == 127.0f);  // h = 1.0
      CHECK(y[0x0001] == 127.0f * 0x1p-24f);  // the smallest subnormal
    }
  }
}

TEST_CASE("kernels: infinite and NaN weight scales give infinities and NaNs in their rows only", "[kernels]") {
  // 1, +inf, -inf, 2, 0.5, NaN, -1, 0
  const std::vector<uint16_t> scales = {0x3C00, 0x7C00, 0xFC00, 0x4000, 0x3800, 0x7E01, 0xBC00, 0x0000};
  for (const lf::GgmlType type : kTypes) {
    const Matrix W = unit_rows(type, scales);
    for (const int n_tok : {1, 2, 3, 5, 8, 9, 16, 17}) {  // GEMV, tiles, two-strip kernels
      INFO("n_tok " << n_tok);
      const std::vector<uint8_t> xc = unit_activations(W.view, n_tok);
      check_exact(W.view, xc, n_tok, 0, 8, 0, 32);
      std::vector<float> y(static_cast<size_t>(8 * n_tok));
      lf::matmul_rows(W.view, xc.data(), n_tok, y.data(), 0, 8, 0, 32);
      for (int t = 0; t < n_tok; ++t) {
        const float* yt = y.data() + 8 * t;
        CHECK(yt[0] == 127.0f);
        CHECK(std::isinf(yt[1]));
        CHECK(yt[1] > 0);
        CHECK(std::isinf(yt[2]));
        CHECK(yt[2] < 0);
        CHECK(yt[3] == 254.0f);
        CHECK(yt[4] == 63.5f);
        CHECK(std::isnan(yt[5]));
        CHECK(yt[6] == -127.0f);
        CHECK(yt[7] == 0.0f);
      }
    }
  }
}

TEST_CASE("kernels: decode's GEMV path (1 to 4 tokens) over odd row counts, row ranges and column slices",
          "[kernels]") {
  // 33 blocks: no power of two; n_tok 1..4 spans the GEMV path and the first tiled counts.
  std::mt19937 rng(23);
  for (const lf::GgmlType type : kTypes) {
    for (const int64_t n_out : {1, 2, 3, 4, 5, 7, 12, 13}) {
      for (const Weights kind : {Weights::quantized, Weights::raw_bytes, Weights::zero_blocks}) {
        const Matrix W = make_weights(rng, type, 1056, n_out, kind);
        for (int n_tok = 1; n_tok <= 4; ++n_tok) {
          std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, n_tok == 4);
          if (kind == Weights::raw_bytes) randomize_activation_quants(rng, &xc);
          check_exact(W.view, xc, n_tok, 0, n_out, 0, 1056);
          check_exact(W.view, xc, n_tok, n_out / 2, n_out, 0, 1056);     // a range starting mid-strip
          check_exact(W.view, xc, n_tok, 0, n_out, 160, 544);            // a column slice: x_row > its bytes
          check_exact(W.view, xc, n_tok, n_out - 1, n_out, 1024, 1056);  // the last row, the last block
        }
      }
    }
  }
}
TEST_CASE("kernels: one token over 1 to 9 strips, as the relaxed build's four-strip calls leave them", "[kernels]") {
  // 4 to 36 rows: 1 to 9 strips, so every count of strips (1, 2, 3) a last four-strip call is
  // short of, and ranges starting at every strip offset of a call: from mid-strip, from the
  // second, third and fourth strip, to mid-strip; a column slice; the last row alone.
  std::mt19937 rng(26);
  for (const lf::GgmlType type : kTypes) {
    for (const int64_t n_out : {4, 8, 12, 16, 20, 24, 28, 36}) {
      for (const Weights kind : {Weights::quantized, Weights::raw_bytes, Weights::zero_blocks}) {
        const Matrix W = make_weights(rng, type, 1056, n_out, kind);
        std::vector<uint8_t> xc = make_activations(rng, W.view, 1, kind == Weights::zero_blocks);
        if (kind == Weights::raw_bytes) randomize_activation_quants(rng, &xc);
        check_exact(W.view, xc, 1, 0, n_out, 0, 1056);
        for (const int64_t r0 : {1, 4, 9, 14}) {
          if (r0 < n_out) check_exact(W.view, xc, 1, r0, n_out, 0, 1056);
        }
        check_exact(W.view, xc, 1, 0, n_out - 2, 0, 1056);  // ending mid-strip
        check_exact(W.view, xc, 1, 0, n_out, 160, 544);     // a column slice
        check_exact(W.view, xc, 1, n_out - 1, n_out, 1024, 1056);
      }
    }
  }
}


TEST_CASE("kernels: batched decode (2 to 16 tokens): every n_tok 1..17 over strip pairs and token groups",
          "[kernels]") {
  // 4, 12, 20 rows: 1, 3, 5 strips, so a pair of strips, a lone last strip of a pair and none;
  // n_tok 1..17 spans the relaxed build's two-strip kernels (1 to 8 tokens) and their end, the
  // GEMV path's end at 2 and the tiles of 16. Rows from and to mid-strip; a column slice (x_row
  // larger than the slice's bytes); the last row and block alone.
  std::mt19937 rng(24);
  for (const lf::GgmlType type : kTypes) {
    for (const int64_t n_out : {4, 12, 20}) {
      for (const Weights kind : {Weights::quantized, Weights::raw_bytes, Weights::zero_blocks}) {
        const Matrix W = make_weights(rng, type, 1056, n_out, kind);
        for (int n_tok = 1; n_tok <= 17; ++n_tok) {
          std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, kind == Weights::zero_blocks);
          if (kind == Weights::raw_bytes) randomize_activation_quants(rng, &xc);
          check_exact(W.view, xc, n_tok, 0, n_out, 0, 1056);
          check_exact(W.view, xc, n_tok, 1, n_out - 1, 0, 1056);        // starting and ending mid-strip
          check_exact(W.view, xc, n_tok, n_out / 2 + 1, n_out, 0, 1056);  // a lone strip cut at its start
          check_exact(W.view, xc, n_tok, 0, n_out, 160, 544);             // a column slice
          check_exact(W.view, xc, n_tok, n_out - 1, n_out, 1024, 1056);   // the last row, the last block
        }
      }
    }
  }
}

TEST_CASE("kernels: batched decode over long rows, in several column chunks", "[kernels]") {
  // 32768 columns (1024 blocks): the relaxed build's packed activations exceed one column chunk
  // of 1 MiB from 7 tokens on for the strip pairs (160 bytes per token and block) and from 26 on
  // for the one-strip kernel (40 bytes), so 7, 8 and 33 tokens carry their sums through Y from
  // chunk to chunk; 9 and 17 run in one chunk.
  std::mt19937 rng(25);
  for (const lf::GgmlType type : kTypes) {
    const Matrix W = make_weights(rng, type, 32768, 8, Weights::quantized);
    for (const int n_tok : {2, 7, 8, 9, 17, 33}) {
      const std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, true);
      check_exact(W.view, xc, n_tok, 0, 8, 0, 32768);
      check_exact(W.view, xc, n_tok, 3, 6, 96, 32704);
    }
  }
}

TEST_CASE("kernels: the reference outputs compared are not trivially zero", "[kernels]") {
  std::mt19937 rng(5);
  const Matrix W = make_weights(rng, lf::GgmlType::Q4_0, 96, 8, Weights::quantized);
  const std::vector<uint8_t> xc = make_activations(rng, W.view, 3, false);
  std::vector<float> y(24, 0.0f);
  lf::matmul_rows(W.view, xc.data(), 3, y.data(), 0, 8, 0, 96);
  int nonzero = 0;
  for (const float v : y) nonzero += v != 0.0f;
  CHECK(nonzero == 24);
}

namespace {

// The read bandwidth one thread reaches in this binary: int32 sums over `bytes` (a weight
// matrix's size, far beyond the caches) with the kernels' vectors, best of 3, in GB/s. What a
// streaming GEMV can hope for is measured in the same run as the kernels.
double read_bandwidth_gbs(uint64_t bytes) {
  namespace simd = lf::simd;
  std::vector<int32_t> buffer(static_cast<size_t>(bytes / sizeof(int32_t)), 1);
  const size_t n = buffer.size() / 16 * 16;
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    simd::I32x4 acc[4] = {simd::make_i32(0, 0, 0, 0), simd::make_i32(0, 0, 0, 0), simd::make_i32(0, 0, 0, 0),
                          simd::make_i32(0, 0, 0, 0)};
    for (size_t i = 0; i < n; i += 16) {
      for (int k = 0; k < 4; ++k) acc[k] = simd::add(acc[k], simd::load_i32x4(&buffer[i + 4 * static_cast<size_t>(k)]));
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    int32_t lanes[4];
    simd::store_i32(lanes, simd::add(simd::add(acc[0], acc[1]), simd::add(acc[2], acc[3])));
    REQUIRE(static_cast<size_t>(lanes[0]) + static_cast<size_t>(lanes[1]) + static_cast<size_t>(lanes[2]) +
                static_cast<size_t>(lanes[3]) == n);  // every element read once
  }
  return static_cast<double>(n * sizeof(int32_t)) / best * 1e-9;
}

// The CPU time the process has used, in seconds. On a shared machine a run's wall time also
// holds the other jobs' time slices, its CPU time does not (though a job on the sibling
// hyperthread still takes the core's ports). Under Node, through process.cpuUsage.
double cpu_seconds() {
#if defined(__EMSCRIPTEN__)
  return EM_ASM_DOUBLE({
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  });
#else
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
#endif
}

}  // namespace

// Not a correctness test (hidden; run with "[kernels-bench]"): GEMM throughput on the 31B
// layer's FFN shapes, 5376 -> 21504 and back, for decode and batched decode (1 to 4, 8 and 16
// tokens; best of 10, each also as a multiple of the 1-token time), a 128-token prompt (best of
// 3), between two reads of the same binary's read bandwidth (the machine is shared: they show
// how steady the run was). Times are CPU time (cpu_seconds), the best wall time beside them.
// Each shape checks one output row against the reference so a broken kernel cannot post a
// figure. Numbers go to docs/kernels.md.
TEST_CASE("kernels: GEMM throughput on the 31B layer's shapes", "[.][kernels-bench]") {
  std::mt19937 rng(1);
  const uint64_t q4_matrix_bytes = uint64_t{21504} * (5376 / 32) * sizeof(lf::block_q4_0);
  const auto probe = [&] {
    std::printf("read bandwidth, one thread, %.0f MB: %6.2f GB/s\n", static_cast<double>(q4_matrix_bytes) * 1e-6,
                read_bandwidth_gbs(q4_matrix_bytes));
  };
  probe();
  struct Shape { int64_t n_in, n_out; std::vector<int> n_toks; };
  const Shape shapes[] = {{5376, 21504, {1, 2, 3, 4, 8, 16}}, {21504, 5376, {1, 2, 3, 4, 8, 16}},
                          {5376, 4096, {128}}, {21504, 1024, {128}}};
  for (const lf::GgmlType type : kTypes) {
    for (const Shape& s : shapes) {
      const Matrix W = make_weights(rng, type, s.n_in, s.n_out, Weights::typical);
      std::vector<uint8_t> strips;
      const lf::WeightView K = kernel_layout(W.view, &strips);  // as the loader lays it out
      double one_token = 0;  // the shape's decode time, which batched decode is measured against
      for (const int n_tok : s.n_toks) {
        const std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, false);
        std::vector<float> y(static_cast<size_t>(n_tok * s.n_out));
        double best = 1e30, best_wall = 1e30;
        for (int rep = 0; rep < (n_tok <= 16 ? 10 : 3); ++rep) {  // short runs: more tries at a quiet moment
          const auto start = std::chrono::steady_clock::now();
          const double cpu_start = cpu_seconds();
          lf::matmul_rows(K, xc.data(), n_tok, y.data(), 0, s.n_out, 0, s.n_in);
          best = std::min(best, cpu_seconds() - cpu_start);
          best_wall = std::min(best_wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        const std::vector<float> want = reference(W.view, xc.data(), n_tok, s.n_out - 1, s.n_out, 0, s.n_in);
        for (int t = 0; t < n_tok; ++t) {
          const size_t i = static_cast<size_t>(t * s.n_out + s.n_out - 1);
          REQUIRE(std::memcmp(&y[i], &want[i], sizeof(float)) == 0);
        }
        const double macs = static_cast<double>(s.n_in) * static_cast<double>(s.n_out) * n_tok;
        const double bytes = static_cast<double>(W.view.row_bytes) * static_cast<double>(s.n_out);
        if (n_tok == 1) one_token = best;
        char ratio[32] = "";
        if (one_token > 0) std::snprintf(ratio, sizeof ratio, "%5.2fx 1 token", best / one_token);
        std::printf("%-5s %s %5lld x %5lld  n_tok %3d  %8.2f ms cpu (%8.2f wall)  %14s  %6.2f GMAC/s  "
                    "%6.2f GB/s weights\n",
                    type == lf::GgmlType::Q4_0 ? "Q4_0" : "Q8_0", lf::gemm_kernel_isa(),
                    static_cast<long long>(s.n_in), static_cast<long long>(s.n_out), n_tok, best * 1e3,
                    best_wall * 1e3, ratio, macs / best * 1e-9, bytes / best * 1e-9);
      }
    }
  }
  probe();
}

namespace {

// gemm_lanes16 of W · x [n_tok, n_in] over rows [4, n_out) (all of them when n_out is 4): each
// output of the range is expect(r, t) bit for bit (NaN for NaN), the rows before it untouched.
template <typename Expect>
void require_lanes16(const lf::WeightView& W, const std::vector<float>& x, int n_tok, Expect expect) {
  REQUIRE(lf::gemm_lanes16_fits(W));
  const int64_t n_out = W.n_out, r0 = n_out > 4 ? 4 : 0;
  std::vector<float> y(static_cast<size_t>(n_tok * n_out), -7.0f);
  lf::gemm_lanes16(W, x.data(), n_tok, y.data(), r0, n_out);
  for (int t = 0; t < n_tok; ++t) {
    for (int64_t r = 0; r < n_out; ++r) {
      INFO("t=" << t << " r=" << r);
      const float got = y[t * n_out + r];
      if (r < r0) {
        REQUIRE(got == -7.0f);  // outside the range: untouched
        continue;
      }
      const float want = expect(r, t);
      REQUIRE((lf::f32_bits(got) == lf::f32_bits(want) || (std::isnan(got) && std::isnan(want))));
    }
  }
}

}  // namespace

TEST_CASE("kernels: the F16 and BF16 GEMMs in tinyBLAS's lanes equal their scalar references bit for bit", "[kernels]") {
  // Random and extreme weights (F16: ±65504, subnormals, ±0; BF16: ±3e38, tiny, ±0) against
  // activations of the weights' type, row ranges that start and stop inside the matrix and
  // inside its strips of 8 rows, token counts around the kernel's groups of 6 and tiles.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const uint16_t f16_extremes[] = {0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0000, 0x8000, 0x3C00};
  const float bf16_extremes[] = {3.0e38f, -3.0e38f, 1e-30f, -1e-30f, 0.0f, -0.0f, 1.0f, 65504.0f};
  for (const lf::GgmlType type : {lf::GgmlType::F16, lf::GgmlType::BF16}) {
    const bool bf16 = type == lf::GgmlType::BF16;
    const auto half = [&](float f) { return bf16 ? lf::fp32_to_bf16(f) : lf::fp32_to_fp16(f); };
    const auto value = [&](uint16_t h) { return bf16 ? lf::bf16_to_fp32(h) : lf::fp16_to_fp32(h); };
    const auto extreme_half = [&]() { return bf16 ? lf::fp32_to_bf16(bf16_extremes[rng() % 8]) : f16_extremes[rng() % 8]; };
    for (const int64_t n_in : {32, 96, 768}) {
      for (const int64_t n_out : {4, 12, 36}) {
        for (const int n_tok : {1, 5, 6, 7, 13, 67}) {
          for (const bool extreme : {false, true}) {
            std::vector<uint16_t> w(static_cast<size_t>(n_in * n_out));
            for (uint16_t& h : w) h = extreme && rng() % 3 == 0 ? extreme_half() : half(normal(rng));
            std::vector<float> x(static_cast<size_t>(n_in * n_tok));
            for (float& v : x) v = value(half(extreme ? 1e-3f * normal(rng) : normal(rng)));
            lf::WeightView W;
            W.type = type;
            W.n_in = n_in;
            W.n_out = n_out;
            W.data = reinterpret_cast<const uint8_t*>(w.data());
            W.row_bytes = static_cast<uint64_t>(n_in) * 2;
            INFO("bf16=" << bf16 << " n_in=" << n_in << " n_out=" << n_out << " n_tok=" << n_tok << " extreme=" << extreme);
            require_lanes16(W, x, n_tok, [&](int64_t r, int t) {
              const uint16_t* wr = w.data() + r * n_in;
              const float* xt = x.data() + t * n_in;
              return bf16 ? lf::dot_bf16_lanes16_ref(wr, xt, n_in) : lf::dot_f16_lanes16_ref(wr, xt, n_in);
            });
          }
        }
      }
    }
  }
  // 16 elements a step is not tinyBLAS's BF16 step (32): declined.
  lf::WeightView W;
  W.type = lf::GgmlType::BF16;
  W.n_in = 48;
  W.n_out = 4;
  REQUIRE_FALSE(lf::gemm_lanes16_fits(W));
}

TEST_CASE("kernels: the BF16 references sum as _mm512_dpbf16_ps: each lane's odd element, then its even one", "[kernels]") {
  // w = 1; lane 0 takes 2^25 (element 1, then 0 from element 0), then elements 33 (2) and 32 (3):
  // 2^25 + 2 rounds to 2^25 (a tie, to even), + 3 to 2^25 + 4; even first, 2^25 + 3 rounds to
  // 2^25 + 4 and + 2 stays 2^25 + 8 after rounding (measured on the instruction: odd first).
  std::vector<uint16_t> w(64, lf::fp32_to_bf16(1.0f));
  std::vector<float> x(64, 0.0f);
  x[1] = 33554432.0f;
  x[33] = 2.0f;
  x[32] = 3.0f;
  REQUIRE(lf::dot_bf16_lanes16_ref(w.data(), x.data(), 64) == 33554436.0f);
  lf::WeightView W;
  W.type = lf::GgmlType::BF16;
  W.n_in = 64;
  W.n_out = 4;
  std::vector<uint16_t> rows;
  for (int r = 0; r < 4; ++r) rows.insert(rows.end(), w.begin(), w.end());
  W.data = reinterpret_cast<const uint8_t*>(rows.data());
  W.row_bytes = 128;
  std::vector<float> xs = x;
  xs.insert(xs.end(), x.begin(), x.end());
  std::vector<float> y(8);
  lf::gemm_lanes16(W, xs.data(), 2, y.data(), 0, 4);
  for (float v : y) REQUIRE(v == 33554436.0f);
  // ggml's vector dot keeps elements 0-31 and 32-63 in two accumulators, added in double at the
  // end: 2^25 and 1 + 1 + 1 (two in lane 0, one in lane 1) make 2^25 + 3, which rounds to
  // 2^25 + 4; one accumulator would lose each 1 against 2^25.
  std::fill(x.begin(), x.end(), 0.0f);
  x[1] = 33554432.0f;
  x[33] = x[32] = x[35] = 1.0f;
  REQUIRE(lf::dot_bf16_ggml(w.data(), x.data(), 64) == 33554436.0f);
  REQUIRE(lf::dot_bf16_lanes16_ref(w.data(), x.data(), 64) == 33554432.0f);
  W.n_out = 1;
  REQUIRE(lf::gemm_ggml_fits(W));
  float one = 0.0f;
  lf::gemm_ggml(W, x.data(), 1, &one, 0, 1);
  REQUIRE(one == 33554436.0f);
}

TEST_CASE("kernels: the F32 GEMM in tinyBLAS's 16 lanes equals its fused scalar reference bit for bit", "[kernels]") {
  // Random f32 weights and activations (products not exact in f32: the fused step's single
  // rounding shows), and extreme ones (huge, tiny, subnormal, ±0, a product that overflows), row
  // ranges inside the matrix and its strips, token counts around the groups of 6.
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float extremes[] = {3.0e38f, -3.0e38f, 1e-45f, -1e-45f, 1.17e-38f, 0.0f, -0.0f, 1.0f};
  for (const int64_t n_in : {16, 48, 1152}) {
    for (const int64_t n_out : {4, 12, 36}) {
      for (const int n_tok : {1, 6, 7, 67}) {
        for (const bool extreme : {false, true}) {
          std::vector<float> w(static_cast<size_t>(n_in * n_out)), x(static_cast<size_t>(n_in * n_tok));
          for (float& v : w) v = extreme && rng() % 3 == 0 ? extremes[rng() % 8] : normal(rng) / 3.0f;
          for (float& v : x) v = extreme && rng() % 5 == 0 ? extremes[rng() % 8] : normal(rng);
          lf::WeightView W;
          W.type = lf::GgmlType::F32;
          W.n_in = n_in;
          W.n_out = n_out;
          W.data = reinterpret_cast<const uint8_t*>(w.data());
          W.row_bytes = static_cast<uint64_t>(n_in) * 4;
          INFO("n_in=" << n_in << " n_out=" << n_out << " n_tok=" << n_tok << " extreme=" << extreme);
          require_lanes16(W, x, n_tok, [&](int64_t r, int t) {
            return lf::dot_f32_lanes16_ref(w.data() + r * n_in, x.data() + t * n_in, n_in);
          });
        }
      }
    }
  }
}

TEST_CASE("kernels: ggml's f32 vector dot in vectors equals its scalar reference bit for bit", "[kernels]") {
  // Random rows and rows with huge, tiny and signed-zero values, of 64 to 1024 elements.
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float extremes[] = {3.0e38f, -3.0e38f, 1e-45f, -1e-45f, 0.0f, -0.0f, 1.0f, 65504.0f};
  for (const int64_t n : {64, 128, 192, 1024}) {
    for (const bool extreme : {false, true}) {
      for (int trial = 0; trial < 50; ++trial) {
        std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
        for (float& v : x) v = extreme && rng() % 4 == 0 ? extremes[rng() % 8] : normal(rng);
        for (float& v : y) v = extreme && rng() % 4 == 0 ? extremes[rng() % 8] : normal(rng);
        const float got = lf::dot_f32_ggml(x.data(), y.data(), n), expect = lf::dot_f32_ggml_ref(x.data(), y.data(), n);
        INFO("n=" << n << " extreme=" << extreme << " trial=" << trial);
        REQUIRE((lf::f32_bits(got) == lf::f32_bits(expect) || (std::isnan(got) && std::isnan(expect))));
      }
    }
  }
  // Its order: 2^25 at element 0 (vector 0, lane 0) and 2 at elements 16 and 48 (vectors 1 and 3
  // of lane 0): v1 + v3 = 4 first, then 2^25 + 4 exactly; in element order each 2^25 + 2 is a
  // tie that rounds back to 2^25.
  std::vector<float> x(128, 0.0f), y(128, 1.0f);
  x[0] = 33554432.0f;
  x[16] = x[48] = 2.0f;
  REQUIRE(lf::dot_f32_ggml_ref(x.data(), y.data(), 128) == 33554436.0f);
  REQUIRE(lf::dot_f32_ggml(x.data(), y.data(), 128) == 33554436.0f);
}

TEST_CASE("kernels: the F16 and F32 products in ggml's vector dot equal the reference output by output", "[kernels]") {
  // One token (tinyBLAS declines a single column) and several (src0's rows not in fours: a
  // convolution's patches), past a tile of 16 tokens; a row range inside the matrix.
  std::mt19937 rng(14);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const lf::GgmlType type : {lf::GgmlType::F16, lf::GgmlType::F32}) {
    for (const int64_t n_in : {64, 192, 1024}) {
      for (const int n_tok : {1, 3, 17}) {
        const int64_t n_out = 13;
        std::vector<float> w(static_cast<size_t>(n_in * n_out)), x(static_cast<size_t>(n_in * n_tok));
        std::vector<uint16_t> h(w.size());
        for (size_t i = 0; i < w.size(); ++i) {
          h[i] = lf::fp32_to_fp16(normal(rng));
          w[i] = type == lf::GgmlType::F16 ? lf::fp16_to_fp32(h[i]) : normal(rng);
        }
        for (float& v : x) v = type == lf::GgmlType::F16 ? lf::fp16_to_fp32(lf::fp32_to_fp16(normal(rng))) : normal(rng);
        lf::WeightView W;
        W.type = type;
        W.n_in = n_in;
        W.n_out = n_out;
        W.data = type == lf::GgmlType::F16 ? reinterpret_cast<const uint8_t*>(h.data()) : reinterpret_cast<const uint8_t*>(w.data());
        W.row_bytes = static_cast<uint64_t>(n_in) * (type == lf::GgmlType::F16 ? 2 : 4);
        REQUIRE(lf::gemm_ggml_fits(W));
        std::vector<float> y(static_cast<size_t>(n_out * n_tok), -7.0f);
        lf::gemm_ggml(W, x.data(), n_tok, y.data(), 2, n_out);
        for (int t = 0; t < n_tok; ++t) {
          REQUIRE(y[t * n_out] == -7.0f);
          REQUIRE(y[t * n_out + 1] == -7.0f);
          for (int64_t r = 2; r < n_out; ++r) {
            INFO("type=" << static_cast<int>(type) << " n_in=" << n_in << " n_tok=" << n_tok << " t=" << t << " r=" << r);
            const float expect = lf::dot_f32_ggml_ref(w.data() + r * n_in, x.data() + t * n_in, n_in);
            REQUIRE(lf::f32_bits(y[t * n_out + r]) == lf::f32_bits(expect));
          }
        }
      }
    }
  }
}

TEST_CASE("kernels: madd_floats rounds each lane once, as fma_f32; add_scaled_floats twice", "[kernels]") {
  std::mt19937 rng(15);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float extremes[] = {3.0e38f, -3.0e38f, 1e-45f, 0.0f, -0.0f, 1.0f + 1.0f / 4096.0f, -(1.0f + 1.0f / 2048.0f), INFINITY};
  for (const int64_t n : {1, 3, 4, 7, 64, 1027}) {
    for (const bool extreme : {false, true}) {
      std::vector<float> a(static_cast<size_t>(n)), b(a.size()), acc(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = extreme && rng() % 3 == 0 ? extremes[rng() % 8] : normal(rng);
        b[i] = extreme && rng() % 3 == 0 ? extremes[rng() % 8] : normal(rng);
        acc[i] = extreme && rng() % 3 == 0 ? extremes[rng() % 8] : normal(rng);
      }
      std::vector<float> got = acc, scaled = acc;
      lf::madd_floats(got.data(), a.data(), b.data(), n);
      lf::add_scaled_floats(scaled.data(), a.data(), b[0], n);
      for (int64_t i = 0; i < n; ++i) {
        INFO("n=" << n << " extreme=" << extreme << " i=" << i);
        const float expect = lf::fma_f32(a[i], b[i], acc[i]);
        REQUIRE((lf::f32_bits(got[i]) == lf::f32_bits(expect) || (std::isnan(got[i]) && std::isnan(expect))));
        const float product = b[0] * a[i], twice = acc[i] + product;  // two roundings
        REQUIRE((lf::f32_bits(scaled[i]) == lf::f32_bits(twice) || (std::isnan(scaled[i]) && std::isnan(twice))));
      }
    }
  }
}

TEST_CASE("kernels: the F32 reference rounds each lane's step once, as an FMA", "[kernels]") {
  // (1 + 2^-12)² = 1 + 2^-11 + 2^-24: the product rounded to f32 loses 2^-24 (ties to even), so
  // adding -(1 + 2^-11) gives 0 unfused and 2^-24 fused. Lane 0 holds elements 0 and 16.
  std::vector<float> wl(32, 0.0f), xl(32, 0.0f);
  wl[0] = xl[0] = 1.0f + 1.0f / 4096.0f;
  wl[16] = 1.0f;
  xl[16] = -(1.0f + 1.0f / 2048.0f);
  // In element order lane 0 takes fma(w0, x0, 0) = f32(w0·x0) first, then fma(1, x16, that).
  const float got = lf::dot_f32_lanes16_ref(wl.data(), xl.data(), 32);
  REQUIRE(got == 0.0f);  // the first step rounds the product alone: fma(a, b, 0) is f32(a·b)
  // Reversed, the product meets the -(1 + 2^-11) inside one fused step and keeps its 2^-24.
  std::swap(wl[0], wl[16]);
  std::swap(xl[0], xl[16]);
  REQUIRE(lf::dot_f32_lanes16_ref(wl.data(), xl.data(), 32) == std::ldexp(1.0f, -24));
}

TEST_CASE("kernels: the F16 reference sums in tinyBLAS's order: 16 lanes, then halves", "[kernels]") {
  // w = 1 everywhere; x holds 2^25 (f32's step there is 4) at element 0 and 1 at elements 8, 24
  // and 40, all in lane 8: the lanes sum 3 there, and halving adds it to 2^25, rounding to
  // 2^25 + 4; added in element order each 1 is lost (2^25 + 1 rounds to 2^25).
  std::vector<uint16_t> w(64, lf::fp32_to_fp16(1.0f));
  std::vector<float> x(64, 0.0f);
  x[0] = 33554432.0f;
  x[8] = x[24] = x[40] = 1.0f;
  const float lanes = lf::dot_f16_lanes16_ref(w.data(), x.data(), 64);
  REQUIRE(lanes == 33554436.0f);
  float in_order = 0.0f;
  for (float v : x) in_order += v;
  REQUIRE(in_order != lanes);
}
