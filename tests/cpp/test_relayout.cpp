// The unit-major layout of attn_output and ffn_down (shard_plan.h, docs/threads.md): a byte
// permutation that un-permutes to the file's bytes, whose unit slices hold the same bytes as the
// strided column slices, and that a Model loaded with relayout_in_place applies in place.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "fixture_model.h"
#include "model/model.h"
#include "ops/ops.h"
#include "quant/quant.h"
#include "model/shard_plan.h"

namespace {

using lf::ColumnUnits;
using lf::GgmlType;
using lf::WeightView;

// A [n_out, n_in] weight of `type` whose every block is tagged with its row and block index, so
// any misplaced block shows. Blocks are block_bytes long; byte 0 = row, byte 1 = block.
struct TaggedWeight {
  WeightView view;
  std::vector<uint8_t> bytes;
  int block_elems = 0, block_bytes = 0;
};

TaggedWeight tagged(GgmlType type, int block_elems, int block_bytes, int n_out, int n_in) {
  TaggedWeight w;
  w.block_elems = block_elems;
  w.block_bytes = block_bytes;
  const int blocks = n_in / block_elems;
  w.bytes.assign(static_cast<size_t>(n_out) * blocks * block_bytes, 0xEE);
  for (int r = 0; r < n_out; ++r) {
    for (int b = 0; b < blocks; ++b) {
      uint8_t* block = w.bytes.data() + (static_cast<size_t>(r) * blocks + b) * block_bytes;
      block[0] = static_cast<uint8_t>(r);
      block[1] = static_cast<uint8_t>(b);
    }
  }
  w.view.type = type;
  w.view.n_in = n_in;
  w.view.n_out = n_out;
  w.view.row_bytes = static_cast<uint64_t>(blocks) * block_bytes;
  w.view.data = w.bytes.data();
  return w;
}

ColumnUnits units_of(int width, int n_in) {
  ColumnUnits u;
  u.width = width;
  u.n_in = n_in;
  u.n_units = (n_in + width - 1) / width;
  return u;
}

void check_permutation(GgmlType type, int block_elems, int block_bytes, int n_out, int n_in, int unit_width) {
  INFO("type " << static_cast<int>(type) << ", " << n_out << " x " << n_in << ", units of " << unit_width);
  const TaggedWeight w = tagged(type, block_elems, block_bytes, n_out, n_in);
  const ColumnUnits units = units_of(unit_width, n_in);
  std::vector<uint8_t> unit_major(w.bytes.size(), 0), back(w.bytes.size(), 0);
  lf::to_unit_major(w.view, units, w.bytes.data(), unit_major.data());

  // Unit by unit, row by row, that unit's blocks in column order.
  size_t at = 0;
  for (int u = 0; u < units.n_units; ++u) {
    const int b0 = u * unit_width / block_elems;
    const int b1 = std::min(n_in, (u + 1) * unit_width) / block_elems;
    for (int r = 0; r < n_out; ++r) {
      for (int b = b0; b < b1; ++b, at += static_cast<size_t>(block_bytes)) {
        REQUIRE(unit_major[at] == r);
        REQUIRE(unit_major[at + 1] == b);
      }
    }
  }
  REQUIRE(at == unit_major.size());

  lf::from_unit_major(w.view, units, unit_major.data(), back.data());
  REQUIRE(back == w.bytes);

  // A unit's view of the unit-major bytes and the strided column slice of the file's bytes show
  // the same bytes, row for row.
  WeightView relaid = w.view;
  relaid.data = unit_major.data();
  relaid.layout = lf::WeightLayout::unit_major;
  relaid.unit_cols = unit_width;
  for (int u = 0; u < units.n_units; ++u) {
    const WeightView a = w.view.columns(units.begin(u), units.end(u));
    const WeightView b = relaid.columns(units.begin(u), units.end(u));
    REQUIRE(a.n_in == b.n_in);
    const size_t n = static_cast<size_t>((units.end(u) - units.begin(u)) / block_elems * block_bytes);
    for (int r = 0; r < n_out; ++r) REQUIRE(std::memcmp(a.row(r), b.row(r), n) == 0);
  }
}

TEST_CASE("unit-major layout is a permutation of the file's blocks that un-permutes exactly", "[threads]") {
  check_permutation(GgmlType::Q4_0, 32, 18, 5, 224, 64);    // last unit narrower (32 of 64)
  check_permutation(GgmlType::Q8_0, 32, 34, 3, 96, 32);     // one block per unit
  check_permutation(GgmlType::Q4_K, 256, 144, 4, 1024, 512);
  check_permutation(GgmlType::F32, 1, 4, 2, 12, 5);         // float types: blocks of one element
  check_permutation(GgmlType::Q4_0, 32, 18, 4, 128, 128);   // one unit: the same bytes
}

// W [n_out, n_in] of `type` with valid scales: real quantization for Q4_0 / Q8_0, random bits
// with small f16 scales for the K-quants, random halves for F16.
std::vector<uint8_t> random_weight(GgmlType type, int n_out, int n_in, uint64_t row_bytes) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes) * n_out);
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int r = 0; r < n_out; ++r) {
    uint8_t* dst = bytes.data() + static_cast<size_t>(row_bytes) * r;
    for (float& v : row) v = value(rng);
    for (uint64_t i = 0; i < row_bytes; ++i) dst[i] = static_cast<uint8_t>(rng());
    switch (type) {
      case GgmlType::Q4_0: lf::quantize_row_q4_0_ref(row.data(), reinterpret_cast<lf::block_q4_0*>(dst), n_in); break;
      case GgmlType::Q8_0: lf::quantize_row_q8_0_ref(row.data(), reinterpret_cast<lf::block_q8_0*>(dst), n_in); break;
      case GgmlType::Q4_K:
        for (int b = 0; b < n_in / lf::QK_K; ++b) {
          auto* block = reinterpret_cast<lf::block_q4_K*>(dst) + b;
          block->d = lf::fp32_to_fp16(0.01f);
          block->dmin = lf::fp32_to_fp16(0.002f);
        }
        break;
      case GgmlType::Q6_K:
        for (int b = 0; b < n_in / lf::QK_K; ++b) reinterpret_cast<lf::block_q6_K*>(dst)[b].d = lf::fp32_to_fp16(0.01f);
        break;
      default:  // F16
        for (int i = 0; i < n_in; ++i) reinterpret_cast<uint16_t*>(dst)[i] = lf::fp32_to_fp16(row[static_cast<size_t>(i)]);
        break;
    }
  }
  return bytes;
}

// Each unit's partial product read from the unit-major bytes (matmul_rows_strided on
// WeightView::columns) equals vec_dot_ref over that unit's columns of the file's rows, bit for bit.
void check_unit_products(GgmlType type, int block_elems, int block_bytes, int unit_blocks) {
  INFO("type " << static_cast<int>(type));
  const int n_out = 9, n_units = 3, n_tok = 5, n_in = n_units * unit_blocks * block_elems;
  WeightView W;
  W.type = type;
  W.n_in = n_in;
  W.n_out = n_out;
  W.row_bytes = static_cast<uint64_t>(n_in / block_elems) * block_bytes;
  const std::vector<uint8_t> file = random_weight(type, n_out, n_in, W.row_bytes);
  W.data = file.data();
  const ColumnUnits units = units_of(unit_blocks * block_elems, n_in);
  std::vector<uint8_t> unit_major(file.size());
  lf::to_unit_major(W, units, file.data(), unit_major.data());
  WeightView relaid = W;
  relaid.data = unit_major.data();
  relaid.layout = lf::WeightLayout::unit_major;
  relaid.unit_cols = units.width;

  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(n_tok) * n_in);
  for (float& v : x) v = value(rng);
  std::vector<uint8_t> xc;
  REQUIRE(lf::convert_activations(W, x.data(), n_tok, &xc).ok());
  const uint64_t x_row = lf::activation_row_bytes(type, n_in);
  for (int u = 0; u < n_units; ++u) {
    const int64_t k0 = units.begin(u), k1 = units.end(u);
    std::vector<float> got(static_cast<size_t>(n_tok) * n_out, -1.0f);
    lf::matmul_rows_strided(relaid.columns(k0, k1), xc.data() + lf::activation_row_bytes(type, k0), x_row, n_tok,
                            got.data(), 0, n_out);
    for (int t = 0; t < n_tok; ++t) {
      for (int r = 0; r < n_out; ++r) {
        const float want = lf::vec_dot_ref(type, file.data() + W.row_bytes * r + W.column_bytes(k0),
                                           xc.data() + x_row * t + lf::activation_row_bytes(type, k0), k1 - k0);
        const float g = got[static_cast<size_t>(t) * n_out + r];
        REQUIRE(std::memcmp(&g, &want, sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("a unit's partial product from unit-major bytes equals the reference over its columns", "[threads]") {
  check_unit_products(GgmlType::Q4_0, 32, 18, 21);  // an FFN unit of the 31b shape is 21 blocks
  check_unit_products(GgmlType::Q8_0, 32, 34, 3);
  check_unit_products(GgmlType::Q4_K, 256, 144, 2);
  check_unit_products(GgmlType::Q6_K, 256, 210, 1);
  check_unit_products(GgmlType::F16, 1, 2, 40);    // no GEMM kernel: the vec_dot_ref loop
}

TEST_CASE("relayout_in_place rewrites attn_output and ffn_down unit-major and nothing else", "[threads]") {
  lf::test::FixtureOptions o;
  o.arch = lf::Arch::gemma4;
  o.format = lf::test::WeightFormat::mixed;
  lf::test::FixtureModel f;
  REQUIRE(lf::test::build_fixture(o, &f).ok());
  const std::vector<uint8_t> file_bytes = f.bytes;

  lf::Model m;
  REQUIRE(f.load_all_relaid(&m).ok());

  // Put every unit-major tensor back into the file's layout: the whole file must come back.
  std::vector<uint8_t> restored = f.bytes;
  int relaid = 0;
  for (int il = 0; il < lf::test::kFixtureLayers; ++il) {
    for (auto [W, units] : {std::pair{&m.layer(il).attn_output, &m.shard(il).attn},
                            std::pair{&m.layer(il).ffn_down, &m.shard(il).ffn}}) {
      if (units->n_units < 2) {
        REQUIRE(W->layout == lf::WeightLayout::rows);
        continue;
      }
      REQUIRE(W->layout == lf::WeightLayout::unit_major);
      REQUIRE(W->unit_cols == units->width);
      ++relaid;
      WeightView file_view = *W;
      file_view.layout = lf::WeightLayout::rows;
      const size_t at = static_cast<size_t>(W->data - f.bytes.data());
      lf::from_unit_major(file_view, *units, W->data, restored.data() + at);
    }
  }
  REQUIRE(relaid >= lf::test::kFixtureLayers);  // every layer's ffn_down at least
  REQUIRE(f.bytes != file_bytes);
  REQUIRE(restored == file_bytes);
}

}  // namespace
