// GGUF v3 container: parsed metadata and tensor table (docs/gguf.md, "Container").
//
// The parser works on a byte prefix of a file whose total size is known, so the JS host can
// read the header by range and grow the range when told Code::need_more_data. It copies what
// it keeps; tensor data is never copied, only located (data_offset + info.offset).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "base/status.h"

namespace lf {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

const char* gguf_type_name(GgufType type);

// Tensor names are shorter than this (llama.cpp's GGML_MAX_NAME, which counts a NUL).
constexpr uint64_t kGgufMaxTensorName = 64;

// One metadata value. Scalars fill exactly one of u64/i64/f64/str (bool and unsigned -> u64,
// signed -> i64, floats -> f64). Arrays keep their element type and count; elements live in
// the member matching the element type: numbers/bools widened into `numbers`-style vectors so
// that 514906 merges or 262144 scores cost one allocation, nested arrays in `arrays`.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  uint64_t u64 = 0;
  int64_t i64 = 0;
  double f64 = 0;
  std::string str;

  GgufType elem_type = GgufType::UINT8;  // ARRAY only
  uint64_t count = 0;                    // ARRAY only
  std::vector<int64_t> ints;             // ARRAY of any integer type or BOOL
  std::vector<double> floats;            // ARRAY of FLOAT32 / FLOAT64
  std::vector<std::string> strings;      // ARRAY of STRING
  std::vector<GgufValue> arrays;         // ARRAY of ARRAY
};

struct GgufTensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous axis (docs/gguf.md, "Dimension order")
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;   // relative to the data blob
  uint64_t n_bytes = 0;  // derived from ne and type

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

struct GgufFile {
  uint32_t version = 0;
  uint32_t alignment = 32;
  uint64_t data_offset = 0;  // absolute file offset of the data blob
  uint64_t file_size = 0;
  std::vector<std::pair<std::string, GgufValue>> kv;  // in file order
  std::vector<GgufTensorInfo> tensors;                // in file order

  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* tensor(std::string_view name) const;

  // Typed getters: false when the key is absent; Status error naming the key on a type mismatch
  // is the caller's job via `find`. Integers accept any integer type that fits.
  bool get_u32(std::string_view key, uint32_t* out) const;
  bool get_f32(std::string_view key, float* out) const;
  bool get_bool(std::string_view key, bool* out) const;
  bool get_string(std::string_view key, std::string* out) const;
};

// Parses `size` bytes that are the first bytes of a file of `file_size` bytes (size <= file_size).
// Errors: Code::malformed naming the field and byte offset; Code::unsupported for unknown tensor
// types (named); Code::need_more_data when the header runs past `size` but not past file_size,
// with the needed byte count in the message and in *needed_bytes (if given).
// Never reads past `size`, never allocates more than the bytes it was given can justify.
Status gguf_parse(const uint8_t* data, uint64_t size, uint64_t file_size, GgufFile* out,
                  uint64_t* needed_bytes = nullptr);

// The tensor table and metadata as JSON, for the JS host (no second parser in JS).
// Large arrays (tokens, merges, scores) are summarized unless include_large_arrays is true.
std::string gguf_to_json(const GgufFile& file, bool include_large_arrays);

}  // namespace lf
