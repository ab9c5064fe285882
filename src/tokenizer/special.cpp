// Special-token partitioning (docs/tokenizer.md, "Special tokens and BOS", llama.cpp's
// tokenizer_st_partition): before any merging, every literal occurrence of a control, user-defined
// or unknown token's text becomes that token. llama.cpp takes the tokens one at a time, longest
// text first, and splits every remaining raw fragment at each occurrence, left to right; we do the
// same, so overlaps resolve the same way. A byte trie over the special texts first finds which of
// them occur in the input at all, so the thousands of <unusedN> tokens cost nothing on ordinary
// text.
#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace lf {

namespace {

constexpr uint32_t kSpecialAttrs = token_attr::control | token_attr::user_defined | token_attr::unknown;

// Whether [begin, end) shares a byte with one of the sorted, disjoint, non-empty spans.
bool overlaps(const std::vector<ByteSpan>& spans, size_t begin, size_t end) {
  const auto first_ending_after = std::upper_bound(spans.begin(), spans.end(), begin,
                                                   [](size_t at, const ByteSpan& s) { return at < s.end; });
  return first_ending_after != spans.end() && first_ending_after->begin < end;
}

}  // namespace

// Control and unknown tokens, and the markers: Gemma 4 writes its turn, tool, thinking and
// channel markers as <|name>, <name|> or <|name|>, and its converter marks some of them
// (<|tool_call>, <|channel>, <|"|>, ...) user-defined rather than control (docs/tokenizer.md,
// "Untrusted spans"), so the form, not the attribute, says which a message must never produce.
bool Tokenizer::is_guarded(int32_t id) const {
  const std::string& t = text(id);
  if (attr(id) & (token_attr::control | token_attr::unknown)) return true;
  return t.size() >= 3 && t.front() == '<' && t.back() == '>' && (t[1] == '|' || t[t.size() - 2] == '|');
}

void Tokenizer::build_special_index() {
  special_.clear();
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if (attr_[static_cast<size_t>(id)] & kSpecialAttrs) special_.push_back(id);
  }
  // llama.cpp uses std::sort, which leaves equal lengths in an unspecified order; a stable
  // order (lower id first) is the same wherever equal-length texts cannot overlap, as in the
  // Gemma vocabularies (all "<...>" tags or runs of one character).
  std::stable_sort(special_.begin(), special_.end(),
                   [&](int32_t a, int32_t b) { return text(a).size() > text(b).size(); });

  trie_.assign(1, TrieNode{});
  for (size_t rank = 0; rank < special_.size(); ++rank) {
    uint32_t node = 0;
    for (const char c : text(special_[rank])) {
      const auto byte = static_cast<uint8_t>(c);
      uint32_t child = trie_[node].first_child;
      while (child != 0 && trie_[child].byte != byte) child = trie_[child].next_sibling;
      if (child == 0) {
        child = static_cast<uint32_t>(trie_.size());
        TrieNode fresh;
        fresh.byte = byte;
        fresh.next_sibling = trie_[node].first_child;
        trie_.push_back(fresh);
        trie_[node].first_child = child;
      }
      node = child;
    }
    trie_[node].special_rank = static_cast<int32_t>(rank);
  }
}

std::vector<Tokenizer::Fragment> Tokenizer::partition_special(std::string_view text, bool parse_special,
                                                              const std::vector<ByteSpan>& untrusted) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, static_cast<uint32_t>(text.size())});

  // occurs[rank]: the special text of that rank appears somewhere in the input.
  std::vector<uint8_t> occurs(special_.size(), 0);
  for (size_t start = 0; start < text.size(); ++start) {
    uint32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      const auto byte = static_cast<uint8_t>(text[i]);
      uint32_t child = trie_[node].first_child;
      while (child != 0 && trie_[child].byte != byte) child = trie_[child].next_sibling;
      if (child == 0) break;
      node = child;
      if (trie_[node].special_rank >= 0) occurs[static_cast<size_t>(trie_[node].special_rank)] = 1;
    }
  }

  std::vector<Fragment> next;
  for (size_t rank = 0; rank < special_.size(); ++rank) {
    if (!occurs[rank]) continue;
    const int32_t id = special_[rank];
    if (!parse_special && (attr(id) & (token_attr::control | token_attr::unknown))) continue;
    const bool guarded = !untrusted.empty() && is_guarded(id);
    const std::string& needle = this->text(id);
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const size_t end = size_t{f.offset} + f.length;
      const std::string_view window = text.substr(0, end);
      size_t pos = f.offset;
      while (pos < end) {
        size_t match = window.find(needle, pos);
        while (guarded && match != std::string_view::npos && overlaps(untrusted, match, match + needle.size())) {
          match = window.find(needle, match + 1);
        }
        if (match == std::string_view::npos) {
          next.push_back({-1, static_cast<uint32_t>(pos), static_cast<uint32_t>(end - pos)});
          break;
        }
        if (match > pos) next.push_back({-1, static_cast<uint32_t>(pos), static_cast<uint32_t>(match - pos)});
        next.push_back({id, 0, 0});
        pos = match + needle.size();
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace lf
