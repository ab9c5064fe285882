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

// The length every C ABI and fragment offset can hold.
Status check_length(std::string_view text) {
  if (text.size() > UINT32_MAX / 4) {
    return Status(Code::invalid_argument, "text of " + std::to_string(text.size()) + " bytes is too long to tokenize");
  }
  return Status();
}

}  // namespace

Status Tokenizer::tokenize(std::string_view text, bool add_bos, bool parse_special, std::vector<int32_t>* out) const {
  LF_RETURN_IF_ERROR(check_length(text));
  return encode_fragments(text, add_bos, partition_special(text, parse_special), out);
}

Status Tokenizer::tokenize_untrusted(std::string_view text, bool add_bos, const std::vector<ByteSpan>& untrusted,
                                     std::vector<int32_t>* out) const {
  LF_RETURN_IF_ERROR(check_length(text));
  std::vector<ByteSpan> spans;
  spans.reserve(untrusted.size());
  uint32_t previous_end = 0;
  for (size_t i = 0; i < untrusted.size(); ++i) {
    const ByteSpan& s = untrusted[i];
    const std::string where = "untrusted span " + std::to_string(i) + " [" + std::to_string(s.begin) + ", " +
                              std::to_string(s.end) + ")";
    if (s.begin > s.end || s.end > text.size()) {
      return Status(Code::invalid_argument, where + " is not within the text of " + std::to_string(text.size()) + " bytes");
    }
    if (s.begin < previous_end) {
      return Status(Code::invalid_argument, where + " starts before the previous span's end " +
                                                std::to_string(previous_end) + ": spans must be sorted and disjoint");
    }
    previous_end = s.end;
    if (s.begin < s.end) spans.push_back(s);
  }
  return encode_fragments(text, add_bos, partition_special(text, /*parse_special=*/true, spans), out);
}

Status Tokenizer::encode_fragments(std::string_view text, bool add_bos, const std::vector<Fragment>& fragments,
                                   std::vector<int32_t>* out) const {
  const bool add_special = add_bos && add_bos_;
  if (add_special) {
    if (bos_ < 0) return Status(Code::failed_precondition, "the vocabulary asks for BOS but has no valid BOS id");
    out->push_back(bos_);
  }

  // Gemma 3 only: a space before text that starts the input or follows a special token, when
  // add_space_prefix is on (Gemma files turn it off).
  bool prev_special = true;
  std::string piece;
  for (const Fragment& f : fragments) {
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
