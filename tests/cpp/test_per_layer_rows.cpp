// The first node of an E-model reading per_layer_token_embd by rows (per_layer_embd.h
// per_layer_inputs_from_rows) instead of holding the table: the same per-layer input bytes as
// the table, the table never located by the loader nor counted by node_needs, and every bad set
// of rows refused by name.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "support/engine_checks.h"
#include "support/fixture_e_model.h"
#include "model/forward.h"
#include "model/node_needs.h"
#include "model/per_layer_embd.h"

namespace {

using lf::Code;
using lf::Model;
using lf::Status;
using lf::test::FixtureModel;
using lf::test::WeightFormat;
using lf::test::same_bytes;

constexpr int kEmbd = lf::test::kFixtureEmbd;
constexpr int kLayers = lf::test::kELayers;
constexpr int kPl = lf::test::kEPerLayer;
constexpr int kVocab = lf::test::kFixtureVocab;
constexpr const char* kTable = "per_layer_token_embd.weight";

// Loads every layer; with rows, through a locator that records the names it is asked for.
Model load(const FixtureModel& f, bool rows, std::set<std::string>* located = nullptr) {
  lf::ModelLoadOptions options{{0, kLayers}, true, true};
  options.per_layer_rows_from_host = rows;
  const lf::TensorLocator inner = f.locator();
  const lf::TensorLocator locate = [&](const lf::GgufTensorInfo& t) {
    if (located) located->insert(t.name);
    return inner(t);
  };
  Model m;
  const Status s = lf::load_model(f.file, locate, options, &m);
  INFO(s.message());
  REQUIRE(s.ok());
  return m;
}

// What a host reads from the file: row id of the table is bytes [offset + id · row_bytes, + row_bytes).
struct Rows {
  std::vector<int32_t> ids;
  std::vector<uint8_t> bytes;
  uint64_t row_bytes = 0;
  lf::PerLayerRows view() const { return {ids.data(), static_cast<int>(ids.size()), bytes.data(), row_bytes}; }
};
Rows read_rows(const FixtureModel& f, const std::vector<int32_t>& ids) {
  const lf::GgufTensorInfo* t = f.file.tensor(kTable);
  Rows r{ids, {}, t->n_bytes / kVocab};
  for (int32_t id : ids) {
    const uint8_t* row = f.bytes.data() + f.file.data_offset + t->offset + static_cast<uint64_t>(id) * r.row_bytes;
    r.bytes.insert(r.bytes.end(), row, row + r.row_bytes);
  }
  return r;
}

// The embeddings alone: the per-layer inputs are what the tests compute, each their way.
std::vector<float> embed(const Model& m, const std::vector<int32_t>& tokens) {
  std::vector<float> x(tokens.size() * kEmbd);
  REQUIRE(lf::embed(m, tokens.data(), static_cast<int>(tokens.size()), x.data()).ok());
  return x;
}

Status from_rows(const Model& m, const std::vector<int32_t>& tokens, const std::vector<float>& x, const Rows& rows,
                 std::vector<float>* out) {
  out->assign(static_cast<size_t>(kLayers) * tokens.size() * kPl, 0.0f);
  return lf::per_layer_inputs_from_rows(m, tokens.data(), static_cast<int>(tokens.size()), x.data(), rows.view(),
                                        out->data());
}

// Repeated tokens, the first and last ids of the vocabulary.
const std::vector<int32_t> kTokens = {5, 17, 5, kVocab - 1, 0, 17, 42, 29, 5, 3, 36};

}  // namespace

TEST_CASE("per-layer inputs from rows are the table's bytes, in any row order, with extra rows", "[e_model][per_layer_rows]") {
  for (WeightFormat format : {WeightFormat::f32, WeightFormat::mixed}) {
    INFO((format == WeightFormat::f32 ? "F32 table" : "Q8_0 table"));
    const FixtureModel f = lf::test::e_fixture(format);
    const Model table = load(f, false);
    std::set<std::string> located;
    const Model rows = load(f, true, &located);
    CHECK(located.count(kTable) == 0);
    CHECK_FALSE(rows.per_layer_token_embd.present());

    const std::vector<float> x = embed(table, kTokens);
    REQUIRE(embed(rows, kTokens) == x);
    std::vector<float> expected(static_cast<size_t>(kLayers) * kTokens.size() * kPl);
    REQUIRE(lf::per_layer_inputs(table, kTokens.data(), static_cast<int>(kTokens.size()), x.data(), expected.data()).ok());

    // Distinct ids, reversed and with rows of tokens the call does not have.
    const std::vector<int32_t> ids = {36, 3, 29, 42, 0, kVocab - 1, 17, 5, 7, 8};
    std::vector<float> got;
    const Status s = from_rows(rows, kTokens, x, read_rows(f, ids), &got);
    INFO(s.message());
    REQUIRE(s.ok());
    CHECK(same_bytes(got, expected));

    // And the forward on those inputs is the table node's, byte for byte.
    const int n = static_cast<int>(kTokens.size());
    auto forward = [&](const Model& m, const std::vector<float>& per_layer) {
      lf::Session s = lf::test::session(m);
      s.per_layer_in = per_layer;
      std::vector<float> out(x.size());
      REQUIRE(lf::forward(m, s, 0, x.data(), n, out.data(), false).ok());
      return out;
    };
    CHECK(same_bytes(forward(rows, got), forward(table, expected)));
  }
}

TEST_CASE("per-layer rows: wrong sizes, ids, missing or repeated rows and NaN are refused by name", "[e_model][per_layer_rows]") {
  const FixtureModel f = lf::test::e_fixture(WeightFormat::mixed);
  const Model rows = load(f, true);
  const Model table = load(f, false);
  const std::vector<int32_t> tokens = {5, 17, 5};
  const std::vector<float> x = embed(rows, tokens);
  std::vector<float> out;
  auto refused = [&](const Model& m, const Rows& r, const std::string& needle, const std::vector<int32_t>& t) {
    const Status s = from_rows(m, t, x, r, &out);
    INFO(s.message());
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == Code::invalid_argument);
    CHECK(s.message().find(needle) != std::string::npos);
  };
  const Rows good = read_rows(f, {5, 17});
  REQUIRE(from_rows(rows, tokens, x, good, &out).ok());

  // Q8_0: 5 layers · 32 values = 5 blocks of 34 bytes.
  REQUIRE(good.row_bytes == 170);
  Rows short_rows = good;
  short_rows.row_bytes = 136;
  refused(rows, short_rows, "rows of 136 bytes were given, but its rows are 170 bytes (160 values of Q8_0)", tokens);
  refused(rows, read_rows(f, {5}), "no per_layer_token_embd row was given for token id 17 at position 1", tokens);
  Rows none = good;
  none.ids.clear();
  none.bytes.clear();
  refused(rows, none, "no per_layer_token_embd row was given for token id 5 at position 0", tokens);
  Rows twice = read_rows(f, {5, 17, 5});
  refused(rows, twice, "the per_layer_token_embd row of token id 5 was given twice (rows 0 and 2)", tokens);
  Rows outside = good;
  outside.ids[1] = kVocab;
  refused(rows, outside, "per_layer_token_embd row 1 is of token id " + std::to_string(kVocab) + ", outside [0, " +
                             std::to_string(kVocab) + ")", tokens);
  refused(rows, good, "token id -1 at position 1 is outside [0, " + std::to_string(kVocab) + ")", {5, -1});
  refused(rows, Rows{}, "rows of 0 bytes were given", tokens);
  {
    const lf::PerLayerRows v{good.ids.data(), 2, nullptr, good.row_bytes};
    const Status s = lf::per_layer_inputs_from_rows(rows, tokens.data(), 3, x.data(), v, out.data());
    CHECK(s.message().find("need n_rows >= 0, their ids and their bytes") != std::string::npos);
  }
  {
    // A Q8_0 block's scale (the f16 at its start) made inf: refused as a table of them would be.
    Rows inf = good;
    inf.bytes[170] = 0x00;
    inf.bytes[171] = 0x7c;
    const Status s = from_rows(rows, tokens, x, inf, &out);
    INFO(s.message());
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().find("per_layer_token_embd.weight (rows given)") != std::string::npos);
  }
  // Each node takes only its own way of reading the table.
  const Status t = lf::per_layer_inputs(rows, tokens.data(), 3, x.data(), out.data());
  CHECK(t.code() == Code::failed_precondition);
  CHECK(t.message().find("reads per_layer_token_embd by rows, it does not hold the table") != std::string::npos);
  CHECK(from_rows(table, tokens, x, good, &out).ok());
}

TEST_CASE("node_needs of a node reading the table by rows: not among its tensors, one row's bytes reported", "[e_model][per_layer_rows]") {
  for (WeightFormat format : {WeightFormat::f32, WeightFormat::mixed}) {
    const FixtureModel f = lf::test::e_fixture(format);
    const lf::GgufTensorInfo* t = f.file.tensor(kTable);
    // F32: 160 values · 4 bytes; Q8_0: 5 blocks of 34 bytes.
    const uint64_t row_bytes = format == WeightFormat::f32 ? 640 : 170;
    REQUIRE(t->n_bytes == row_bytes * kVocab);
    lf::NodeShape shape{{0, 1}, true, false, 32, 8};
    lf::NodeNeeds whole, by_rows, later;
    REQUIRE(lf::node_needs(f.file, shape, &whole).ok());
    shape.per_layer_rows = true;
    REQUIRE(lf::node_needs(f.file, shape, &by_rows).ok());
    CHECK(whole.tensor_bytes - by_rows.tensor_bytes == t->n_bytes);
    CHECK(whole.per_layer_row_bytes == row_bytes);
    CHECK(by_rows.per_layer_row_bytes == row_bytes);
    CHECK(by_rows.scratch_bytes == whole.scratch_bytes + lf::per_layer_rows_lookup_bytes(8));
    std::vector<std::string> without = whole.tensors;
    without.erase(std::find(without.begin(), without.end(), kTable));
    CHECK(by_rows.tensors == without);
    // The per-layer projection stays: only the table goes.
    CHECK(std::find(by_rows.tensors.begin(), by_rows.tensors.end(), "per_layer_model_proj.weight") != by_rows.tensors.end());
    REQUIRE(lf::node_needs(f.file, lf::NodeShape{{1, kLayers}, false, true, 32, 8, true}, &later).ok());
    CHECK(later.per_layer_row_bytes == 0);
  }
}
