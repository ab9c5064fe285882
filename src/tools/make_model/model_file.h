// A synthetic model's GGUF contents: its vocabulary, metadata and tensors, in a writer.
#pragma once

#include "base/status.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "settings.h"
#include "vocab.h"

namespace lf::make_model {

// Adds the keys and tensors of *model (complete, as parse_cli leaves it) to w; model->n_vocab
// becomes the vocabulary's size (the Gemma vocabulary's own with VocabKind::gemma). The engine
// reads the file back as *model (tests/cpp/test_make_model.cpp).
Status add_model(ModelConfig* model, const MakeSettings& settings, GgufWriter* w);

// The vocabulary settings name, or a synthetic one of n_vocab tokens.
Status make_vocab(const MakeSettings& settings, int n_vocab, Vocab* vocab);

}  // namespace lf::make_model
