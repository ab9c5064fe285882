// Writes GGUF v3 files as llama.cpp expects them (docs/gguf.md, "Alignment and data": tensors back
// to back in info order, each padded to the alignment). Tensor bytes are produced by a callback at
// write time so a multi-GB synthetic model never has to sit in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "base/status.h"

namespace lf {

class GgufWriter {
 public:
  // Fills exactly `n_bytes` bytes at dst.
  using FillFn = std::function<void(uint8_t* dst, uint64_t n_bytes)>;

  explicit GgufWriter(uint32_t alignment = 32);

  void set_value(std::string key, GgufValue value);  // any type, incl. nested arrays
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string(std::string key, std::string v);
  void set_array_i32(std::string key, const std::vector<int32_t>& v);
  void set_array_bool(std::string key, const std::vector<bool>& v);
  void set_array_f32(std::string key, const std::vector<float>& v);
  void set_array_string(std::string key, std::vector<std::string> v);

  // ne in ggml order (ne[0] contiguous); ne[0] must be a multiple of the type's block size.
  Status add_tensor(std::string name, GgmlType type, std::vector<int64_t> ne, FillFn fill);

  Status write_file(const std::string& path) const;
  std::vector<uint8_t> write_buffer() const;  // whole file in memory, for tests
  // The header alone (metadata and tensor infos, padded to the data): what describes a model
  // without its weights, as the model-configuration fuzzer feeds the loader.
  std::vector<uint8_t> header_buffer() const;
  // Bytes of the whole file write_file() would write.
  uint64_t file_bytes() const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    uint64_t n_bytes;
    FillFn fill;
  };
  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace lf
