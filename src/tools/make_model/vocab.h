// Token tables for the tokenizer section (docs/gguf.md, "Tokenizer keys"; docs/tokenizer.md): a
// synthetic English-ish vocabulary whose words are reachable through merges, or the real Gemma
// vocabulary from tokenizer.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace lf::make_model {

// llama.cpp token types (include/llama.h).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6 };

struct Vocab {
  std::vector<std::string> tokens;  // [n_vocab], id = index
  std::vector<int32_t> types;       // [n_vocab]
  std::vector<float> scores;        // [n_vocab], SPM merge priority (gemma3): higher merges first
  std::vector<std::string> merges;  // "left right", rank = index (gemma4 BPE)
  uint32_t bos = 2, eos = 1, unk = 3, pad = 0;
  int64_t eot = -1, mask = -1;      // -1 = the vocabulary has no such token
  std::string turn_open, turn_close;  // chat-template markers, control tokens of this vocab
  std::string tokenizer_model;        // the tokenizer.ggml.model it is for, "gemma4" (BPE) or "llama" (SPM);
                                      // empty: either (both its merges and its scores are filled)
  std::string chat_template;          // the vocabulary file's own template; empty when it has none
};

// turn_open/turn_close: Gemma 4's markers when the vocabulary has "<turn|>", else Gemma 3's.
void set_turn_markers(Vocab* v);

// Errors: Code::invalid_argument when n_vocab is below the size of the fixed part.
Status build_synthetic_vocab(uint32_t n_vocab, Vocab* out);

// Reads model.vocab / model.merges / added_tokens of a Hugging Face tokenizer.json.
// Errors: Code::io_error (unreadable), Code::malformed (not the expected JSON shape).
Status load_gemma_vocab(const std::string& tokenizer_json_path, Vocab* out);

// Reads the tokenizer keys of a GGUF (tokens, types, merges or scores, the special ids and the
// chat template), such as llama.cpp's vocabulary-only files.
// Errors: Code::io_error (unreadable), Code::malformed (not a GGUF, or a key missing or mistyped).
Status load_gguf_vocab(const std::string& path, Vocab* out);

}  // namespace lf::make_model
