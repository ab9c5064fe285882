// The vocabulary of a GGUF's tokenizer keys (docs/gguf.md, "Tokenizer keys"), for synthetic models
// that tokenize exactly as a real one: llama.cpp's models/ggml-vocab-gemma-4.gguf holds Gemma 4's.
#include "gguf_header.h"
#include "vocab.h"

namespace lf::make_model {
namespace {

Status missing(const std::string& path, const std::string& key, const char* what) {
  return Status(Code::malformed, "'" + path + "' has no " + key + " " + what);
}

}  // namespace

Status load_gguf_vocab(const std::string& path, Vocab* out) {
  GgufFile file;
  LF_RETURN_IF_ERROR(read_gguf_header(path, &file));

  const std::string t = "tokenizer.ggml.";
  Vocab v;
  if (!file.get_string(t + "model", &v.tokenizer_model)) return missing(path, t + "model", "string");
  const GgufValue* tokens = file.find(t + "tokens");
  if (tokens == nullptr || tokens->type != GgufType::ARRAY || tokens->elem_type != GgufType::STRING || tokens->strings.empty()) {
    return missing(path, t + "tokens", "array of strings");
  }
  v.tokens = tokens->strings;
  const GgufValue* types = file.find(t + "token_type");
  if (types == nullptr || types->type != GgufType::ARRAY || types->ints.size() != v.tokens.size()) {
    return missing(path, t + "token_type", "array of one type per token");
  }
  v.types.assign(types->ints.begin(), types->ints.end());
  if (const GgufValue* merges = file.find(t + "merges"); merges != nullptr && merges->elem_type == GgufType::STRING) {
    v.merges = merges->strings;
  }
  if (const GgufValue* scores = file.find(t + "scores"); scores != nullptr && scores->floats.size() == v.tokens.size()) {
    v.scores.assign(scores->floats.begin(), scores->floats.end());
  } else {
    // Without SentencePiece scores earlier ids win, as for the other vocabularies.
    v.scores.resize(v.tokens.size());
    for (size_t id = 0; id < v.tokens.size(); ++id) v.scores[id] = -static_cast<float>(id);
  }

  const auto id_below_n_vocab = [&](const char* key, uint32_t* id) {
    return file.get_u32(t + key, id) && *id < v.tokens.size();
  };
  if (!id_below_n_vocab("bos_token_id", &v.bos) || !id_below_n_vocab("eos_token_id", &v.eos)) {
    return missing(path, t + "bos_token_id/eos_token_id", "below the vocabulary size");
  }
  if (!id_below_n_vocab("unknown_token_id", &v.unk)) v.unk = v.bos;
  if (!id_below_n_vocab("padding_token_id", &v.pad)) v.pad = 0;
  uint32_t id = 0;
  if (id_below_n_vocab("eot_token_id", &id)) v.eot = id;
  if (id_below_n_vocab("mask_token_id", &id)) v.mask = id;
  set_turn_markers(&v);
  file.get_string("tokenizer.chat_template", &v.chat_template);
  *out = std::move(v);
  return Status();
}

}  // namespace lf::make_model
