// GGUF reader against hand-assembled bytes (docs/gguf.md, "Container"): each broken file must fail
// with its own code and message, every prefix of a valid file must ask for more or fail cleanly,
// and the JSON export must keep exact integers and spell non-finite floats.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "native/mapped_file.h"

namespace {

using lf::Code;
using lf::GgufFile;
using lf::Status;

// Little-endian GGUF assembly by hand, independent of the writer under test.
struct Bytes {
  std::vector<uint8_t> b;

  template <typename T>
  Bytes& put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    b.insert(b.end(), raw, raw + sizeof(T));
    return *this;
  }
  Bytes& raw(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& str(const std::string& s) { return put<uint64_t>(s.size()).raw(s); }
  Bytes& header(uint32_t version, int64_t n_tensors, int64_t n_kv) {
    return raw("GGUF").put(version).put(n_tensors).put(n_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).put<uint32_t>(4).put(v); }
  Bytes& tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (int64_t n : ne) put(n);
    return put(type).put(offset);
  }
  Bytes& pad_to(size_t align) {
    b.resize((b.size() + align - 1) / align * align, 0);
    return *this;
  }
  Bytes& fill(size_t n, uint8_t v) {
    b.insert(b.end(), n, v);
    return *this;
  }
};

// Parses a copy holding exactly `prefix` bytes, so ASan catches any read past the prefix.
Status parse_prefix(const std::vector<uint8_t>& file, uint64_t prefix, uint64_t file_size, GgufFile* out,
                    uint64_t* needed = nullptr) {
  std::vector<uint8_t> copy(file.begin(), file.begin() + static_cast<ptrdiff_t>(prefix));
  return lf::gguf_parse(copy.data(), prefix, file_size, out, needed);
}

Status parse(const std::vector<uint8_t>& file, GgufFile* out) {
  return parse_prefix(file, file.size(), file.size(), out);
}

constexpr uint32_t kF32 = 0, kQ4_0 = 2;

// One KV "a" = 7 (u32) and one F32 tensor "w" of 8 elements: 32 data bytes at data offset 96.
Bytes valid_file() {
  Bytes f;
  f.header(3, 1, 1).kv_u32("a", 7).tensor("w", {8}, kF32, 0).pad_to(32).fill(32, 0xAB);
  return f;
}

struct Broken {
  const char* what;
  std::vector<uint8_t> bytes;
  Code code;
  const char* message;
};

std::vector<Broken> broken_files() {
  const int64_t huge = int64_t{1} << 62;
  std::vector<Broken> v;
  auto add = [&](const char* what, Bytes b, Code code, const char* message) {
    v.push_back({what, std::move(b.b), code, message});
  };
  add("bad magic", Bytes().raw("GGUX").put<uint32_t>(3).put<int64_t>(0).put<int64_t>(0), Code::malformed,
      "bad magic");
  add("version 0", Bytes().header(0, 0, 0), Code::malformed, "version 0");
  add("version 1", Bytes().header(1, 0, 0), Code::unsupported, "version 1 is not supported");
  add("version 4", Bytes().header(4, 0, 0), Code::unsupported, "version 4 is newer");
  add("byte-swapped version", Bytes().header(0x03000000, 0, 0), Code::unsupported, "endianness mismatch");
  add("negative n_kv", Bytes().header(3, 0, -1), Code::malformed, "n_kv is negative");
  add("negative n_tensors", Bytes().header(3, -1, 0), Code::malformed, "n_tensors is negative");
  add("huge n_kv", Bytes().header(3, 0, huge), Code::malformed, "n_kv claims 4611686018427387904");
  add("huge n_tensors", Bytes().header(3, huge, 0), Code::malformed, "n_tensors claims 4611686018427387904");
  add("huge key length", Bytes().header(3, 0, 1).put<uint64_t>(uint64_t{1} << 62).raw("abcdefghijklmnop"),
      Code::malformed, "key #0 claims 4611686018427387904 bytes but only 16 bytes remain");
  add("huge string value",
      Bytes().header(3, 0, 1).str("s").put<uint32_t>(8).put<uint64_t>(uint64_t{1} << 62).raw("xyz"),
      Code::malformed, "'s' claims 4611686018427387904 bytes but only 3 bytes remain");
  add("huge array count",
      Bytes().header(3, 0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(0).put<uint64_t>(uint64_t{1} << 60).fill(
          40, 1),
      Code::malformed, "array 'arr' claims 1152921504606846976 elements but only 40 bytes remain");
  add("huge string array count",
      Bytes().header(3, 0, 1).str("toks").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(uint64_t{1} << 60).str(
          "a"),
      Code::malformed, "array 'toks' claims 1152921504606846976 elements");
  add("unknown value type", Bytes().header(3, 0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0), Code::malformed,
      "key 'k' has unknown value type 13 at byte 33");
  add("unknown array element type",
      Bytes().header(3, 0, 1).str("k").put<uint32_t>(9).put<uint32_t>(99).put<uint64_t>(0), Code::malformed,
      "'k' has unknown element type 99");
  add("empty key", Bytes().header(3, 0, 1).str("").put<uint32_t>(0).put<uint8_t>(1), Code::malformed,
      "empty key");
  add("duplicate key", Bytes().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2), Code::malformed,
      "duplicate key 'a'");
  add("alignment of wrong type",
      Bytes().header(3, 0, 1).str("general.alignment").put<uint32_t>(5).put<int32_t>(32), Code::malformed,
      "general.alignment must be UINT32, not INT32");
  add("alignment not a power of two", Bytes().header(3, 0, 1).kv_u32("general.alignment", 48), Code::malformed,
      "general.alignment 48 is not a power of two");
  add("alignment zero", Bytes().header(3, 0, 1).kv_u32("general.alignment", 0), Code::malformed,
      "general.alignment 0 is not a power of two");
  add("unknown tensor type", Bytes().header(3, 1, 0).tensor("w", {32}, 43, 0).pad_to(32).fill(32, 0),
      Code::unsupported, "tensor 'w' has unknown or unsupported ggml type 43");
  // The types of some popular Gemma 4 files that we do not multiply: refused, and named.
  add("IQ4_NL tensor", Bytes().header(3, 1, 0).tensor("blk.0.ffn_down_exps.weight", {32}, 20, 0).pad_to(32).fill(32, 0),
      Code::unsupported, "tensor 'blk.0.ffn_down_exps.weight' has unknown or unsupported ggml type 20 (IQ4_NL)");
  add("IQ4_XS tensor", Bytes().header(3, 1, 0).tensor("w", {256}, 23, 0).pad_to(32).fill(136, 0), Code::unsupported,
      "ggml type 23 (IQ4_XS)");
  add("MXFP4 tensor", Bytes().header(3, 1, 0).tensor("w", {32}, 39, 0).pad_to(32).fill(32, 0), Code::unsupported,
      "ggml type 39 (MXFP4)");
  add("retired tensor type", Bytes().header(3, 1, 0).tensor("w", {32}, 4, 0).pad_to(32).fill(32, 0),
      Code::unsupported, "ggml type 4");
  add("n_dims 5", Bytes().header(3, 1, 0).tensor("w", {1, 1, 1, 1, 1}, kF32, 0).pad_to(32).fill(32, 0),
      Code::malformed, "tensor 'w' has n_dims 5");
  add("negative ne", Bytes().header(3, 1, 0).tensor("w", {4, -3}, kF32, 0).pad_to(32), Code::malformed,
      "tensor 'w' has ne[1] = -3");
  add("ne0 not a multiple of the block", Bytes().header(3, 1, 0).tensor("w", {16}, kQ4_0, 0).pad_to(32).fill(32, 0),
      Code::malformed, "not a multiple of the block size 32");
  add("tensor size overflow",
      Bytes().header(3, 1, 0).tensor("w", {int64_t{1} << 40, int64_t{1} << 30}, kF32, 0).pad_to(32),
      Code::malformed, "tensor 'w' is too large");
  add("tensor byte count overflow",  // 2^62 elements fit in int64, their 2^64 bytes do not
      Bytes().header(3, 1, 0).tensor("w", {int64_t{1} << 31, int64_t{1} << 31}, kF32, 0).pad_to(32),
      Code::malformed, "tensor 'w' is too large");
  add("first tensor not at offset 0",
      Bytes().header(3, 1, 0).tensor("w", {8}, kF32, 64).pad_to(32).fill(128, 0), Code::malformed,
      "tensor 'w' has offset 64, expected 0");
  add("offset ignores the alignment padding",
      Bytes().header(3, 2, 0).tensor("a", {3}, kF32, 0).tensor("b", {3}, kF32, 12).pad_to(32).fill(64, 0),
      Code::malformed, "tensor 'b' has offset 12, expected 32");
  add("tensor past end of file", Bytes().header(3, 1, 0).tensor("w", {16}, kF32, 0).pad_to(32).fill(32, 0),
      Code::malformed, "tensor 'w' data ends at byte 128 but the file has 96 bytes");
  add("duplicate tensor name",
      Bytes().header(3, 2, 0).tensor("w", {8}, kF32, 0).tensor("w", {8}, kF32, 32).pad_to(32).fill(64, 0),
      Code::malformed, "duplicate tensor name 'w'");
  add("tensor name of 64 bytes",
      Bytes().header(3, 1, 0).tensor(std::string(64, 'n'), {8}, kF32, 0).pad_to(32).fill(32, 0), Code::malformed,
      "is 64 bytes long; the limit is 63");
  Bytes deep;
  deep.header(3, 0, 1).str("deep").put<uint32_t>(9);
  for (int i = 0; i < 20; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  deep.put<uint32_t>(0).put<uint64_t>(0);
  add("arrays nested too deep", deep, Code::malformed, "nests arrays deeper than");
  return v;
}

}  // namespace

TEST_CASE("gguf: a minimal valid file parses", "[gguf]") {
  const Bytes f = valid_file();
  GgufFile g;
  REQUIRE(parse(f.b, &g).ok());
  CHECK(g.version == 3);
  CHECK(g.alignment == 32);
  CHECK(g.data_offset == 96);
  CHECK(g.file_size == 128);
  REQUIRE(g.kv.size() == 1);
  uint32_t a = 0;
  CHECK(g.get_u32("a", &a));
  CHECK(a == 7);
  REQUIRE(g.tensors.size() == 1);
  const lf::GgufTensorInfo* w = g.tensor("w");
  REQUIRE(w != nullptr);
  CHECK(w->n_dims == 1);
  CHECK(w->ne[0] == 8);
  CHECK(w->ne[1] == 1);
  CHECK(w->n_bytes == 32);
  CHECK(w->n_elements() == 8);
  CHECK(g.tensor("missing") == nullptr);
  CHECK(g.find("missing") == nullptr);
}

TEST_CASE("gguf: version 2 is accepted", "[gguf]") {
  Bytes f;
  f.header(2, 0, 1).kv_u32("a", 1);
  GgufFile g;
  REQUIRE(parse(f.b, &g).ok());
  CHECK(g.version == 2);
}

TEST_CASE("gguf: broken files fail with their own code and message", "[gguf]") {
  for (const Broken& bf : broken_files()) {
    INFO(bf.what);
    GgufFile g;
    const Status s = parse(bf.bytes, &g);
    INFO(s.message());
    CHECK(s.code() == bf.code);
    CHECK_THAT(s.message(), Catch::Contains(bf.message));
  }
}

TEST_CASE("gguf: a 63-byte tensor name is the longest accepted", "[gguf]") {
  Bytes f;
  f.header(3, 1, 0).tensor(std::string(63, 'n'), {8}, kF32, 0).pad_to(32).fill(32, 0);
  GgufFile g;
  REQUIRE(parse(f.b, &g).ok());
  CHECK(g.tensors[0].name.size() == 63);
}

TEST_CASE("gguf: every prefix of a valid file asks for more, or fails when the file is that short", "[gguf]") {
  Bytes f;
  f.header(3, 2, 3).kv_u32("general.alignment", 64);
  f.str("names").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("x").str("yz");
  f.str("pi").put<uint32_t>(6).put<float>(3.5f);
  f.tensor("a", {3}, kF32, 0).tensor("b", {32, 2}, kQ4_0, 64);
  const size_t header_end = f.b.size();
  f.pad_to(64).fill(12, 1).pad_to(64).fill(36, 2);
  const size_t last_data_end = f.b.size();
  f.pad_to(64);  // the writer pads after the last tensor too
  const uint64_t full = f.b.size();

  for (uint64_t len = 0; len < full; ++len) {
    INFO("prefix " << len << " of " << full);
    GgufFile g;
    uint64_t needed = 0;
    const Status s = parse_prefix(f.b, len, full, &g, &needed);
    if (len < header_end) {
      CHECK(s.code() == Code::need_more_data);
      CHECK(needed > len);
      CHECK(needed <= full);
      CHECK_THAT(s.message(), Catch::Contains("need the first " + std::to_string(needed) + " bytes"));
    } else {
      CHECK(s.ok());
      CHECK(g.tensors.size() == 2);
    }
    const Status t = parse_prefix(f.b, len, len, &g);
    if (len < last_data_end) {
      CHECK(t.code() == Code::malformed);
    } else {
      CHECK(t.ok());  // only the padding after the last tensor is missing
    }
  }
}

TEST_CASE("gguf: growing a short prefix to needed_bytes reaches success", "[gguf]") {
  Bytes f;
  std::vector<std::string> tokens;
  f.header(3, 1, 2).str("tokenizer.ggml.tokens").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2000);
  for (int i = 0; i < 2000; ++i) f.str("tok" + std::to_string(i));
  f.str("scores").put<uint32_t>(9).put<uint32_t>(6).put<uint64_t>(500).fill(500 * 4, 0);
  f.tensor("w", {8}, kF32, 0).pad_to(32).fill(32, 0);

  uint64_t have = 16;
  int rounds = 0;
  GgufFile g;
  Status s;
  for (;;) {
    uint64_t needed = 0;
    s = parse_prefix(f.b, have, f.b.size(), &g, &needed);
    if (s.code() != Code::need_more_data) break;
    REQUIRE(needed > have);
    REQUIRE(needed <= f.b.size());
    have = needed;
    REQUIRE(++rounds < 32);
  }
  REQUIRE(s.ok());
  REQUIRE(g.find("tokenizer.ggml.tokens") != nullptr);
  CHECK(g.find("tokenizer.ggml.tokens")->strings.size() == 2000);
  CHECK(g.find("tokenizer.ggml.tokens")->strings[1999] == "tok1999");
  CHECK(rounds <= 16);  // not one round per token
}

TEST_CASE("gguf: need_more_data covers a whole fixed-size array at once", "[gguf]") {
  Bytes f;
  f.header(3, 0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(0).put<uint64_t>(1000);
  const uint64_t elems_at = f.b.size();
  f.fill(1000, 3);
  GgufFile g;
  uint64_t needed = 0;
  const Status s = parse_prefix(f.b, elems_at, f.b.size(), &g, &needed);
  REQUIRE(s.code() == Code::need_more_data);
  CHECK(needed == elems_at + 1000);
}

TEST_CASE("gguf: a prefix longer than the file is an invalid argument", "[gguf]") {
  const Bytes f = valid_file();
  GgufFile g;
  const Status s = lf::gguf_parse(f.b.data(), f.b.size(), f.b.size() - 1, &g);
  CHECK(s.code() == Code::invalid_argument);
}

TEST_CASE("gguf: general.alignment moves the data offset", "[gguf]") {
  Bytes f;
  f.header(3, 2, 1).kv_u32("general.alignment", 64).tensor("a", {3}, kF32, 0).tensor("b", {4}, kF32, 64);
  const size_t infos_end = f.b.size();
  f.pad_to(64).fill(12, 1).pad_to(64).fill(16, 2);
  GgufFile g;
  REQUIRE(parse(f.b, &g).ok());
  CHECK(g.alignment == 64);
  CHECK(g.data_offset == (infos_end + 63) / 64 * 64);
  CHECK(g.tensors[1].offset == 64);
}

TEST_CASE("gguf: typed getters accept fitting integers and refuse other types", "[gguf]") {
  Bytes f;
  f.header(3, 0, 6);
  f.str("u8").put<uint32_t>(0).put<uint8_t>(200);
  f.str("i64").put<uint32_t>(11).put<int64_t>(-5);
  f.str("u64big").put<uint32_t>(10).put<uint64_t>(uint64_t{1} << 40);
  f.str("f").put<uint32_t>(6).put<float>(0.25f);
  f.str("b").put<uint32_t>(7).put<uint8_t>(1);
  f.str("s").put<uint32_t>(8).str("gemma4");
  GgufFile g;
  REQUIRE(parse(f.b, &g).ok());
  uint32_t u = 0;
  CHECK(g.get_u32("u8", &u));
  CHECK(u == 200);
  CHECK_FALSE(g.get_u32("i64", &u));
  CHECK_FALSE(g.get_u32("u64big", &u));
  CHECK_FALSE(g.get_u32("f", &u));
  CHECK_FALSE(g.get_u32("b", &u));
  CHECK_FALSE(g.get_u32("absent", &u));
  float x = 0;
  CHECK(g.get_f32("f", &x));
  CHECK(x == 0.25f);
  CHECK_FALSE(g.get_f32("s", &x));
  bool b = false;
  CHECK(g.get_bool("b", &b));
  CHECK(b);
  CHECK_FALSE(g.get_bool("u8", &b));
  std::string s;
  CHECK(g.get_string("s", &s));
  CHECK(s == "gemma4");
  CHECK_FALSE(g.get_string("u8", &s));
  CHECK(g.find("i64")->i64 == -5);
}

TEST_CASE("gguf: JSON export keeps exact integers and spells non-finite floats", "[gguf]") {
  Bytes f;
  f.header(3, 2, 11);
  f.str("u64max").put<uint32_t>(10).put<uint64_t>(UINT64_MAX);
  f.str("i64min").put<uint32_t>(11).put<int64_t>(INT64_MIN);
  f.str("eps").put<uint32_t>(6).put<float>(1e-6f);
  f.str("nan").put<uint32_t>(12).put<double>(std::numeric_limits<double>::quiet_NaN());
  f.str("inf").put<uint32_t>(6).put<float>(std::numeric_limits<float>::infinity());
  f.str("ninf").put<uint32_t>(12).put<double>(-std::numeric_limits<double>::infinity());
  f.str("bad utf8").put<uint32_t>(8).str("a\xff" "b");
  f.str("flag").put<uint32_t>(7).put<uint8_t>(1);
  f.str("big").put<uint32_t>(9).put<uint32_t>(5).put<uint64_t>(65);
  for (int i = 0; i < 65; ++i) f.put<int32_t>(i);
  f.str("small").put<uint32_t>(9).put<uint32_t>(10).put<uint64_t>(2).put<uint64_t>(UINT64_MAX).put<uint64_t>(1);
  f.str("nested").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(2);
  f.put<uint32_t>(7).put<uint64_t>(2).put<uint8_t>(1).put<uint8_t>(0);
  f.put<uint32_t>(8).put<uint64_t>(1).str("s");
  f.tensor("a", {3}, kF32, 0).tensor("b", {32, 2}, kQ4_0, 32);
  const uint64_t data_offset = (f.b.size() + 31) / 32 * 32;
  f.pad_to(32).fill(12, 0).pad_to(32).fill(36, 0);
  GgufFile g;
  const Status s = parse(f.b, &g);
  REQUIRE(s.ok());

  const std::string text = lf::gguf_to_json(g, false);
  CHECK_THAT(text, Catch::Contains("18446744073709551615"));
  CHECK_THAT(text, Catch::Contains("-9223372036854775808"));
  CHECK_THAT(text, Catch::Contains("\"eps\":1e-06"));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["version"] == 3);
  CHECK(j["alignment"] == 32);
  CHECK(j["data_offset"] == data_offset);
  CHECK(j["file_size"] == f.b.size());
  const nlohmann::json& m = j["metadata"];
  CHECK(m["u64max"].get<uint64_t>() == UINT64_MAX);
  CHECK(m["i64min"].get<int64_t>() == INT64_MIN);
  CHECK(static_cast<float>(m["eps"].get<double>()) == 1e-6f);
  CHECK(m["nan"] == "nan");
  CHECK(m["inf"] == "inf");
  CHECK(m["ninf"] == "-inf");
  CHECK(m["bad utf8"].is_string());
  CHECK(m["flag"] == true);
  CHECK(m["big"] == nlohmann::json({{"type", "array"}, {"elem_type", "INT32"}, {"count", 65}}));
  CHECK(m["small"][0].get<uint64_t>() == UINT64_MAX);
  CHECK(m["small"][1] == 1);
  CHECK(m["nested"] == nlohmann::json::parse(R"([[true,false],["s"]])"));
  const nlohmann::json& t = j["tensors"];
  REQUIRE(t.size() == 2);
  CHECK(t[1]["name"] == "b");
  CHECK(t[1]["type"] == "Q4_0");
  CHECK(t[1]["type_id"] == 2);
  CHECK(t[1]["ne"] == nlohmann::json::parse("[32,2]"));
  CHECK(t[1]["offset"] == data_offset + 32);
  CHECK(t[1]["n_bytes"] == 36);

  const nlohmann::json all = nlohmann::json::parse(lf::gguf_to_json(g, true), nullptr, false);
  REQUIRE(all["metadata"]["big"].is_array());
  CHECK(all["metadata"]["big"].size() == 65);
  CHECK(all["metadata"]["big"][64] == 64);
}

#if !defined(__EMSCRIPTEN__) && !defined(__wasi__)
TEST_CASE("gguf: MappedFile maps an existing file and names a missing one", "[gguf]") {
  lf::GgufWriter w;
  w.set_u32("a", 7);
  const std::vector<uint8_t> bytes = w.write_buffer();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("lf_test_mapped_file_" + std::to_string(std::random_device()()) + ".gguf"))
                               .string();
  REQUIRE(w.write_file(path).ok());
  {
    lf::MappedFile m;
    REQUIRE(lf::MappedFile::open(path, &m).ok());
    REQUIRE(m.size() == bytes.size());
    CHECK(std::memcmp(m.data(), bytes.data(), bytes.size()) == 0);
    lf::MappedFile moved = std::move(m);
    CHECK(m.data() == nullptr);
    CHECK(moved.size() == bytes.size());
    GgufFile g;
    CHECK(lf::gguf_parse(moved.data(), moved.size(), moved.size(), &g).ok());
  }
  std::remove(path.c_str());

  lf::MappedFile missing;
  const Status s = lf::MappedFile::open(path, &missing);
  CHECK(s.code() == Code::io_error);
  CHECK_THAT(s.message(), Catch::Contains(path));
  CHECK_THAT(s.message(), Catch::Contains("No such file"));
  CHECK(missing.data() == nullptr);
}
#endif
