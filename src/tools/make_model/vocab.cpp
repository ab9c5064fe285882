#include "vocab.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace lf::make_model {
namespace {

const char* const kSpace = "\xE2\x96\x81";  // "▁" (U+2581), Gemma's stand-in for a space

// Enough everyday words that prompts like "The capital of France is" tokenize into words.
const char* const kWords[] = {
    "The", "capital", "of", "France", "is", "Paris", "Berlin", "Germany", "Italy", "Rome", "city", "and", "the", "a",
    "in", "to", "Spain", "Madrid", "London", "England", "country", "largest", "river", "known", "for", "its", "on",
    "at", "by", "with", "from", "this", "that", "it", "was", "are", "has", "one", "two", "three", "yes", "no", "I",
    "you", "we", "he", "she", "they", "what", "where", "which", "who", "Hello", "hello", "world", "model", "user",
    "What", "A", "It", "In", "famous", "old", "new", "big", "small", "many", "people", "live", "there",
};

class VocabBuilder {
 public:
  explicit VocabBuilder(Vocab* v) : v_(v) {}

  int64_t add(const std::string& text, int32_t type) {
    const auto it = ids_.find(text);
    if (it != ids_.end()) return it->second;
    const int64_t id = static_cast<int64_t>(v_->tokens.size());
    ids_.emplace(text, id);
    v_->tokens.push_back(text);
    v_->types.push_back(type);
    return id;
  }

  // Makes `text` a token reachable from its first UTF-8 character through left-to-right merges
  // (prefix + next character), adding each missing prefix and its merge.
  void add_merged(const std::string& text) {
    size_t end = utf8_len(text, 0);
    std::string prefix = text.substr(0, end);
    add(prefix, kNormal);
    while (end < text.size()) {
      const size_t n = utf8_len(text, end);
      const std::string next = text.substr(end, n);
      add(next, kNormal);
      const std::string merged = prefix + next;
      if (!has(merged)) {
        v_->merges.push_back(prefix + " " + next);
        add(merged, kNormal);
      }
      prefix = merged;
      end += n;
    }
  }

  bool has(const std::string& text) const { return ids_.count(text) != 0; }

 private:
  static size_t utf8_len(const std::string& s, size_t at) {
    const auto c = static_cast<unsigned char>(s[at]);
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  }

  Vocab* v_;
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace

void set_turn_markers(Vocab* v) {
  // Gemma 4 names its turn markers <|turn>/<turn|>, Gemma 3 <start_of_turn>/<end_of_turn>.
  bool gemma4_turns = false;
  for (const std::string& token : v->tokens) gemma4_turns = gemma4_turns || token == "<turn|>";
  v->turn_open = gemma4_turns ? "<|turn>" : "<start_of_turn>";
  v->turn_close = gemma4_turns ? "<turn|>" : "<end_of_turn>";
}

Status build_synthetic_vocab(uint32_t n_vocab, Vocab* out) {
  Vocab v;
  VocabBuilder b(&v);
  // Ids 0..4 as in the real Gemma vocabularies.
  b.add("<pad>", kControl);
  b.add("<eos>", kControl);
  b.add("<bos>", kControl);
  b.add("<unk>", kUnknown);
  v.mask = b.add("<mask>", kControl);
  v.turn_open = "<|turn>";
  v.turn_close = "<turn|>";
  b.add(v.turn_open, kControl);
  v.eot = b.add(v.turn_close, kControl);
  v.pad = 0;
  v.eos = 1;
  v.bos = 2;
  v.unk = 3;

  // Newline runs are whole tokens in Gemma 4's pre-tokenizer (docs/tokenizer.md, "Gemma 4 BPE", step 3).
  for (std::string run = "\n"; run.size() <= 8; run += "\n") b.add(run, kNormal);
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    b.add(name, kByte);
  }
  b.add(kSpace, kNormal);
  for (char c = 0x21; c < 0x7F; ++c) b.add(std::string(1, c), kNormal);
  b.add_merged(std::string(kSpace) + kSpace + kSpace + kSpace);
  // Space-prefixed words first: lower merge ranks (and higher SPM scores, below) make "▁The"
  // win over the bare "The" chain inside a sentence.
  for (const char* w : kWords) b.add_merged(kSpace + std::string(w));
  for (const char* w : kWords) b.add_merged(w);

  const std::string filler = std::string(kSpace) + "w";
  b.add_merged(filler);

  const size_t fixed = v.tokens.size();
  if (n_vocab < fixed) {
    return Status(Code::invalid_argument, "--n-vocab " + std::to_string(n_vocab) +
                                              " is below the synthetic vocabulary's fixed part of " +
                                              std::to_string(fixed) + " tokens");
  }
  // Fillers "▁w0", "▁w1", ... each one merge away from an earlier token ("▁w12" = "▁w1" + "2").
  for (uint32_t k = 0; v.tokens.size() < n_vocab; ++k) {
    const std::string digits = std::to_string(k);
    const std::string prefix = filler + digits.substr(0, digits.size() - 1);
    const std::string last = digits.substr(digits.size() - 1);
    v.merges.push_back(prefix + " " + last);
    b.add(prefix + last, kNormal);
  }
  v.scores.resize(n_vocab);
  for (uint32_t id = 0; id < n_vocab; ++id) v.scores[id] = v.types[id] == kNormal ? -static_cast<float>(id) : 0.0f;
  *out = std::move(v);
  return Status();
}

Status load_gemma_vocab(const std::string& path, Vocab* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Code::io_error, "cannot read tokenizer json '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded()) return Status(Code::malformed, "'" + path + "' is not valid JSON");
  const auto model = doc.find("model");
  if (model == doc.end() || !model->is_object() || !model->contains("vocab") || !(*model)["vocab"].is_object() ||
      !model->contains("merges") || !(*model)["merges"].is_array()) {
    return Status(Code::malformed, "'" + path + "' has no model.vocab object and model.merges array");
  }

  Vocab v;
  const auto& vocab = (*model)["vocab"];
  v.tokens.resize(vocab.size());
  v.types.assign(vocab.size(), kNormal);
  std::vector<bool> seen(vocab.size(), false);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() >= vocab.size()) {
      return Status(Code::malformed, "model.vocab id of '" + it.key() + "' is not an id below the vocabulary size");
    }
    const auto id = it.value().get<size_t>();
    if (seen[id]) return Status(Code::malformed, "model.vocab id " + std::to_string(id) + " is used twice");
    seen[id] = true;
    v.tokens[id] = it.key();
    if (it.key().size() == 6 && it.key().compare(0, 3, "<0x") == 0 && it.key()[5] == '>') v.types[id] = kByte;
  }

  const auto added = doc.find("added_tokens");
  if (added != doc.end() && added->is_array()) {
    for (const auto& t : *added) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_unsigned() || !t.contains("content")) {
        return Status(Code::malformed, "an added_tokens entry has no numeric id and content");
      }
      const auto id = t["id"].get<size_t>();
      // Gemma 3 adds <image_soft_token> at 262144, past the text vocabulary the model embeds.
      if (id >= v.tokens.size()) continue;
      v.tokens[id] = t["content"].get<std::string>();
      v.types[id] = t.value("special", false) ? kControl : kUserDefined;
    }
  }

  v.merges.reserve((*model)["merges"].size());
  for (const auto& m : (*model)["merges"]) {
    if (m.is_string()) {
      v.merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      v.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return Status(Code::malformed, "model.merges entries must be \"a b\" strings or [a, b] pairs");
    }
  }

  // tokenizer.json has no SentencePiece scores; earlier ids win, as for the synthetic vocab.
  v.scores.resize(v.tokens.size());
  for (size_t id = 0; id < v.tokens.size(); ++id) v.scores[id] = -static_cast<float>(id);

  std::unordered_map<std::string, int64_t> ids;
  for (size_t id = 0; id < v.tokens.size(); ++id) ids.emplace(v.tokens[id], static_cast<int64_t>(id));
  auto id_of = [&](const char* text) { const auto it = ids.find(text); return it == ids.end() ? -1 : it->second; };
  set_turn_markers(&v);
  v.eot = id_of(v.turn_close.c_str());
  v.mask = id_of("<mask>");
  v.bos = 2;
  v.unk = 3;
  v.pad = 0;
  v.eos = v.eot >= 0 ? static_cast<uint32_t>(v.eot) : 1;
  *out = std::move(v);
  return Status();
}

}  // namespace lf::make_model
