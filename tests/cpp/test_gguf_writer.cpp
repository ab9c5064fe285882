// GGUF writer: byte-exact against a worked example (docs/gguf.md, "Container"), round trips
// through the reader for every value type, and tensor data landing at hand-computed offsets (docs/gguf.md, "Alignment and data").
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"

namespace {

using lf::Code;
using lf::GgmlType;
using lf::GgufFile;
using lf::GgufType;
using lf::GgufValue;
using lf::GgufWriter;

GgufFile read_back(const std::vector<uint8_t>& bytes) {
  GgufFile g;
  const lf::Status s = lf::gguf_parse(bytes.data(), bytes.size(), bytes.size(), &g);
  INFO(s.message());
  REQUIRE(s.ok());
  return g;
}

GgufValue scalar_u(GgufType t, uint64_t v) {
  GgufValue g;
  g.type = t;
  g.u64 = v;
  return g;
}

GgufValue scalar_i(GgufType t, int64_t v) {
  GgufValue g;
  g.type = t;
  g.i64 = v;
  return g;
}

GgufValue scalar_f(GgufType t, double v) {
  GgufValue g;
  g.type = t;
  g.f64 = v;
  return g;
}

GgufValue int_array(GgufType elem, std::vector<int64_t> v) {
  GgufValue g;
  g.type = GgufType::ARRAY;
  g.elem_type = elem;
  g.count = v.size();
  g.ints = std::move(v);
  return g;
}

// Byte i of tensor number `tag` (distinct per tensor so a misplaced blob is caught).
uint8_t pattern(int tag, uint64_t i) { return static_cast<uint8_t>(tag * 37 + i * 11 + 1); }

GgufWriter::FillFn fill_pattern(int tag) {
  return [tag](uint8_t* dst, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = pattern(tag, i);
  };
}

}  // namespace

TEST_CASE("gguf writer: matches the worked byte example of spec 1.8", "[gguf]") {
  GgufWriter w;
  w.set_u32("gemma4.block_count", 60);
  const std::vector<uint8_t> got = w.write_buffer();
  std::vector<uint8_t> want = {'G', 'G', 'U', 'F', 3, 0, 0, 0,  // magic, version
                               0, 0, 0, 0, 0, 0, 0, 0,          // n_tensors
                               1, 0, 0, 0, 0, 0, 0, 0,          // n_kv
                               0x12, 0, 0, 0, 0, 0, 0, 0};      // key length 18
  const std::string key = "gemma4.block_count";
  want.insert(want.end(), key.begin(), key.end());
  want.insert(want.end(), {4, 0, 0, 0, 0x3C, 0, 0, 0});  // UINT32, 60
  CHECK(got == want);  // no tensors: no padding before the (empty) blob
}

TEST_CASE("gguf writer: every scalar type round trips", "[gguf]") {
  GgufWriter w;
  w.set_value("u8", scalar_u(GgufType::UINT8, 255));
  w.set_value("i8", scalar_i(GgufType::INT8, -128));
  w.set_value("u16", scalar_u(GgufType::UINT16, 65535));
  w.set_value("i16", scalar_i(GgufType::INT16, -32768));
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set_f32("f32", 1e-6f);
  w.set_bool("bool", true);
  w.set_string("str", "gemma4");
  w.set_value("u64", scalar_u(GgufType::UINT64, UINT64_MAX));
  w.set_value("i64", scalar_i(GgufType::INT64, INT64_MIN));
  w.set_value("f64", scalar_f(GgufType::FLOAT64, 0.1));
  w.set_string("empty", "");
  const GgufFile g = read_back(w.write_buffer());
  REQUIRE(g.kv.size() == 13);
  const char* order[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "u64", "i64", "f64", "empty"};
  for (size_t i = 0; i < 13; ++i) CHECK(g.kv[i].first == order[i]);
  CHECK(g.find("u8")->type == GgufType::UINT8);
  CHECK(g.find("u8")->u64 == 255);
  CHECK(g.find("i8")->type == GgufType::INT8);
  CHECK(g.find("i8")->i64 == -128);
  CHECK(g.find("u16")->u64 == 65535);
  CHECK(g.find("i16")->i64 == -32768);
  CHECK(g.find("u32")->type == GgufType::UINT32);
  CHECK(g.find("u32")->u64 == 4000000000u);
  CHECK(g.find("i32")->i64 == -2000000000);
  CHECK(g.find("f32")->type == GgufType::FLOAT32);
  CHECK(static_cast<float>(g.find("f32")->f64) == 1e-6f);
  CHECK(g.find("bool")->type == GgufType::BOOL);
  CHECK(g.find("bool")->u64 == 1);
  CHECK(g.find("str")->str == "gemma4");
  CHECK(g.find("u64")->u64 == UINT64_MAX);
  CHECK(g.find("i64")->i64 == INT64_MIN);
  CHECK(g.find("f64")->type == GgufType::FLOAT64);
  CHECK(g.find("f64")->f64 == 0.1);
  CHECK(g.find("empty")->str.empty());
}

TEST_CASE("gguf writer: arrays round trip, nested ones included", "[gguf]") {
  GgufWriter w;
  w.set_array_string("tokens", {"<pad>", "", "▁the", std::string("a\0b", 3)});
  w.set_array_i32("head_count_kv", {16, 16, -1, 2147483647});
  w.set_array_bool("swa", {true, true, false, true, false});
  w.set_array_f32("scores", {0.5f, -1.25f, 3e38f});
  w.set_value("u64s", int_array(GgufType::UINT64, {-1, 5}));  // -1 is the bit pattern of 2^64-1
  w.set_value("i16s", int_array(GgufType::INT16, {-32768, 32767}));
  GgufValue nested;
  nested.type = GgufType::ARRAY;
  nested.elem_type = GgufType::ARRAY;
  nested.arrays.push_back(int_array(GgufType::UINT8, {1, 2, 3}));
  GgufValue strings;
  strings.type = GgufType::ARRAY;
  strings.elem_type = GgufType::STRING;
  strings.strings = {"x"};
  nested.arrays.push_back(strings);
  GgufValue inner_nested;
  inner_nested.type = GgufType::ARRAY;
  inner_nested.elem_type = GgufType::ARRAY;
  inner_nested.arrays.push_back(int_array(GgufType::INT8, {-7}));
  nested.arrays.push_back(inner_nested);
  nested.count = nested.arrays.size();
  w.set_value("nested", nested);
  w.set_array_string("none", {});

  const GgufFile g = read_back(w.write_buffer());
  const GgufValue* tokens = g.find("tokens");
  REQUIRE(tokens != nullptr);
  CHECK(tokens->type == GgufType::ARRAY);
  CHECK(tokens->elem_type == GgufType::STRING);
  CHECK(tokens->count == 4);
  CHECK(tokens->strings == std::vector<std::string>{"<pad>", "", "▁the", std::string("a\0b", 3)});
  CHECK(g.find("head_count_kv")->elem_type == GgufType::INT32);
  CHECK(g.find("head_count_kv")->ints == std::vector<int64_t>{16, 16, -1, 2147483647});
  CHECK(g.find("swa")->elem_type == GgufType::BOOL);
  CHECK(g.find("swa")->ints == std::vector<int64_t>{1, 1, 0, 1, 0});
  CHECK(g.find("scores")->elem_type == GgufType::FLOAT32);
  CHECK(g.find("scores")->floats == std::vector<double>{0.5, -1.25, static_cast<double>(3e38f)});
  CHECK(static_cast<uint64_t>(g.find("u64s")->ints[0]) == UINT64_MAX);
  CHECK(g.find("i16s")->ints == std::vector<int64_t>{-32768, 32767});
  const GgufValue* n = g.find("nested");
  REQUIRE(n != nullptr);
  CHECK(n->elem_type == GgufType::ARRAY);
  REQUIRE(n->arrays.size() == 3);
  CHECK(n->arrays[0].elem_type == GgufType::UINT8);
  CHECK(n->arrays[0].ints == std::vector<int64_t>{1, 2, 3});
  CHECK(n->arrays[1].strings == std::vector<std::string>{"x"});
  REQUIRE(n->arrays[2].arrays.size() == 1);
  CHECK(n->arrays[2].arrays[0].elem_type == GgufType::INT8);
  CHECK(n->arrays[2].arrays[0].ints == std::vector<int64_t>{-7});
  CHECK(g.find("none")->count == 0);
}

TEST_CASE("gguf writer: setting an existing key replaces it in place", "[gguf]") {
  GgufWriter w;
  w.set_u32("a", 1);
  w.set_string("b", "x");
  w.set_string("a", "replaced");
  const GgufFile g = read_back(w.write_buffer());
  REQUIRE(g.kv.size() == 2);
  CHECK(g.kv[0].first == "a");
  CHECK(g.kv[0].second.str == "replaced");
  CHECK(g.kv[1].first == "b");
}

TEST_CASE("gguf writer: tensors land back to back at the alignment", "[gguf]") {
  struct Case {
    uint32_t alignment;
    uint64_t offsets[5];
  };
  // Sizes: a F32 [3] 12 B; b Q4_0 [64, 2] 72 B; c Q4_K [256] 144 B; d F16 [2, 3, 4] 48 B;
  // e Q6_K [256, 1, 1, 2] 420 B.
  const Case cases[] = {{32, {0, 32, 128, 288, 352}}, {64, {0, 64, 192, 384, 448}}};
  for (const Case& c : cases) {
    INFO("alignment " << c.alignment);
    GgufWriter w(c.alignment);
    w.set_string("general.architecture", "gemma4");
    REQUIRE(w.add_tensor("a", GgmlType::F32, {3}, fill_pattern(0)).ok());
    REQUIRE(w.add_tensor("b", GgmlType::Q4_0, {64, 2}, fill_pattern(1)).ok());
    REQUIRE(w.add_tensor("c", GgmlType::Q4_K, {256}, fill_pattern(2)).ok());
    REQUIRE(w.add_tensor("d", GgmlType::F16, {2, 3, 4}, fill_pattern(3)).ok());
    REQUIRE(w.add_tensor("e", GgmlType::Q6_K, {256, 1, 1, 2}, fill_pattern(4)).ok());
    const std::vector<uint8_t> bytes = w.write_buffer();
    const GgufFile g = read_back(bytes);

    uint32_t align_key = 0;
    CHECK(g.get_u32("general.alignment", &align_key) == (c.alignment != 32));
    CHECK(g.alignment == c.alignment);
    CHECK(g.data_offset % c.alignment == 0);
    const uint64_t sizes[] = {12, 72, 144, 48, 420};
    const GgmlType types[] = {GgmlType::F32, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::F16, GgmlType::Q6_K};
    REQUIRE(g.tensors.size() == 5);
    for (int t = 0; t < 5; ++t) {
      INFO("tensor " << t);
      const lf::GgufTensorInfo& info = g.tensors[t];
      CHECK(info.offset == c.offsets[t]);
      CHECK(info.n_bytes == sizes[t]);
      CHECK(info.type == types[t]);
      const uint64_t start = g.data_offset + info.offset;
      REQUIRE(start + info.n_bytes <= bytes.size());
      bool same = true;
      for (uint64_t i = 0; i < info.n_bytes; ++i) same &= bytes[start + i] == pattern(t, i);
      CHECK(same);
      const uint64_t padded_end = g.data_offset + (t < 4 ? c.offsets[t + 1] : bytes.size() - g.data_offset);
      bool zero_pad = true;
      for (uint64_t i = start + info.n_bytes; i < padded_end; ++i) zero_pad &= bytes[i] == 0;
      CHECK(zero_pad);
    }
    CHECK(bytes.size() == g.data_offset + c.offsets[4] + (420 + c.alignment - 1) / c.alignment * c.alignment);
    CHECK(g.tensors[3].n_dims == 3);
    CHECK(g.tensors[3].ne[2] == 4);
    CHECK(g.tensors[3].ne[3] == 1);
    CHECK(g.tensors[4].n_dims == 4);
    CHECK(g.tensors[4].ne[3] == 2);
  }
}

TEST_CASE("gguf writer: add_tensor refuses what the reader would refuse", "[gguf]") {
  GgufWriter w;
  REQUIRE(w.add_tensor("w", GgmlType::F32, {4}, nullptr).ok());
  struct Bad {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    const char* message;
  };
  const Bad bad[] = {
      {"", GgmlType::F32, {4}, "tensor name is empty"},
      {std::string(64, 'n'), GgmlType::F32, {4}, "is 64 bytes long"},
      {"w", GgmlType::F32, {4}, "duplicate tensor name 'w'"},
      {"x", GgmlType::F32, {}, "has 0 dimensions"},
      {"x", GgmlType::F32, {1, 1, 1, 1, 1}, "has 5 dimensions"},
      {"x", GgmlType::F32, {4, -1}, "ne[1] = -1"},
      {"x", GgmlType::Q4_0, {33}, "not a multiple of the block size 32"},
      {"x", static_cast<GgmlType>(4), {32}, "unknown ggml type 4"},
      {"x", GgmlType::F32, {int64_t{1} << 31, int64_t{1} << 31}, "too large"},
  };
  for (const Bad& b : bad) {
    INFO(b.message);
    const lf::Status s = w.add_tensor(b.name, b.type, b.ne, nullptr);
    CHECK(s.code() == Code::invalid_argument);
    CHECK_THAT(s.message(), Catch::Contains(b.message));
  }
  CHECK(w.add_tensor(std::string(63, 'n'), GgmlType::F32, {4}, nullptr).ok());
  CHECK(read_back(w.write_buffer()).tensors.size() == 2);
}

TEST_CASE("gguf writer: write_file writes what write_buffer returns, and names a bad path", "[gguf]") {
  GgufWriter w(64);
  w.set_array_string("tokens", {"a", "b"});
  REQUIRE(w.add_tensor("t", GgmlType::Q8_0, {64, 3}, fill_pattern(9)).ok());
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lf_test_gguf_writer_" + std::to_string(std::random_device()()) + ".gguf"))
                               .string();
  REQUIRE(w.write_file(path).ok());
  std::vector<uint8_t> on_disk;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  uint8_t buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) on_disk.insert(on_disk.end(), buf, buf + n);
  std::fclose(f);
  std::remove(path.c_str());
  CHECK(on_disk == w.write_buffer());
  CHECK(read_back(on_disk).tensors[0].n_bytes == 3 * 2 * 34);

  const std::string bad = "/nonexistent-dir-for-layerfold-tests/x.gguf";
  const lf::Status s = w.write_file(bad);
  CHECK(s.code() == Code::io_error);
  CHECK_THAT(s.message(), Catch::Contains(bad));
}
