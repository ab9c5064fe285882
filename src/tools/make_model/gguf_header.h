// A GGUF's header read from a file, without its tensor data: the target of --assistant-for and
// --mmproj-for and the vocabulary of --vocab-gguf, whose files may be far larger than their headers.
#pragma once

#include <string>

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "settings.h"

namespace lf::make_model {

// The keys and tensor table of the GGUF at path, read by growing prefixes as the parser asks.
Status read_gguf_header(const std::string& path, GgufFile* out);

// The target of --assistant-for or --mmproj-for from its GGUF header: its configuration as the
// engine reads it (refused by name as the engine refuses it), and settings->vocab set to the
// file's vocabulary.
Status read_target_file(const std::string& path, ModelConfig* target, MakeSettings* settings);

}  // namespace lf::make_model
