// The row-strip layout (src/layout/row_strips.h): a permutation of each strip's bytes that
// round-trips, puts every scale and quant group where the header says, keeps the read probe's
// checksum, and is what the loader gives exactly the
// weights this build's kernel reads in strips.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "support/engine_setup.h"
#include "support/fixture_moe.h"
#include "model/forward.h"
#include "model/session.h"
#include "gguf/gguf_reader.h"
#include "kernels/gemm.h"
#include "model/model.h"
#include "quant/quant.h"
#include "kernels/weight_checksum.h"
#include "layout/row_strips.h"

namespace {

using lf::GgmlType;
using lf::WeightLayout;
using lf::WeightView;

// A Q4_0 weight [n_out, n_in] of random bytes, in the file's layout
struct Weight {
  std::vector<uint8_t> bytes;
  WeightView view;
};

Weight random_q4_0(std::mt19937& rng, int64_t n_out, int64_t n_in) {
  Weight w;
  w.view.type = GgmlType::Q4_0;
  w.view.n_in = n_in;
  w.view.n_out = n_out;
  w.view.row_bytes = w.view.column_bytes(n_in);
  w.bytes.resize(static_cast<size_t>(n_out) * w.view.row_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : w.bytes) b = static_cast<uint8_t>(byte(rng));
  for (size_t b = 1; b < w.bytes.size(); b += 18) w.bytes[b] &= 0xBF;  // finite scales only
  w.view.data = w.bytes.data();
  return w;
}

// Byte of row r, block b, offset o (0-1 scale, 2-17 quants) in the file's layout of a region
// whose rows are row_bytes long
size_t file_at(uint64_t row_bytes, int64_t r, int64_t b, int o) {
  return static_cast<size_t>(static_cast<uint64_t>(r) * row_bytes + static_cast<uint64_t>(b) * 18 + static_cast<uint64_t>(o));
}

}  // namespace

TEST_CASE("row_strips: each block holds the 4 scales, then quant group k of row i at 8 + 16k + 4i",
          "[row_strips]") {
  std::mt19937 rng(41);
  const Weight w = random_q4_0(rng, 8, 96);
  std::vector<uint8_t> strips(w.bytes.size());
  lf::to_row_strips(w.view, w.bytes.data(), strips.data());
  const uint64_t row_bytes = w.view.row_bytes;
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t b = 0; b < 3; ++b) {
      const size_t block = static_cast<size_t>((r / 4) * 4 * row_bytes + static_cast<uint64_t>(b) * 72);
      const int64_t i = r % 4;
      INFO("row " << r << " block " << b);
      CHECK(std::memcmp(&strips[block + 2 * i], &w.bytes[file_at(row_bytes, r, b, 0)], 2) == 0);
      for (int k = 0; k < 4; ++k) {
        CHECK(std::memcmp(&strips[block + 8 + 16 * k + 4 * i], &w.bytes[file_at(row_bytes, r, b, 2 + 4 * k)], 4) == 0);
      }
    }
  }
}

TEST_CASE("row_strips: a permutation that round-trips", "[row_strips]") {
  std::mt19937 rng(43);
  for (const int64_t n_out : {4, 12, 36}) {
    for (const int64_t n_in : {32, 160, 1056}) {
      INFO("n_out " << n_out << " n_in " << n_in);
      Weight w = random_q4_0(rng, n_out, n_in);
      REQUIRE(lf::can_row_strips(w.view));
      std::vector<uint8_t> strips(w.bytes.size()), back(w.bytes.size());
      lf::to_row_strips(w.view, w.bytes.data(), strips.data());
      lf::from_row_strips(w.view, strips.data(), back.data());
      CHECK(back == w.bytes);
      std::vector<uint8_t> sorted_in = w.bytes, sorted_out = strips;
      std::sort(sorted_in.begin(), sorted_in.end());
      std::sort(sorted_out.begin(), sorted_out.end());
      CHECK(sorted_in == sorted_out);
      CHECK(strips != w.bytes);
      // whole halfwords move: the read probe's checksum is the file's
      CHECK(lf::weight_checksum(strips.data(), strips.size()) == lf::weight_checksum(w.bytes.data(), w.bytes.size()));
    }
  }
}

TEST_CASE("row_strips: a row read out of the strips (a tied head's embedding lookup) is the file row's values",
          "[row_strips]") {
  std::mt19937 rng(47);
  for (const int64_t n_out : {4, 12}) {
    for (const int64_t n_in : {32, 1056}) {
      Weight w = random_q4_0(rng, n_out, n_in);
      std::vector<uint8_t> strips(w.bytes.size());
      lf::to_row_strips(w.view, w.bytes.data(), strips.data());
      WeightView in_strips = w.view;
      in_strips.data = strips.data();
      in_strips.layout = WeightLayout::row_strips;
      for (int64_t r = 0; r < n_out; ++r) {
        INFO("n_out " << n_out << " n_in " << n_in << " row " << r);
        std::vector<float> want(static_cast<size_t>(n_in)), from_rows(want.size()), got(want.size());
        REQUIRE(lf::dequantize_row(GgmlType::Q4_0, w.view.row(r), want.data(), n_in).ok());
        REQUIRE(lf::dequantize_weight_row(w.view, r, from_rows.data()).ok());
        REQUIRE(lf::dequantize_weight_row(in_strips, r, got.data()).ok());
        CHECK(std::memcmp(from_rows.data(), want.data(), want.size() * sizeof(float)) == 0);
        CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("row_strips: which weights the layout can hold", "[row_strips]") {
  std::mt19937 rng(53);
  const Weight w = random_q4_0(rng, 8, 64);
  CHECK(lf::can_row_strips(w.view));
  WeightView v = w.view;
  v.n_out = 6;  // not a multiple of 4
  CHECK_FALSE(lf::can_row_strips(v));
  v = w.view;
  v.type = GgmlType::Q8_0;  // its kernel reads rows
  v.row_bytes = v.column_bytes(64);
  CHECK_FALSE(lf::can_row_strips(v));
  v = w.view;
  v.layout = WeightLayout::feature_major;
  CHECK_FALSE(lf::can_row_strips(v));
  v = w.view;
  v.layout = WeightLayout::row_strips;  // already
  CHECK_FALSE(lf::can_row_strips(v));
  for (const uint16_t special : {uint16_t{0x7C00}, uint16_t{0xFC00}, uint16_t{0x7E01}}) {  // +inf, -inf, NaN
    Weight x = w;
    x.view.data = x.bytes.data();
    std::memcpy(&x.bytes[18 * 13], &special, sizeof special);  // one block's scale, row 6
    CHECK_FALSE(lf::can_row_strips(x.view));
  }
  CHECK_FALSE(lf::can_row_strips(w.view.columns(32, 64)));  // a column slice of wider rows
}

TEST_CASE("row_strips: columns() starts 4 blocks per block further in, strips 4 rows apart", "[row_strips]") {
  std::mt19937 rng(59);
  Weight w = random_q4_0(rng, 8, 96);
  w.view.layout = WeightLayout::row_strips;
  const WeightView v = w.view.columns(64, 96);
  CHECK(v.strip(0) == w.bytes.data() + 2 * 72);
  CHECK(v.strip(1) == w.bytes.data() + 4 * w.view.row_bytes + 2 * 72);
}

TEST_CASE("row_strips: the loader lays out a layer's Q4_0 matmul weights in strips where the kernel reads them so",
          "[row_strips]") {
  // Q4_0 ffn_gate and ffn_up
  lf::test::FixtureModel f = lf::test::fixture(lf::Arch::gemma4, lf::test::WeightFormat::mixed);
  const std::vector<uint8_t> file_bytes = f.bytes;
  lf::Model m;
  REQUIRE(f.load_all_relaid(&m).ok());
  const bool strips = lf::gemm_uses_row_strips(GgmlType::Q4_0);
  int q4_0 = 0;
  for (lf::LayerWeights& w : m.layers) {
    for (const WeightView* W : w.matmuls()) {
      if (!W->present()) continue;
      INFO("a weight of type " << static_cast<int>(W->type) << " [" << W->n_out << ", " << W->n_in << "]");
      CHECK(W->in_row_strips() == (strips && W->type == GgmlType::Q4_0));
      if (W->type != GgmlType::Q4_0) continue;
      ++q4_0;
      // its bytes are the file's, in strips or not
      const size_t at = static_cast<size_t>(W->data - f.bytes.data());
      const size_t n = static_cast<size_t>(W->n_out) * W->row_bytes;
      std::vector<uint8_t> rows(W->data, W->data + n);
      if (W->in_row_strips()) {
        WeightView file_view = *W;
        file_view.layout = WeightLayout::rows;
        lf::from_row_strips(file_view, W->data, rows.data());
      }
      CHECK(std::equal(rows.begin(), rows.end(), file_bytes.begin() + static_cast<std::ptrdiff_t>(at)));
    }
  }
  CHECK(q4_0 == 2 * lf::test::kFixtureLayers);
}

TEST_CASE("row_strips: a MoE layer's Q4_0 experts go into strips one matrix each, and the forward's bytes stay",
          "[row_strips][moe]") {
  for (const bool fused : {true, false}) {
    lf::test::MoeFixture moe;
    moe.n_expert = 6;
    moe.n_used = 3;
    moe.fused = fused;
    moe.exps_type = GgmlType::Q4_0;
    lf::test::FixtureOptions o;
    o.format = lf::test::WeightFormat::mixed;
    lf::test::add_moe(moe, &o);
    lf::test::FixtureModel f = lf::test::fixture(o);
    const lf::test::FixtureModel relaid_bytes = f;  // a private copy the relayout rewrites
    lf::Model plain, relaid;
    REQUIRE(f.load_all(&plain).ok());
    REQUIRE(relaid_bytes.load_all_relaid(&relaid).ok());
    const bool strips = lf::gemm_uses_row_strips(GgmlType::Q4_0);
    for (const lf::LayerWeights& w : relaid.layers) {
      for (const WeightView* W : {&w.ffn_gate_up_exps, &w.ffn_gate_exps, &w.ffn_up_exps, &w.ffn_down_exps}) {
        if (W->present()) CHECK(W->in_row_strips() == strips);
      }
    }
    auto hidden = [](const lf::Model& m) {
      const int n = 7;
      const std::vector<float> x = lf::test::embed_tokens(m, {3, 9, 1, 30, 7, 12, 5}).x;
      lf::Session s = lf::test::session(m, lf::test::kModelContext);
      std::vector<float> out = lf::test::forward_rows(m, s, x, 0, n);
      // and a decode step, the one-token kernel
      std::vector<float> step(lf::test::kFixtureEmbd);
      REQUIRE(lf::forward(m, s, n, x.data(), 1, step.data(), false).ok());
      out.insert(out.end(), step.begin(), step.end());
      return out;
    };
    const std::vector<float> a = hidden(plain), b = hidden(relaid);
    INFO("fused " << fused);
    REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }
}
