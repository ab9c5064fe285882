// The Gemma tokenizer, built from a GGUF vocabulary and matching llama.cpp token for token
// (docs/gguf.md, "Tokenizer keys"; docs/tokenizer.md): "gemma4" vocabularies run
// SentencePiece-style BPE over merge ranks, "llama" (Gemma 3) vocabularies run SentencePiece score
// merging. Where published descriptions and llama.cpp differ, llama.cpp wins: its load-time token attribute
// fix-ups and its detokenizer's space clean-up for BPE vocabularies are reproduced on purpose.
//
// Example:
//   lf::Tokenizer tok;
//   LF_RETURN_IF_ERROR(lf::Tokenizer::from_gguf(gguf, &tok));
//   std::vector<int32_t> ids;
//   LF_RETURN_IF_ERROR(tok.tokenize("The capital of France is", /*add_bos=*/true,
//                                   /*parse_special=*/false, &ids));  // 2 818 5279 529 7001 563
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_reader.h"
#include "base/status.h"

namespace lf {

// llama.cpp's token attributes (bit flags, same values as llama_token_attr). A token can carry
// two of them: llama.cpp adds `control` to end-of-generation texts such as "</s>" that a
// converter marked user-defined.
namespace token_attr {
constexpr uint32_t undefined = 0;
constexpr uint32_t unknown = 1u << 0;
constexpr uint32_t unused = 1u << 1;
constexpr uint32_t normal = 1u << 2;
constexpr uint32_t control = 1u << 3;
constexpr uint32_t user_defined = 1u << 4;
constexpr uint32_t byte = 1u << 5;
}  // namespace token_attr

// GGUF tokenizer.ggml.token_type codes (docs/gguf.md, "Tokenizer keys").
enum class TokenType : int32_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

enum class TokenizerModel {
  gemma4_bpe,  // tokenizer.ggml.model "gemma4": merges by rank (docs/tokenizer.md, "Gemma 4 BPE")
  spm,         // tokenizer.ggml.model "llama": bigrams by score (docs/tokenizer.md, "Gemma 3 SentencePiece")
};

// Exact-text lookup from strings to int32 values over its own copy of the keys: one arena, one
// open-addressing table, so 514906 merges cost a few allocations and no per-key node.
class TextIndex {
 public:
  void reserve(size_t n_keys, size_t n_key_bytes);
  // Stores text -> value unless text is already present (the first value wins, as llama.cpp's
  // emplace does for duplicate merges). Returns false when the text was already present.
  bool insert(std::string_view text, int32_t value);
  // -1 when absent.
  int32_t find(std::string_view text) const;

 private:
  struct Entry {
    uint32_t offset;  // into arena_
    uint32_t length;
    int32_t value;
  };
  size_t slot_of(std::string_view text) const;  // the slot holding text, or the empty one to use
  void grow();

  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;  // [power of two] entry index + 1; 0 = empty
};

// Bytes [begin, end) of a text.
struct ByteSpan {
  uint32_t begin;
  uint32_t end;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* (docs/gguf.md, "Tokenizer keys"). Errors name the key: unknown model,
  // missing tokens, missing merges (gemma4), arrays of the wrong type or shorter than the
  // vocabulary, duplicate token texts, special ids of the wrong GGUF type, a gemma4 vocabulary
  // without a BOS id.
  static Status from_gguf(const GgufFile& file, Tokenizer* out);

  // text (UTF-8 bytes) -> ids, appended to *out. add_bos adds the special tokens the vocabulary
  // asks for (add_bos_token, forced on for gemma4; add_eos_token), as llama.cpp's add_special does.
  // parse_special matches control and unknown token texts in the input (user-defined ones are
  // always matched; docs/tokenizer.md, "Special tokens and BOS"). Errors: a Gemma 3 byte with no
  // byte token (Code::not_found), a gemma4 input byte sequence beyond U+10FFFF
  // (Code::invalid_argument).
  Status tokenize(std::string_view text, bool add_bos, bool parse_special,
                  std::vector<int32_t>* out) const;

  // tokenize for a rendered chat: the template's own markers become control tokens, the text of
  // the messages (the untrusted byte spans) never does (docs/tokenizer.md, "Untrusted spans").
  // Outside the spans, as parse_special; a control, unknown or marker token whose match shares a
  // byte with a span stays text there; other user-defined tokens match everywhere, as llama.cpp
  // matches them with parse_special off. Spans must lie within text, sorted and not overlapping
  // (Code::invalid_argument otherwise); an empty span covers no byte and guards nothing.
  Status tokenize_untrusted(std::string_view text, bool add_bos, const std::vector<ByteSpan>& untrusted,
                            std::vector<int32_t>* out) const;

  // The most input bytes one token can stand for (the longest token text: a "▁" stands for a
  // one-byte space, a byte token for one byte), so a text of more than n × this many bytes
  // cannot be n tokens or fewer. 0 when there is no such bound: a BPE vocabulary missing a byte
  // token drops that byte, which no token stands for.
  size_t max_token_bytes() const { return max_token_bytes_; }

  // ids -> UTF-8 text appended to *out: "▁" becomes a space, byte tokens become their byte
  // (so byte runs reassemble into UTF-8), control and unknown tokens render only with
  // render_special, user-defined ones always verbatim. BPE (gemma4) vocabularies then get
  // llama.cpp's clean-up of " ." " ," " !" " ?" " 's" ... Error: an id outside the vocabulary.
  Status detokenize(const int32_t* ids, size_t n_ids, bool render_special, std::string* out) const;

  int32_t n_vocab() const { return static_cast<int32_t>(text_.size()); }
  int32_t bos() const { return bos_; }  // -1 when the vocabulary has none
  int32_t eos() const { return eos_; }
  TokenizerModel model() const { return model_; }
  // The vocabulary text of a token ("▁Hello", "<0x0A>", "<bos>"); id must be in range.
  const std::string& text(int32_t id) const { return text_[static_cast<size_t>(id)]; }
  uint32_t attr(int32_t id) const { return attr_[static_cast<size_t>(id)]; }
  float score(int32_t id) const { return score_[static_cast<size_t>(id)]; }
  // -1 when text is not a token.
  int32_t id_of(std::string_view text) const { return ids_.find(text); }

 private:
  struct Fragment {
    int32_t token;    // a special token, or -1 for raw text
    uint32_t offset;  // raw text: bytes [offset, offset + length) of the input
    uint32_t length;
  };
  // untrusted: sorted, disjoint, non-empty spans (checked by tokenize_untrusted).
  std::vector<Fragment> partition_special(std::string_view text, bool parse_special,
                                          const std::vector<ByteSpan>& untrusted = {}) const;
  Status encode_fragments(std::string_view text, bool add_bos, const std::vector<Fragment>& fragments,
                          std::vector<int32_t>* out) const;
  Status encode_bpe(std::string_view fragment, std::vector<int32_t>* out) const;
  Status encode_spm(std::string_view fragment, std::vector<int32_t>* out) const;
  Status spm_byte_token(uint8_t byte, int32_t* id) const;
  void append_piece(int32_t id, bool render_special, bool strip_one_space, std::string* out) const;
  void apply_llama_cpp_attr_fixups();  // tokenizer/vocab.cpp
  size_t longest_token_bound() const;  // max_token_bytes(); tokenizer/vocab.cpp
  void build_special_index();          // tokenizer/special.cpp
  bool is_guarded(int32_t id) const;   // never matched in an untrusted span; tokenizer/special.cpp

  TokenizerModel model_ = TokenizerModel::spm;
  std::vector<std::string> text_;  // [n_vocab]
  std::vector<float> score_;       // [n_vocab]
  std::vector<uint32_t> attr_;     // [n_vocab] token_attr bits
  TextIndex ids_;                  // text -> id
  TextIndex merges_;               // "left right" -> rank (gemma4)
  int32_t bos_ = -1, eos_ = -1;
  bool add_bos_ = true, add_eos_ = false, add_space_prefix_ = true, clean_spaces_ = false;
  size_t max_token_bytes_ = 0;

  // Control, user-defined and unknown tokens, longest text first (llama.cpp's partition order),
  // and a byte trie over their texts that says which of them occur in an input at all.
  std::vector<int32_t> special_;
  struct TrieNode {
    uint32_t first_child = 0;   // 0 = none (node 0 is the root, never a child)
    uint32_t next_sibling = 0;
    int32_t special_rank = -1;  // index into special_ of the token ending here
    uint8_t byte = 0;
  };
  std::vector<TrieNode> trie_;
};

}  // namespace lf
