// What the two Gemma tokenizers share: UTF-8 characters as linked symbols, the merge loop over
// a priority queue of adjacent pairs, and byte-token names, all with llama.cpp's conventions
// (they must cut malformed UTF-8 and order ties exactly as llama.cpp does).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <string_view>
#include <vector>

namespace lf::tok {

// Bytes in the sequence a lead byte announces (1 for continuation bytes), from its high nibble
// (llama.cpp's unicode_len_utf8).
inline size_t utf8_sequence_length(char lead) {
  static constexpr uint8_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLength[static_cast<uint8_t>(lead) >> 4];
}

// "<0xHH>" (upper-case hex), the byte-fallback token of a byte.
struct ByteTokenName {
  char chars[6];
  explicit ByteTokenName(uint8_t byte) : chars{'<', '0', 'x', hex(byte >> 4), hex(byte & 15), '>'} {}
  std::string_view view() const { return std::string_view(chars, sizeof chars); }

 private:
  static char hex(int nibble) { return "0123456789ABCDEF"[nibble]; }
};

// One UTF-8 character, or the merge of several, linked to its live neighbours.
struct Symbol {
  int32_t prev;
  int32_t next;    // -1 at the end of the text
  uint32_t start;  // byte offset in the text
  uint32_t n;      // byte length; 0 once merged into its left neighbour

  std::string_view in(std::string_view text) const { return text.substr(start, n); }
};

// text -> one symbol per UTF-8 character (a truncated sequence at the end is cut short).
inline void split_into_symbols(std::string_view text, std::vector<Symbol>* symbols) {
  symbols->clear();
  for (uint32_t offset = 0; offset < text.size();) {
    const auto n = static_cast<uint32_t>(std::min(utf8_sequence_length(text[offset]), text.size() - offset));
    const auto index = static_cast<int32_t>(symbols->size());
    symbols->push_back({index - 1, offset + n == text.size() ? -1 : index + 1, offset, n});
    offset += n;
  }
}

// Queues every adjacent pair, then merges the best pair until none is left. Bigram has left,
// right and size (left.n + right.n when queued: a different sum later means a stale pair);
// try_queue(left, right) pushes the pair if the vocabulary allows it (either index may be -1).
template <typename Bigram, typename Less, typename TryQueue>
void merge_symbols(std::vector<Symbol>& symbols, std::priority_queue<Bigram, std::vector<Bigram>, Less>& queue,
                   TryQueue try_queue) {
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_queue(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[static_cast<size_t>(b.left)];
    Symbol& r = symbols[static_cast<size_t>(b.right)];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = b.left;
    try_queue(l.prev, b.left);
    try_queue(b.left, l.next);
  }
}

}  // namespace lf::tok
