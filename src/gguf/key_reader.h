// Reads the metadata keys of one architecture from a parsed GGUF ("gemma4.block_count" is asked
// for as "block_count"), refusing a value of the wrong type or range by the key's full name.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_reader.h"

namespace lf {

class KeyReader {
 public:
  KeyReader(const GgufFile& file, std::string arch) : file_(file), prefix_(std::move(arch) + ".") {}

  const GgufFile& file() const { return file_; }

  std::string full(std::string_view key) const { return prefix_ + std::string(key); }

  // Non-negative integer that fits an int. *found (if given) tells whether the key exists, and
  // an absent key leaves *out as it was (the caller's default); without `found` it is required.
  Status get_int(std::string_view key, int* out, bool* found = nullptr) const;
  // A finite float32, as get_int for `found`.
  Status get_float(std::string_view key, float* out, bool* found = nullptr) const;
  // A scalar broadcast to every layer or an integer/bool array of exactly n_layer elements
  // (llama.cpp get_key_or_arr). Absent and not required: `fallback` for every layer.
  Status get_per_layer(std::string_view key, int n_layer, bool required, int fallback, std::vector<int>* out) const;

 private:
  // *v: the key's value, or null when absent, which is an error unless the caller asked whether
  // it was `found`.
  Status lookup(const std::string& name, bool* found, const GgufValue** v) const;

  const GgufFile& file_;
  std::string prefix_;
};

}  // namespace lf
