#include "model_file.h"

#include "metadata.h"
#include "vocab.h"
#include "weights.h"

namespace lf::make_model {

Status add_model(ModelConfig* model, const MakeSettings& settings, GgufWriter* w) {
  Vocab vocab;
  if (settings.vocab == VocabKind::gemma) {
    LF_RETURN_IF_ERROR(load_gemma_vocab(settings.tokenizer_json, &vocab));
  } else {
    LF_RETURN_IF_ERROR(build_synthetic_vocab(static_cast<uint32_t>(model->n_vocab), &vocab));
  }
  model->n_vocab = static_cast<int>(vocab.tokens.size());
  write_arch_metadata(*model, settings, *w);
  write_tokenizer_metadata(*model, vocab, *w);
  return add_weight_tensors(*model, settings, *w);
}

}  // namespace lf::make_model
