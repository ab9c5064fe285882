// GGUF key/value section of a synthetic model: architecture keys (spec §5.2, §5.3) and the
// tokenizer section (spec §5.4).
#pragma once

#include "gguf/gguf_writer.h"
#include "model_config.h"
#include "vocab.h"

namespace lf::make_model {

void write_arch_metadata(const ModelConfig& cfg, GgufWriter& w);
void write_tokenizer_metadata(const ModelConfig& cfg, const Vocab& vocab, GgufWriter& w);

}  // namespace lf::make_model
