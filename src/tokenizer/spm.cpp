// Gemma 3 SentencePiece merging (docs/tokenizer.md, "Gemma 3 SentencePiece"; llama.cpp's
// llm_tokenizer_spm_session): no pre-split; adjacent symbols whose concatenation is a vocabulary
// token are queued with that token's score, the highest score merges first (ties: leftmost), O(n
// log n) per fragment.
//
// docs/tokenizer.md, "Gemma 3 SentencePiece", also describes re-segmenting an unknown merged symbol
// through its recorded halves. In llama.cpp that branch can never run: a pair is only ever merged
// when its text is a token, so every final symbol is either a token or a single character that was
// never merged. What is left is the byte fallback, which is an error when a byte has no token.
#include <algorithm>
#include <queue>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/symbols.h"

namespace lf {

namespace {

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t size;
};

struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

// <0xHH>, else the one-byte text itself (llama.cpp's byte_to_token for SentencePiece).
Status Tokenizer::spm_byte_token(uint8_t byte, int32_t* id) const {
  *id = ids_.find(tok::ByteTokenName(byte).view());
  if (*id < 0 && byte != 0) *id = ids_.find(std::string_view(reinterpret_cast<const char*>(&byte), 1));
  if (*id >= 0) return Status();
  return Status(Code::not_found, "the text needs byte " + std::string(tok::ByteTokenName(byte).view()) +
                                     ", which this SentencePiece vocabulary lacks (no byte token, no one-byte token)");
}

Status Tokenizer::encode_spm(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<tok::Symbol> symbols;
  tok::split_into_symbols(text, &symbols);
  if (symbols.empty()) return Status();
  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
  tok::merge_symbols(symbols, queue, [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const tok::Symbol& l = symbols[static_cast<size_t>(left)];
    const tok::Symbol& r = symbols[static_cast<size_t>(right)];
    const int32_t id = ids_.find(text.substr(l.start, l.n + r.n));
    if (id >= 0) queue.push({score(id), left, right, l.n + r.n});
  });

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const std::string_view piece = symbols[static_cast<size_t>(i)].in(text);
    const int32_t id = ids_.find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (const char c : piece) {
      int32_t byte_id = -1;
      LF_RETURN_IF_ERROR(spm_byte_token(static_cast<uint8_t>(c), &byte_id));
      out->push_back(byte_id);
    }
  }
  return Status();
}

}  // namespace lf
