// Text -> ids, the part both Gemma tokenizers share (docs/tokenizer.md, "Special tokens and BOS", llama.cpp's
// llama_vocab::impl::tokenize): special-token partitioning, BOS, spaces as "▁", then each raw
// fragment through the vocabulary's own algorithm (tokenizer/bpe.cpp / tokenizer/spm.cpp).
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace lf {

namespace {

// SentencePiece's visible space, U+2581.
void escape_spaces(std::string_view text, std::string* out) {
  out->clear();
  for (const char c : text) {
    if (c == ' ') {
      out->append("\xE2\x96\x81");
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

Status Tokenizer::tokenize(std::string_view text, bool add_bos, bool parse_special, std::vector<int32_t>* out) const {
  if (text.size() > UINT32_MAX / 4) {
    return Status(Code::invalid_argument, "text of " + std::to_string(text.size()) + " bytes is too long to tokenize");
  }
  const bool add_special = add_bos && add_bos_;
  if (add_special) {
    if (bos_ < 0) return Status(Code::failed_precondition, "the vocabulary asks for BOS but has no valid BOS id");
    out->push_back(bos_);
  }

  // Gemma 3 only: a space before text that starts the input or follows a special token, when
  // add_space_prefix is on (Gemma files turn it off).
  bool prev_special = true;
  std::string piece;
  for (const Fragment& f : partition_special(text, parse_special)) {
    if (f.token >= 0) {
      out->push_back(f.token);
      prev_special = true;
      continue;
    }
    std::string_view raw = text.substr(f.offset, f.length);
    if (model_ == TokenizerModel::spm) {
      escape_spaces(add_space_prefix_ && prev_special ? " " + std::string(raw) : std::string(raw), &piece);
      LF_RETURN_IF_ERROR(encode_spm(piece, out));
    } else {
      escape_spaces(raw, &piece);
      LF_RETURN_IF_ERROR(encode_bpe(piece, out));
    }
    prev_special = false;
  }

  if (add_special && add_eos_) out->push_back(eos_);
  return Status();
}

}  // namespace lf
