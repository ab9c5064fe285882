// TextIndex: string -> int32 lookup for the vocabulary (262144 texts) and the merges (514906
// "left right" pairs). Linear probing over a power-of-two table kept at most half full.
#include <cstring>

#include "tokenizer/tokenizer.h"

namespace lf {

namespace {

// FNV-1a, 64-bit: vocabulary texts are short, and 32-bit size_t hosts (wasm) still get good
// low bits to mask.
uint64_t hash_text(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

void TextIndex::reserve(size_t n_keys, size_t n_key_bytes) {
  arena_.reserve(n_key_bytes);
  entries_.reserve(n_keys);
  size_t n_slots = 16;
  while (n_slots < 2 * n_keys) n_slots *= 2;
  if (n_slots > slots_.size()) {
    slots_.assign(n_slots, 0);
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      slots_[slot_of(std::string_view(arena_).substr(e.offset, e.length))] = static_cast<uint32_t>(i + 1);
    }
  }
}

size_t TextIndex::slot_of(std::string_view text) const {
  const size_t mask = slots_.size() - 1;
  for (size_t s = static_cast<size_t>(hash_text(text)) & mask;; s = (s + 1) & mask) {
    const uint32_t slot = slots_[s];
    if (slot == 0) return s;
    const Entry& e = entries_[slot - 1];
    if (e.length == text.size() && std::memcmp(arena_.data() + e.offset, text.data(), text.size()) == 0) return s;
  }
}

void TextIndex::grow() { reserve(entries_.size() + 1 + entries_.size() / 2, arena_.size()); }

bool TextIndex::insert(std::string_view text, int32_t value) {
  if (2 * (entries_.size() + 1) > slots_.size()) grow();
  const size_t s = slot_of(text);
  if (slots_[s] != 0) return false;
  entries_.push_back({static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(text.size()), value});
  arena_.append(text);
  slots_[s] = static_cast<uint32_t>(entries_.size());
  return true;
}

int32_t TextIndex::find(std::string_view text) const {
  if (slots_.empty()) return -1;
  const uint32_t slot = slots_[slot_of(text)];
  return slot == 0 ? -1 : entries_[slot - 1].value;
}

}  // namespace lf
