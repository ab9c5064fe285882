#include "model_file.h"

#include <fstream>
#include <sstream>

#include "metadata.h"
#include "vocab.h"
#include "weights.h"

namespace lf::make_model {
namespace {

Status read_text_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Code::io_error, "cannot read chat template '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  *out = text.str();
  if (out->empty()) return Status(Code::invalid_argument, "chat template '" + path + "' is empty");
  return Status();
}

}  // namespace

Status make_vocab(const MakeSettings& settings, int n_vocab, Vocab* vocab) {
  if (settings.vocab == VocabKind::gemma) return load_gemma_vocab(settings.tokenizer_json, vocab);
  if (settings.vocab == VocabKind::gguf) return load_gguf_vocab(settings.vocab_gguf, vocab);
  return build_synthetic_vocab(static_cast<uint32_t>(n_vocab), vocab);
}

Status add_model(ModelConfig* model, const MakeSettings& settings, GgufWriter* w) {
  Vocab vocab;
  LF_RETURN_IF_ERROR(make_vocab(settings, model->n_vocab, &vocab));
  const std::string tokenizer_model = model->arch == Arch::gemma4 ? "gemma4" : "llama";
  if (!vocab.tokenizer_model.empty() && vocab.tokenizer_model != tokenizer_model) {
    return Status(Code::invalid_argument, "'" + settings.vocab_gguf + "' holds a " + vocab.tokenizer_model +
                                              " vocabulary; a " + (model->arch == Arch::gemma4 ? "gemma4" : "gemma3") +
                                              " model needs a " + tokenizer_model + " one");
  }
  if (!settings.chat_template.empty()) LF_RETURN_IF_ERROR(read_text_file(settings.chat_template, &vocab.chat_template));
  model->n_vocab = static_cast<int>(vocab.tokens.size());
  write_arch_metadata(*model, settings, *w);
  write_tokenizer_metadata(*model, vocab, *w);
  return add_weight_tensors(*model, settings, *w);
}

}  // namespace lf::make_model
