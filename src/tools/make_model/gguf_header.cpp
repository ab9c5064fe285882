#include "gguf_header.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace lf::make_model {

Status read_gguf_header(const std::string& path, GgufFile* out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status(Code::io_error, "cannot read GGUF '" + path + "'");
  uint64_t file_size = 0;
  if (std::fseek(f, 0, SEEK_END) == 0) {
    const long end = std::ftell(f);
    file_size = end > 0 ? static_cast<uint64_t>(end) : 0;
  }
  std::vector<uint8_t> bytes;
  // The parser names the bytes it needs; a first read of 1 MiB holds most headers.
  uint64_t want = std::min<uint64_t>(file_size, 1 << 20);
  Status parsed;
  for (;;) {
    bytes.resize(want);
    const bool read = std::fseek(f, 0, SEEK_SET) == 0 && std::fread(bytes.data(), 1, want, f) == want;
    if (!read) {
      std::fclose(f);
      return Status(Code::io_error, "cannot read the header of GGUF '" + path + "'");
    }
    uint64_t needed = 0;
    parsed = gguf_parse(bytes.data(), want, file_size, out, &needed);
    if (parsed.code() != Code::need_more_data || needed <= want || needed > file_size) break;
    want = needed;
  }
  std::fclose(f);
  if (!parsed.ok()) return Status(parsed.code() == Code::need_more_data ? Code::malformed : parsed.code(),
                                  "'" + path + "': " + parsed.message());
  return Status();
}

Status read_target_file(const std::string& path, ModelConfig* target, MakeSettings* settings) {
  GgufFile file;
  LF_RETURN_IF_ERROR(read_gguf_header(path, &file));
  const Status read = load_model_config(file, target);
  if (!read.ok()) return Status(read.code(), "'" + path + "': " + read.message());
  settings->vocab = VocabKind::gguf;
  settings->vocab_gguf = path;
  return Status();
}

}  // namespace lf::make_model
