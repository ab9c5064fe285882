// Loading a Tokenizer from tokenizer.ggml.* (docs/gguf.md, "Tokenizer keys"), with the defaults and
// type checks of llama.cpp's llama_vocab::impl::load, and the token attribute fix-ups it applies
// after reading the token types (they decide which texts are special, so tokenization depends on
// them).
#include <algorithm>
#include <initializer_list>
#include <string>

#include "tokenizer/symbols.h"
#include "tokenizer/tokenizer.h"

namespace lf {

namespace {

constexpr const char* kModelKey = "tokenizer.ggml.model";
constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";
constexpr const char* kMergesKey = "tokenizer.ggml.merges";

Status key_error(std::string_view key, const std::string& what) {
  return Status(Code::malformed, std::string(key) + " " + what);
}

// An ARRAY of one of `elem_types` holding at least n_min elements, or nullptr when absent.
Status find_array(const GgufFile& file, std::string_view key, std::initializer_list<GgufType> elem_types,
                  uint64_t n_min, const GgufValue** out) {
  *out = file.find(key);
  if (*out == nullptr) return Status();
  const GgufValue& v = **out;
  if (v.type != GgufType::ARRAY ||
      std::find(elem_types.begin(), elem_types.end(), v.elem_type) == elem_types.end()) {
    std::string types;
    for (GgufType t : elem_types) types += std::string(types.empty() ? "" : " or ") + gguf_type_name(t);
    return key_error(key, "must be an array of " + types + ", got " +
                              (v.type == GgufType::ARRAY ? std::string("an array of ") + gguf_type_name(v.elem_type)
                                                         : std::string(gguf_type_name(v.type))));
  }
  if (v.count < n_min) {
    return key_error(key, "has " + std::to_string(v.count) + " entries, fewer than the " + std::to_string(n_min) +
                              " tokens of " + kTokensKey);
  }
  return Status();
}

// llama.cpp reads special ids as exactly UINT32; an id outside the vocabulary keeps the default.
Status read_token_id(const GgufFile& file, std::string_view key, int32_t n_vocab, int32_t* id) {
  if (*id >= n_vocab) *id = -1;
  const GgufValue* v = file.find(key);
  if (v == nullptr) return Status();
  if (v->type != GgufType::UINT32) {
    return key_error(key, std::string("must be UINT32, got ") + gguf_type_name(v->type));
  }
  if (v->u64 < static_cast<uint64_t>(n_vocab)) *id = static_cast<int32_t>(v->u64);
  return Status();
}

Status read_flag(const GgufFile& file, std::string_view key, bool* flag) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return Status();
  if (v->type != GgufType::BOOL) return key_error(key, std::string("must be BOOL, got ") + gguf_type_name(v->type));
  *flag = v->u64 != 0;
  return Status();
}

uint32_t attr_of_type(int64_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::unknown: return token_attr::unknown;
    case TokenType::unused: return token_attr::unused;
    case TokenType::normal: return token_attr::normal;
    case TokenType::control: return token_attr::control;
    case TokenType::user_defined: return token_attr::user_defined;
    case TokenType::byte: return token_attr::byte;
    default: return token_attr::undefined;
  }
}

// Texts llama.cpp takes for fill-in-the-middle markers when the GGUF names none; it marks the
// first one it finds control (we take the lowest id: its hash-map order is not portable).
struct FimCategory {
  const char* key;
  std::initializer_list<const char*> texts;
};
const FimCategory kFimCategories[] = {
    {"tokenizer.ggml.fim_pre_token_id",
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}},
    {"tokenizer.ggml.fim_suf_token_id",
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}},
    {"tokenizer.ggml.fim_mid_token_id",
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}},
    {"tokenizer.ggml.fim_pad_token_id", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {"tokenizer.ggml.fim_rep_token_id", {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {"tokenizer.ggml.fim_sep_token_id", {"<|file_sep|>"}},
};

// End-of-generation texts: llama.cpp makes each of them a control token.
const char* const kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
};

}  // namespace

Status Tokenizer::from_gguf(const GgufFile& file, Tokenizer* out) {
  Tokenizer t;

  const GgufValue* model = file.find(kModelKey);
  if (model == nullptr) return Status(Code::not_found, std::string("the GGUF has no ") + kModelKey);
  if (model->type != GgufType::STRING) return key_error(kModelKey, "must be a STRING");
  if (model->str == "gemma4") {
    t.model_ = TokenizerModel::gemma4_bpe;
  } else if (model->str == "llama") {
    t.model_ = TokenizerModel::spm;
  } else {
    return Status(Code::unsupported, std::string(kModelKey) + " is '" + model->str +
                                         "'; only Gemma's \"gemma4\" (BPE) and \"llama\" (SentencePiece) are supported");
  }
  const bool bpe = t.model_ == TokenizerModel::gemma4_bpe;

  const GgufValue* tokens = nullptr;
  LF_RETURN_IF_ERROR(find_array(file, kTokensKey, {GgufType::STRING}, 0, &tokens));
  if (tokens == nullptr) return Status(Code::not_found, std::string("the GGUF has no ") + kTokensKey);
  if (tokens->strings.empty()) return key_error(kTokensKey, "is empty");
  if (tokens->strings.size() >= static_cast<size_t>(INT32_MAX)) return key_error(kTokensKey, "has too many tokens");
  const size_t n_vocab = tokens->strings.size();

  const GgufValue* scores = nullptr;
  const GgufValue* types = nullptr;
  LF_RETURN_IF_ERROR(find_array(file, kScoresKey, {GgufType::FLOAT32, GgufType::INT32}, n_vocab, &scores));
  LF_RETURN_IF_ERROR(find_array(file, kTypesKey, {GgufType::INT32}, n_vocab, &types));

  size_t text_bytes = 0;
  for (const std::string& s : tokens->strings) text_bytes += s.size();
  t.text_.reserve(n_vocab);
  t.score_.assign(n_vocab, 0.0f);
  t.attr_.assign(n_vocab, token_attr::normal);
  t.ids_.reserve(n_vocab, text_bytes);
  for (size_t id = 0; id < n_vocab; ++id) {
    const std::string& s = tokens->strings[id];
    // llama.cpp's own stand-in, so that an empty entry neither matches nor collides.
    t.text_.push_back(s.empty() ? "[EMPTY_" + std::to_string(id) + "]" : s);
    if (!t.ids_.insert(t.text_.back(), static_cast<int32_t>(id))) {
      return key_error(kTokensKey, "has the text '" + t.text_.back() + "' twice (ids " +
                                       std::to_string(t.ids_.find(t.text_.back())) + " and " + std::to_string(id) + ")");
    }
    if (scores != nullptr) {
      t.score_[id] = scores->elem_type == GgufType::FLOAT32 ? static_cast<float>(scores->floats[id])
                                                            : static_cast<float>(scores->ints[id]);
    }
    if (types != nullptr) t.attr_[id] = attr_of_type(types->ints[id]);
  }

  if (bpe) {
    const GgufValue* merges = nullptr;
    LF_RETURN_IF_ERROR(find_array(file, kMergesKey, {GgufType::STRING}, 0, &merges));
    if (merges == nullptr) {
      return Status(Code::not_found, std::string("a gemma4 vocabulary needs ") + kMergesKey + ", and the GGUF has none");
    }
    size_t merge_bytes = 0;
    for (const std::string& m : merges->strings) merge_bytes += m.size();
    t.merges_.reserve(merges->strings.size(), merge_bytes);
    // Keyed by the entry itself: llama.cpp splits "left right" at the first space after the
    // first byte, and a lookup key left + " " + right rebuilds exactly that entry. Duplicates
    // keep their first (lowest) rank.
    for (size_t rank = 0; rank < merges->strings.size(); ++rank) {
      t.merges_.insert(merges->strings[rank], static_cast<int32_t>(rank));
    }
  }

  const int32_t n = static_cast<int32_t>(n_vocab);
  // SentencePiece defaults of llama.cpp (bos 1, eos 2, unk 0): wrong for Gemma, which is why
  // Gemma files carry the keys (docs/gguf.md, "Tokenizer keys").
  t.bos_ = bpe ? -1 : 1;
  t.eos_ = bpe ? -1 : 2;
  LF_RETURN_IF_ERROR(read_token_id(file, "tokenizer.ggml.bos_token_id", n, &t.bos_));
  LF_RETURN_IF_ERROR(read_token_id(file, "tokenizer.ggml.eos_token_id", n, &t.eos_));
  // Unknown and padding ids play no part in tokenizing; checked only so a mistyped key fails
  // here as it does in llama.cpp.
  for (const char* key : {"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"}) {
    int32_t unused_id = -1;
    LF_RETURN_IF_ERROR(read_token_id(file, key, n, &unused_id));
  }

  t.add_bos_ = !bpe;
  t.add_eos_ = false;
  t.add_space_prefix_ = !bpe;
  t.clean_spaces_ = bpe;
  LF_RETURN_IF_ERROR(read_flag(file, "tokenizer.ggml.add_bos_token", &t.add_bos_));
  LF_RETURN_IF_ERROR(read_flag(file, "tokenizer.ggml.add_eos_token", &t.add_eos_));
  LF_RETURN_IF_ERROR(read_flag(file, "tokenizer.ggml.add_space_prefix", &t.add_space_prefix_));
  if (bpe) {
    // llama.cpp forces BOS on for Gemma 4 whatever the file says, and asserts it exists.
    t.add_bos_ = true;
    if (t.bos_ < 0) {
      return Status(Code::not_found, "a gemma4 vocabulary needs tokenizer.ggml.bos_token_id (a UINT32 below " +
                                         std::to_string(n) + "): Gemma 4 always starts with BOS");
    }
  }
  if (t.add_eos_ && t.eos_ < 0) {
    return Status(Code::not_found, "tokenizer.ggml.add_eos_token is set but the vocabulary has no EOS id");
  }

  for (const FimCategory& fim : kFimCategories) {
    int32_t id = -1;
    LF_RETURN_IF_ERROR(read_token_id(file, fim.key, n, &id));
    if (id >= 0) continue;
    int32_t first = -1;
    for (const char* text : fim.texts) {
      const int32_t found = t.ids_.find(text);
      if (found >= 0 && (first < 0 || found < first)) first = found;
    }
    if (first >= 0) t.attr_[static_cast<size_t>(first)] |= token_attr::control;
  }
  t.apply_llama_cpp_attr_fixups();
  t.build_special_index();
  t.max_token_bytes_ = t.longest_token_bound();
  *out = std::move(t);
  return Status();
}

size_t Tokenizer::longest_token_bound() const {
  if (model_ == TokenizerModel::gemma4_bpe) {
    for (int byte = 0; byte < 256; ++byte) {
      if (ids_.find(tok::ByteTokenName(static_cast<uint8_t>(byte)).view()) < 0) return 0;
    }
  }
  size_t longest = 0;
  for (const std::string& piece : text_) longest = std::max(longest, piece.size());
  return longest;
}

// The text-based fix-ups of llama_vocab::impl::load after the FIM markers, in its order.
void Tokenizer::apply_llama_cpp_attr_fixups() {
  auto attr_of = [&](const char* text) -> uint32_t* {
    const int32_t id = ids_.find(text);
    return id < 0 ? nullptr : &attr_[static_cast<size_t>(id)];
  };
  for (const char* text : kEogTexts) {
    if (uint32_t* a = attr_of(text)) *a |= token_attr::control;
  }
  // gpt-oss markers are always rendered.
  for (const char* text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (uint32_t* a = attr_of(text)) *a = token_attr::user_defined;
  }
  // Every text below is an end-of-generation text, so "present" is "in llama.cpp's EOG set".
  const bool has_call = attr_of("<|call|>") || attr_of("<|calls|>");
  if (uint32_t* end = attr_of("<|end|>")) {
    if ((attr_of("<|return|>") && has_call) || (has_call && attr_of("<|flush|>"))) *end = token_attr::user_defined;
  }
  // Gemma 4 (with <|tool_response>) keeps "</s>" as ordinary text.
  if (uint32_t* s = attr_of("</s>")) {
    if (attr_of("<|tool_response>")) *s = token_attr::normal;
  }
}

}  // namespace lf
