// A GGUF's header read from a file, without its tensor data: the target of --assistant-for and
// the vocabulary of --vocab-gguf, whose files may be far larger than their headers.
#pragma once

#include <string>

#include "base/status.h"
#include "gguf/gguf_reader.h"

namespace lf::make_model {

// The keys and tensor table of the GGUF at path, read by growing prefixes as the parser asks.
Status read_gguf_header(const std::string& path, GgufFile* out);

}  // namespace lf::make_model
