// GGUF key/value section of a synthetic model: architecture keys (docs/gguf.md, "gemma4 keys" and
// "gemma3 keys") and the tokenizer section (docs/gguf.md, "Tokenizer keys").
#pragma once

#include <string>

#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "settings.h"
#include "vocab.h"

namespace lf::make_model {

// arch: the key prefix and general.architecture; empty: the model's own ("gemma4", "gemma3").
void write_arch_metadata(const ModelConfig& model, const MakeSettings& settings, GgufWriter& w,
                         const std::string& arch = "");
void write_tokenizer_metadata(const ModelConfig& model, const Vocab& vocab, GgufWriter& w);

}  // namespace lf::make_model
