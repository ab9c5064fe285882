// Gemma 4 BPE (docs/tokenizer.md, "Gemma 4 BPE"; llama.cpp's llm_tokenizer_bpe_session with the "gemma4"
// pre-tokenizer): spaces are already "▁"; the text is cut into runs of "\n" and runs of
// anything else, and each run is merged pair by pair, lowest merge rank first (ties: leftmost),
// over linked UTF-8 characters with a priority queue: O(n log n) per run.
#include <algorithm>
#include <queue>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/symbols.h"

namespace lf {

namespace {

struct Bigram {
  int32_t rank;
  int32_t left;
  int32_t right;
  uint32_t size;
};

struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// llama.cpp runs the text through its code point decoder before splitting: each byte that does
// not start a (loosely) well-formed sequence becomes U+FFFD, then everything is re-encoded.
Status normalize_utf8(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  const auto at = [&](size_t i) { return static_cast<uint8_t>(in[i]); };
  const auto cont = [&](size_t i) { return i < in.size() && (at(i) & 0xC0) == 0x80; };
  for (size_t i = 0; i < in.size();) {
    const uint8_t b = at(i);
    uint32_t cpt = 0xFFFD;
    size_t len = 1;
    if (!(b & 0x80)) {
      cpt = b;
    } else if (!(b & 0x40)) {
      // a stray continuation byte
    } else if (!(b & 0x20)) {
      if (cont(i + 1)) cpt = ((b & 0x1Fu) << 6) | (at(i + 1) & 0x3Fu), len = 2;
    } else if (!(b & 0x10)) {
      if (cont(i + 1) && cont(i + 2)) {
        cpt = ((b & 0x0Fu) << 12) | ((at(i + 1) & 0x3Fu) << 6) | (at(i + 2) & 0x3Fu), len = 3;
      }
    } else if (!(b & 0x08)) {
      if (cont(i + 1) && cont(i + 2) && cont(i + 3)) {
        cpt = ((b & 0x07u) << 18) | ((at(i + 1) & 0x3Fu) << 12) | ((at(i + 2) & 0x3Fu) << 6) | (at(i + 3) & 0x3Fu);
        len = 4;
      }
    }
    i += len;
    if (cpt <= 0x7F) {
      out->push_back(static_cast<char>(cpt));
    } else if (cpt <= 0x7FF) {
      out->push_back(static_cast<char>(0xC0 | (cpt >> 6)));
      out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
    } else if (cpt <= 0xFFFF) {
      out->push_back(static_cast<char>(0xE0 | (cpt >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
    } else if (cpt <= 0x10FFFF) {
      out->push_back(static_cast<char>(0xF0 | (cpt >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
    } else {
      // llama.cpp throws here; the text cannot be tokenized.
      return Status(Code::invalid_argument, "the text has a 4-byte sequence at byte " + std::to_string(i - len) +
                                                " that encodes a code point beyond U+10FFFF");
    }
  }
  return Status();
}

}  // namespace

Status Tokenizer::encode_bpe(std::string_view fragment, std::vector<int32_t>* out) const {
  std::string text;
  LF_RETURN_IF_ERROR(normalize_utf8(fragment, &text));

  std::vector<tok::Symbol> symbols;
  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
  std::string key;

  for (size_t run_start = 0; run_start < text.size();) {
    const bool newlines = text[run_start] == '\n';
    size_t run_end = run_start;
    while (run_end < text.size() && (text[run_end] == '\n') == newlines) ++run_end;
    const std::string_view run = std::string_view(text).substr(run_start, run_end - run_start);
    run_start = run_end;

    // A run of newlines that is itself a token is never split (llama.cpp PR 21343).
    if (newlines) {
      const int32_t id = ids_.find(run);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
    }

    tok::split_into_symbols(run, &symbols);
    tok::merge_symbols(symbols, queue, [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return;
      const tok::Symbol& l = symbols[static_cast<size_t>(left)];
      const tok::Symbol& r = symbols[static_cast<size_t>(right)];
      key.assign(l.in(run)).append(1, ' ').append(r.in(run));
      const int32_t rank = merges_.find(key);
      if (rank >= 0) queue.push({rank, left, right, l.n + r.n});
    });

    for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
      const std::string_view piece = symbols[static_cast<size_t>(i)].in(run);
      const int32_t id = ids_.find(piece);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
      // Byte fallback; a byte without a <0xHH> token is dropped, as llama.cpp does.
      for (const char c : piece) {
        const int32_t byte_id = ids_.find(tok::ByteTokenName(static_cast<uint8_t>(c)).view());
        if (byte_id >= 0) out->push_back(byte_id);
      }
    }
  }
  return Status();
}

}  // namespace lf
