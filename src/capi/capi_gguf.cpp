// C ABI over the GGUF parser: the JS host reads the header by range and asks us for the table.
#include <string>

#include "capi/capi_internal.h"
#include "layerfold/capi.h"
#include "gguf/gguf_reader.h"

namespace {
thread_local double needed_bytes = 0;
}

extern "C" {

lf_gguf* lf_gguf_parse(const uint8_t* data, double size, double file_size) {
  auto handle = new lf_gguf();
  uint64_t needed = 0;
  lf::Status status = lf::gguf_parse(data, static_cast<uint64_t>(size),
                                     static_cast<uint64_t>(file_size), &handle->file, &needed);
  needed_bytes = static_cast<double>(needed);
  if (!lf::capi::record(status)) {
    delete handle;
    return nullptr;
  }
  return handle;
}

double lf_gguf_needed_bytes(void) { return needed_bytes; }

const char* lf_gguf_json(lf_gguf* gguf, int include_large_arrays) {
  gguf->json = lf::gguf_to_json(gguf->file, include_large_arrays != 0);
  return gguf->json.c_str();
}

void lf_gguf_free(lf_gguf* gguf) { delete gguf; }

}  // extern "C"
