// Shared by the C ABI translation units: how a Status becomes the per-thread last error.
#pragma once

#include <string>

#include "gguf/gguf_reader.h"
#include "base/status.h"

// Handle behind lf_gguf*: the parsed header and the last JSON handed out from it.
struct lf_gguf {
  lf::GgufFile file;
  std::string json;
};

namespace lf::capi {

// Records status as the calling thread's last error; returns status.ok().
bool record(const Status& status);

}  // namespace lf::capi
