// ids -> text as llama.cpp's llama_detokenize renders it (remove_special off): each token's
// piece by attribute, then, for BPE (gemma4) vocabularies, llama.cpp's clean-up of spaces
// before punctuation and contractions (clean_spaces), byte for byte.
#include <string>

#include "tokenizer/tokenizer.h"

namespace lf {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// llama.cpp's three clean_spaces passes over text[0, n), in place as it does them (each pass
// reads text[i - 1] after earlier writes may have moved it: kept so results match).
size_t clean_spaces(char* text, size_t n) {
  size_t total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {  // " ?", " !", " .", " ,"
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
    text[total++] = x;
  }
  const size_t n2 = total;
  total = n2 ? 1 : 0;
  for (size_t i = 1; i < n2; ++i) {  // " ' " -> "'"
    const char x = text[i];
    if (x == '\'' && i + 1 < n2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
      total--;
      text[++i] = '\0';
    }
    text[total++] = x;
  }
  const size_t n3 = total;
  total = n3 ? 1 : 0;
  for (size_t i = 1; i < n3; ++i) {  // " 's", " 'm", " 're", " 've" lose the space
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        total--;
      } else if (i + 2 < n3 && ((x1 == 'r' && text[i + 2] == 'e') || (x1 == 'v' && text[i + 2] == 'e'))) {
        total--;
      }
    }
    text[total++] = x;
  }
  return total;
}

}  // namespace

void Tokenizer::append_piece(int32_t id, bool render_special, bool strip_one_space, std::string* out) const {
  const uint32_t a = attr(id);
  if (!render_special && (a & (token_attr::control | token_attr::unknown))) return;
  std::string piece;
  if (a & (token_attr::control | token_attr::unknown | token_attr::user_defined)) {
    piece = text(id);
  } else if (a & token_attr::normal) {
    const std::string& t = text(id);
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
        piece.push_back(' ');
        i += 2;
      } else {
        piece.push_back(t[i]);
      }
    }
  } else if (a & token_attr::byte) {
    // "<0xHH>": llama.cpp reads the two characters after "<0x" with strtol.
    const std::string& t = text(id);
    int value = 0;
    for (size_t i = 3; i < 5 && i < t.size() && hex_value(t[i]) >= 0; ++i) value = value * 16 + hex_value(t[i]);
    piece.push_back(static_cast<char>(value));
  }
  // Unused and undefined tokens render as nothing.
  const size_t skip = strip_one_space && !piece.empty() && piece[0] == ' ' ? 1 : 0;
  out->append(piece, skip, std::string::npos);
}

Status Tokenizer::detokenize(const int32_t* ids, size_t n_ids, bool render_special, std::string* out) const {
  const size_t begin = out->size();
  for (size_t i = 0; i < n_ids; ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab()) {
      out->resize(begin);
      return Status(Code::invalid_argument, "token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                                                " is outside the vocabulary of " + std::to_string(n_vocab()));
    }
    // With add_space_prefix the tokenizer added a space before the text: the first piece drops it.
    append_piece(ids[i], render_special, i == 0 && add_space_prefix_, out);
  }
  if (clean_spaces_) out->resize(begin + clean_spaces(out->data() + begin, out->size() - begin));
  return Status();
}

}  // namespace lf
