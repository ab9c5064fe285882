// libFuzzer target for the GGUF reader: any bytes, whole or as a prefix of a longer file, must
// give a Status (never a crash, an out-of-bounds read or a huge allocation), and the
// need_more_data protocol must always make progress.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gguf/gguf_reader.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lf::GgufFile whole;
  uint64_t needed = 0;
  const lf::Status s = lf::gguf_parse(data, size, size, &whole, &needed);
  check(s.code() != lf::Code::need_more_data);  // nothing more exists to ask for
  if (s.ok()) {
    check(!lf::gguf_to_json(whole, false).empty());
    check(!lf::gguf_to_json(whole, true).empty());
  }

  // The same bytes as a prefix of the file, grown to *needed_bytes until the parser stops
  // asking: a copy of exactly the prefix length, so ASan catches any read past it.
  uint64_t have = size / 2;
  for (;;) {
    std::vector<uint8_t> prefix(data, data + have);
    lf::GgufFile part;
    const lf::Status p = lf::gguf_parse(prefix.data(), have, size, &part, &needed);
    if (p.code() == lf::Code::need_more_data) {
      check(needed > have && needed <= size);
      have = needed;
      continue;
    }
    // Whatever a prefix decides, the whole file decides the same way.
    check(p.code() == s.code() && p.message() == s.message());
    if (p.ok()) check(part.kv.size() == whole.kv.size() && part.tensors.size() == whole.tensors.size());
    break;
  }
  return 0;
}
