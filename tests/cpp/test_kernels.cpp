// The GEMM kernels (include/layerfold/kernels.h) against a loop of vec_dot_ref, bit for bit:
// the engine's agreement with llama.cpp and its thread-count invariance rest on that.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "layerfold/kernels.h"
#include "layerfold/ops.h"
#include "layerfold/quant.h"
#include "quant_test_data.h"

namespace {

constexpr float kUntouched = -777.0f;  // Y outside the requested rows must keep this

// How the weight blocks are made.
enum class Weights {
  quantized,  // quantize_row_*_ref of random rows (1e-6, 1, 1e4 scales per block)
  raw_bytes,  // arbitrary quants (Q8_0 includes -128) and scales (any finite f16, subnormals too)
  zero_blocks,  // quantized, then every third block zeroed (d = 0, quants 0)
};

struct Matrix {
  std::vector<uint8_t> bytes;
  lf::WeightView view;
};

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
    const std::vector<float> x = lf_test::random_row(rng, n_in);
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
  m.view.type = type;
  m.view.n_in = n_in;
  m.view.n_out = n_out;
  m.view.data = m.bytes.data();
  m.view.row_bytes = block * nb;
  return m;
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
  const uint64_t w_skip = W.row_bytes / static_cast<uint64_t>(W.n_in / 32) * static_cast<uint64_t>(k0 / 32);
  for (int t = 0; t < n_tok; ++t) {
    for (int64_t r = r0; r < r1; ++r) {
      y[static_cast<size_t>(t * W.n_out + r)] =
          lf::vec_dot_ref(W.type, W.row(r) + w_skip, xc + x_row * static_cast<uint64_t>(t) + x_skip, k1 - k0);
    }
  }
  return y;
}

// Runs the kernel and matmul_rows on the same inputs, both must equal the reference bit for bit.
void check_exact(const lf::WeightView& W, const std::vector<uint8_t>& xc, int n_tok, int64_t r0, int64_t r1,
                 int64_t k0, int64_t k1) {
  INFO("type " << (W.type == lf::GgmlType::Q4_0 ? "Q4_0" : "Q8_0") << " n_in " << W.n_in << " n_out " << W.n_out
               << " n_tok " << n_tok << " rows [" << r0 << ", " << r1 << ") cols [" << k0 << ", " << k1 << ")");
  const std::vector<float> want = reference(W, xc.data(), n_tok, r0, r1, k0, k1);
  std::vector<float> got(want.size(), kUntouched);
  lf::gemm_q8_0_activations(W, xc.data(), n_tok, got.data(), r0, r1, k0, k1);
  CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
  std::vector<float> via_ops(want.size(), kUntouched);
  lf::matmul_rows(W, xc.data(), n_tok, via_ops.data(), r0, r1, k0, k1);
  CHECK(std::memcmp(via_ops.data(), want.data(), want.size() * sizeof(float)) == 0);
}

const lf::GgmlType kTypes[] = {lf::GgmlType::Q4_0, lf::GgmlType::Q8_0};

}  // namespace

TEST_CASE("kernels: Q4_0 and Q8_0 are the only types with a GEMM kernel", "[kernels]") {
  CHECK(lf::has_gemm_kernel(lf::GgmlType::Q4_0));
  CHECK(lf::has_gemm_kernel(lf::GgmlType::Q8_0));
  CHECK_FALSE(lf::has_gemm_kernel(lf::GgmlType::Q5_0));
  CHECK_FALSE(lf::has_gemm_kernel(lf::GgmlType::Q4_K));
  CHECK_FALSE(lf::has_gemm_kernel(lf::GgmlType::F32));
#if defined(__wasm_simd128__)
  CHECK(std::string(lf::gemm_kernel_isa()) == "wasm-simd128");
#elif defined(__SSE2__)
  CHECK(std::string(lf::gemm_kernel_isa()) == "sse2");
#else
  CHECK(std::string(lf::gemm_kernel_isa()) == "scalar");
#endif
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
      const Matrix W = make_weights(rng, type, 5376, 9, kind);
      for (const int n_tok : {1, 5, 13}) {
        const std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, true);
        check_exact(W.view, xc, n_tok, 0, 9, 0, 5376);
      }
    }
  }
}

TEST_CASE("kernels: row ranges and input-column ranges, as thread shards use them", "[kernels]") {
  std::mt19937 rng(11);
  for (const lf::GgmlType type : kTypes) {
    const Matrix W = make_weights(rng, type, 5376, 33, Weights::quantized);
    for (const int n_tok : {1, 3, 8, 13}) {
      const std::vector<uint8_t> xc = make_activations(rng, W.view, n_tok, false);
      check_exact(W.view, xc, n_tok, 1, 32, 0, 5376);       // unaligned strip start, row tail of 3
      check_exact(W.view, xc, n_tok, 5, 6, 0, 5376);        // a single row
      check_exact(W.view, xc, n_tok, 0, 33, 0, 32);          // the first block only
      check_exact(W.view, xc, n_tok, 0, 33, 224, 3200);      // a middle slice
      check_exact(W.view, xc, n_tok, 7, 30, 5344, 5376);     // the last block only
      check_exact(W.view, xc, n_tok, 0, 33, 2688, 2688);     // an empty slice sums to 0
    }
  }
}

TEST_CASE("kernels: many tokens split the columns into cache chunks without changing a bit", "[kernels]") {
  std::mt19937 rng(3);
  for (const lf::GgmlType type : kTypes) {
    const Matrix W = make_weights(rng, type, 5376, 5, Weights::quantized);
    const std::vector<uint8_t> xc = make_activations(rng, W.view, 100, true);
    check_exact(W.view, xc, 100, 0, 5, 0, 5376);
    check_exact(W.view, xc, 100, 2, 5, 96, 5280);
  }
}

TEST_CASE("kernels: every finite f16 weight scale converts as fp16_to_fp32 does", "[kernels]") {
  // One Q8_0 block per row, quants (1, 0, ...) and the row's scale h: the output is f32(h)·1.
  std::vector<lf::block_q8_0> rows;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7C00u) == 0x7C00u) continue;  // infinities and NaNs are no scales
    lf::block_q8_0 b{};
    b.d = static_cast<uint16_t>(h);
    b.qs[0] = 1;
    rows.push_back(b);
  }
  lf::WeightView W;
  W.type = lf::GgmlType::Q8_0;
  W.n_in = 32;
  W.n_out = static_cast<int64_t>(rows.size());
  W.data = reinterpret_cast<const uint8_t*>(rows.data());
  W.row_bytes = sizeof(lf::block_q8_0);
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // quantizes to q 127 with d = 1
  std::vector<uint8_t> xc;
  REQUIRE(lf::convert_activations(W, x.data(), 1, &xc).ok());
  check_exact(W, xc, 1, 0, W.n_out, 0, 32);
  std::vector<float> y(rows.size());
  lf::gemm_q8_0_activations(W, xc.data(), 1, y.data(), 0, W.n_out, 0, 32);
  CHECK(y[0x3C00] == 127.0f);  // h = 1.0
}

TEST_CASE("kernels: an infinite weight scale gives infinities in its row only", "[kernels]") {
  const uint16_t scales[5] = {0x3C00, 0x7C00, 0xFC00, 0x4000, 0x3800};  // 1, +inf, -inf, 2, 0.5
  std::vector<lf::block_q8_0> rows(5);
  for (int r = 0; r < 5; ++r) {
    rows[static_cast<size_t>(r)].d = scales[r];
    rows[static_cast<size_t>(r)].qs[0] = 1;
  }
  lf::WeightView W;
  W.type = lf::GgmlType::Q8_0;
  W.n_in = 32;
  W.n_out = 5;
  W.data = reinterpret_cast<const uint8_t*>(rows.data());
  W.row_bytes = sizeof(lf::block_q8_0);
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  std::vector<uint8_t> xc;
  REQUIRE(lf::convert_activations(W, x.data(), 1, &xc).ok());
  check_exact(W, xc, 1, 0, 5, 0, 32);
  std::vector<float> y(5);
  lf::gemm_q8_0_activations(W, xc.data(), 1, y.data(), 0, 5, 0, 32);
  CHECK(y[0] == 127.0f);
  CHECK(std::isinf(y[1]));
  CHECK(y[1] > 0);
  CHECK(std::isinf(y[2]));
  CHECK(y[2] < 0);
  CHECK(y[3] == 254.0f);
  CHECK(y[4] == 63.5f);
}

TEST_CASE("kernels: the reference outputs compared are not trivially zero", "[kernels]") {
  std::mt19937 rng(5);
  const Matrix W = make_weights(rng, lf::GgmlType::Q4_0, 96, 8, Weights::quantized);
  const std::vector<uint8_t> xc = make_activations(rng, W.view, 3, false);
  std::vector<float> y(24, 0.0f);
  lf::gemm_q8_0_activations(W.view, xc.data(), 3, y.data(), 0, 8, 0, 96);
  int nonzero = 0;
  for (const float v : y) nonzero += v != 0.0f;
  CHECK(nonzero == 24);
}
