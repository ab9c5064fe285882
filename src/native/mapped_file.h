// A read-only file mapping (native builds). WASM builds get their bytes from the JS host.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace lf {

class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  ~MappedFile();

  static Status open(const std::string& path, MappedFile* out);
  void close();

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace lf
