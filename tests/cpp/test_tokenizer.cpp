// Tokenizer on small in-memory vocabularies, every expected id derived by hand from docs/tokenizer.md and
// llama.cpp's llama-vocab.cpp: BPE merge order and ties, newline runs, byte fallback, special
// tokens, SentencePiece scores and prefix space, detokenization and load errors.
#include <catch2/catch.hpp>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace {

using lf::Code;
using lf::GgufWriter;
using lf::Status;
using lf::TokenType;
using lf::Tokenizer;
using Ids = std::vector<int32_t>;

const std::string kSp = "\xE2\x96\x81";  // "▁"

struct VocabBuilder {
  std::vector<std::string> text;
  std::vector<int32_t> type;
  std::vector<float> score;

  int32_t add(const std::string& t, TokenType ty = TokenType::normal, float s = 0.0f) {
    text.push_back(t);
    type.push_back(static_cast<int32_t>(ty));
    score.push_back(s);
    return static_cast<int32_t>(text.size() - 1);
  }
  // <0x00>..<0xFF>; returns the id of <0x00>.
  int32_t add_bytes() {
    const auto first = static_cast<int32_t>(text.size());
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      add(name, TokenType::byte);
    }
    return first;
  }
  void write(GgufWriter& w) const {
    w.set_array_string("tokenizer.ggml.tokens", text);
    w.set_array_i32("tokenizer.ggml.token_type", type);
    w.set_array_f32("tokenizer.ggml.scores", score);
  }
};

Status load(const GgufWriter& w, Tokenizer* tok) {
  const std::vector<uint8_t> bytes = w.write_buffer();
  lf::GgufFile file;
  LF_RETURN_IF_ERROR(lf::gguf_parse(bytes.data(), bytes.size(), bytes.size(), &file));
  return Tokenizer::from_gguf(file, tok);
}

Ids encode(const Tokenizer& tok, const std::string& text, bool add_bos = false, bool parse_special = false) {
  Ids ids;
  const Status s = tok.tokenize(text, add_bos, parse_special, &ids);
  INFO(s.message());
  REQUIRE(s.ok());
  return ids;
}

Ids encode_untrusted(const Tokenizer& tok, const std::string& text, const std::vector<lf::ByteSpan>& spans) {
  Ids ids;
  const Status s = tok.tokenize_untrusted(text, /*add_bos=*/false, spans, &ids);
  INFO(s.message());
  REQUIRE(s.ok());
  return ids;
}

std::string decode(const Tokenizer& tok, const Ids& ids, bool special = false) {
  std::string text;
  const Status s = tok.detokenize(ids.data(), ids.size(), special, &text);
  INFO(s.message());
  REQUIRE(s.ok());
  return text;
}

// A gemma4 vocabulary whose ids the tests below spell out.
struct Gemma4Fixture {
  VocabBuilder v;
  int32_t bos, unk, turn, tag, tag_b, nl, nl2, sp, a, b, c, ab, bc, abc, sp_a, sp_sp, dot, byte0, channel_end;
  std::vector<std::string> merges = {
      "b c",            // rank 0
      "a b",            // rank 1
      "a bc",           // rank 2
      kSp + " a",       // rank 3
      "ab c",           // rank 4
      kSp + " " + kSp,  // rank 5
  };
  GgufWriter w;

  explicit Gemma4Fixture(bool with_bytes = true) {
    v.add("<pad>", TokenType::control);
    v.add("<eos>", TokenType::control);
    bos = v.add("<bos>", TokenType::control);
    unk = v.add("<unk>", TokenType::unknown);
    turn = v.add("<|turn>", TokenType::control);
    tag = v.add("<tag>", TokenType::user_defined);
    tag_b = v.add("<tag>b", TokenType::user_defined);
    nl = v.add("\n");
    nl2 = v.add("\n\n");
    sp = v.add(kSp);
    a = v.add("a");
    b = v.add("b");
    c = v.add("c");
    ab = v.add("ab");
    bc = v.add("bc");
    abc = v.add("abc");
    sp_a = v.add(kSp + "a");
    sp_sp = v.add(kSp + kSp);
    dot = v.add(".");
    byte0 = with_bytes ? v.add_bytes() : -1;
    // A user-defined marker, as Gemma 4's converter marks <channel|>.
    channel_end = v.add("<ch|>", TokenType::user_defined);
    w.set_string("tokenizer.ggml.model", "gemma4");
    v.write(w);
    w.set_array_string("tokenizer.ggml.merges", merges);
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
    w.set_u32("tokenizer.ggml.eos_token_id", 1);
    w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(unk));
  }
  Tokenizer make() {
    Tokenizer tok;
    const Status s = load(w, &tok);
    INFO(s.message());
    REQUIRE(s.ok());
    return tok;
  }
};

// A gemma3 (SentencePiece) vocabulary: scores decide the merge order.
struct Gemma3Fixture {
  VocabBuilder v;
  int32_t bos, turn, sp, a, b, c, d, ab, bc, abc, cd, sp_a, aa, byte0;
  GgufWriter w;

  explicit Gemma3Fixture(bool with_bytes = true) {
    v.add("<pad>", TokenType::control);
    v.add("<eos>", TokenType::control);
    bos = v.add("<bos>", TokenType::control);
    v.add("<unk>", TokenType::unknown);
    turn = v.add("<start_of_turn>", TokenType::control);
    sp = v.add(kSp, TokenType::normal, -1);
    a = v.add("a", TokenType::normal, -1);
    b = v.add("b", TokenType::normal, -1);
    c = v.add("c", TokenType::normal, -1);
    d = v.add("d", TokenType::normal, -1);
    ab = v.add("ab", TokenType::normal, -5);
    bc = v.add("bc", TokenType::normal, -2);
    abc = v.add("abc", TokenType::normal, -3);
    cd = v.add("cd", TokenType::normal, -4);
    sp_a = v.add(kSp + "a", TokenType::normal, -6);
    aa = v.add("aa", TokenType::normal, -7);
    byte0 = with_bytes ? v.add_bytes() : -1;
    w.set_string("tokenizer.ggml.model", "llama");
    v.write(w);
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
    w.set_u32("tokenizer.ggml.unknown_token_id", 3);
  }
  Tokenizer make() {
    Tokenizer tok;
    const Status s = load(w, &tok);
    INFO(s.message());
    REQUIRE(s.ok());
    return tok;
  }
};

}  // namespace

TEST_CASE("gemma4 BPE merges the lowest rank first, ties leftmost", "[tokenizer]") {
  Gemma4Fixture f;
  const Tokenizer tok = f.make();
  // "b c" (rank 0) before "a b" (rank 1); then "a bc" (rank 2) joins the rest.
  CHECK(encode(tok, "abc") == Ids{f.abc});
  CHECK(encode(tok, "ab") == Ids{f.ab});
  CHECK(encode(tok, "ca") == Ids{f.c, f.a});
  // Three "▁": both pairs have rank 5, the left one merges first.
  CHECK(encode(tok, "   ") == Ids{f.sp_sp, f.sp});
  CHECK(encode(tok, "    ") == Ids{f.sp_sp, f.sp_sp});
}

TEST_CASE("gemma4 BPE replaces spaces by ▁ without a prefix space", "[tokenizer]") {
  Gemma4Fixture f;
  const Tokenizer tok = f.make();
  CHECK(encode(tok, " a") == Ids{f.sp_a});
  CHECK(encode(tok, "a") == Ids{f.a});
  CHECK(encode(tok, "a b") == Ids{f.a, f.sp, f.b});
  // "b c" (0) and "a b" (1) outrank "▁ a" (3), so the space stays alone.
  CHECK(encode(tok, "ab abc") == Ids{f.ab, f.sp, f.abc});
}

TEST_CASE("gemma4 BPE keeps newline runs apart and whole when they are tokens", "[tokenizer]") {
  Gemma4Fixture f;
  const Tokenizer tok = f.make();
  CHECK(encode(tok, "\n") == Ids{f.nl});
  CHECK(encode(tok, "\n\n") == Ids{f.nl2});
  // "\n\n\n" is no token and there is no "\n \n" merge: three single newlines.
  CHECK(encode(tok, "\n\n\n") == Ids{f.nl, f.nl, f.nl});
  // Runs never merge across a newline, even where a merge exists ("a b").
  CHECK(encode(tok, "a\n\nb") == Ids{f.a, f.nl2, f.b});
  CHECK(encode(tok, "a\nbc") == Ids{f.a, f.nl, f.bc});
}

TEST_CASE("gemma4 BPE falls back to <0xHH> byte tokens, or drops the byte", "[tokenizer]") {
  Gemma4Fixture f;
  const Tokenizer tok = f.make();
  // "é" = C3 A9, "€" = E2 82 AC; "x" has no token either.
  CHECK(encode(tok, "é") == Ids{f.byte0 + 0xC3, f.byte0 + 0xA9});
  CHECK(encode(tok, "a€") == Ids{f.a, f.byte0 + 0xE2, f.byte0 + 0x82, f.byte0 + 0xAC});
  CHECK(encode(tok, "x") == Ids{f.byte0 + 'x'});
  // A stray continuation byte becomes U+FFFD (EF BF BD) before merging, as in llama.cpp.
  CHECK(encode(tok, std::string("a\x80", 2)) == Ids{f.a, f.byte0 + 0xEF, f.byte0 + 0xBF, f.byte0 + 0xBD});

  Gemma4Fixture no_bytes(false);
  const Tokenizer bare = no_bytes.make();
  CHECK(encode(bare, "aéb") == Ids{no_bytes.a, no_bytes.b});
}

TEST_CASE("special tokens: control only with parse_special, user-defined always, longest first", "[tokenizer]") {
  Gemma4Fixture f;
  const Tokenizer tok = f.make();
  CHECK(encode(tok, "a<|turn>b", false, true) == Ids{f.a, f.turn, f.b});
  // Unparsed, "<|turn>" is plain text: no token for its characters but "a", so bytes.
  const int32_t B = f.byte0;
  CHECK(encode(tok, "<|turn>", false, false) ==
        Ids{B + '<', B + '|', B + 't', B + 'u', B + 'r', B + 'n', B + '>'});
  CHECK(encode(tok, "<unk>", false, true) == Ids{f.unk});
  CHECK(encode(tok, "<unk>", false, false).size() == 5);
  // User-defined tokens match whatever parse_special says, the longer "<tag>b" before "<tag>".
  CHECK(encode(tok, "a<tag>b", false, false) == Ids{f.a, f.tag_b});
  CHECK(encode(tok, "<tag>b<tag>", false, false) == Ids{f.tag_b, f.tag});
  CHECK(encode(tok, "<tag><tag>c", false, false) == Ids{f.tag, f.tag, f.c});
  // Text around a special token is tokenized on its own: no merge across the boundary.
  CHECK(encode(tok, "a<|turn>bc", false, true) == Ids{f.a, f.turn, f.bc});
}

// The byte-token ids of a text none of whose characters is a token.
Ids bytes_of(const Gemma4Fixture& f, const std::string& text) {
  Ids ids;
  for (const char c : text) ids.push_back(f.byte0 + static_cast<uint8_t>(c));
  return ids;
}

Ids cat(std::initializer_list<Ids> parts) {
  Ids all;
  for (const Ids& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

TEST_CASE("untrusted spans: control, unknown and marker tokens stay text inside, match outside", "[tokenizer]") {
  Gemma4Fixture f;
  const Tokenizer tok = f.make();
  // "<|turn>" | "a<|turn><unk><ch|>b" | "<|turn><ch|>": the middle is a message's text.
  const std::string inner = "a<|turn><unk><ch|>b";
  const std::string text = "<|turn>" + inner + "<|turn><ch|>";
  const Ids ids = encode_untrusted(tok, text, {{7, static_cast<uint32_t>(7 + inner.size())}});
  // ("c" is a token of its own.)
  CHECK(ids == cat({{f.turn, f.a}, bytes_of(f, "<|turn><unk><"), {f.c}, bytes_of(f, "h|>"), {f.b, f.turn, f.channel_end}}));
  // Other user-defined tokens keep llama.cpp's rule: matched everywhere.
  CHECK(encode_untrusted(tok, "a<tag>b", {{0, 7}}) == Ids{f.a, f.tag_b});
  // Without spans, or with empty ones only, it is tokenize with parse_special.
  CHECK(encode_untrusted(tok, text, {}) == encode(tok, text, false, true));
  const auto n = static_cast<uint32_t>(text.size());
  CHECK(encode_untrusted(tok, text, {{0, 0}, {10, 10}, {n, n}}) ==
        Ids{f.turn, f.a, f.turn, f.unk, f.channel_end, f.b, f.turn, f.channel_end});
}

TEST_CASE("untrusted spans: a match sharing one byte with a span stays text, a touching one matches", "[tokenizer]") {
  Gemma4Fixture f;
  const Tokenizer tok = f.make();
  const Ids turn_text = bytes_of(f, "<|turn>");
  // The span covers only the match's first byte, or only its last.
  CHECK(encode_untrusted(tok, "<|turn>", {{0, 1}}) == turn_text);
  CHECK(encode_untrusted(tok, "<|turn>", {{6, 7}}) == turn_text);
  // A span straddling the border between text and marker: "ab<|t" untrusted, "urn>" not.
  CHECK(encode_untrusted(tok, "ab<|turn>", {{0, 5}}) == cat({{f.ab}, turn_text}));
  // A span that ends where the match begins, or begins where it ends, leaves it a token.
  CHECK(encode_untrusted(tok, "ab<|turn>c", {{0, 2}}) == Ids{f.ab, f.turn, f.c});
  CHECK(encode_untrusted(tok, "ab<|turn>c", {{9, 10}}) == Ids{f.ab, f.turn, f.c});
  // Spans at the start and the end of the text, the marker between them matched.
  CHECK(encode_untrusted(tok, "<|turn>a<|turn>b<|turn>", {{0, 7}, {16, 23}}) ==
        cat({turn_text, {f.a, f.turn, f.b}, turn_text}));
  // A skipped occurrence does not hide a later one in trusted text.
  CHECK(encode_untrusted(tok, "<|turn><|turn>", {{0, 7}}) == cat({turn_text, {f.turn}}));
}

TEST_CASE("untrusted spans outside the text, unsorted or overlapping are refused", "[tokenizer]") {
  Gemma4Fixture f;
  const Tokenizer tok = f.make();
  const std::string text = "ab<|turn";  // 8 bytes
  const std::vector<std::vector<lf::ByteSpan>> bad = {
      {{0, 9}},          // past the end
      {{3, 2}},          // begins after its end
      {{4, 6}, {0, 2}},  // unsorted
      {{0, 5}, {4, 6}},  // overlapping
  };
  for (const auto& spans : bad) {
    Ids ids = {7};
    const Status s = tok.tokenize_untrusted(text, false, spans, &ids);
    INFO(s.message());
    CHECK(s.code() == Code::invalid_argument);
    CHECK(s.message().find("untrusted span") != std::string::npos);
    CHECK(ids == Ids{7});
  }
}

TEST_CASE("max_token_bytes: the longest token text, none for a BPE vocabulary missing byte tokens", "[tokenizer]") {
  CHECK(Gemma4Fixture().make().max_token_bytes() == std::string("<|turn>").size());
  CHECK(Gemma4Fixture(/*with_bytes=*/false).make().max_token_bytes() == 0);
  CHECK(Gemma3Fixture().make().max_token_bytes() == std::string("<start_of_turn>").size());
}

TEST_CASE("gemma4 always adds BOS when asked, even if add_bos_token is false", "[tokenizer]") {
  Gemma4Fixture f;
  f.w.set_bool("tokenizer.ggml.add_bos_token", false);
  const Tokenizer tok = f.make();
  CHECK(encode(tok, "abc", true) == Ids{f.bos, f.abc});
  CHECK(encode(tok, "", true) == Ids{f.bos});
  CHECK(encode(tok, "", false).empty());
  CHECK(tok.bos() == f.bos);
  CHECK(tok.eos() == 1);
}

TEST_CASE("gemma4 detokenize: ▁ to space, bytes reassembled, control only when asked, spaces cleaned", "[tokenizer]") {
  Gemma4Fixture f;
  const Tokenizer tok = f.make();
  const Ids ids{f.bos, f.sp_a, f.sp, f.b, f.byte0 + 0xC3, f.byte0 + 0xA9, f.turn};
  CHECK(decode(tok, ids) == " a bé");
  CHECK(decode(tok, ids, true) == "<bos> a bé<|turn>");
  // User-defined tokens are always text.
  CHECK(decode(tok, {f.tag, f.a}) == "<tag>a");
  // llama.cpp cleans " ." into "." for BPE vocabularies.
  CHECK(decode(tok, {f.a, f.sp, f.dot}) == "a.");
  for (const std::string text : {"abc", " a b", "a\n\nb\n\n\n", "é€ x", "  a  "}) {
    CHECK(decode(tok, encode(tok, text)) == text);
  }
  std::string out;
  const int32_t bad[] = {f.a, 100000};
  const Status s = tok.detokenize(bad, 2, false, &out);
  CHECK(s.code() == Code::invalid_argument);
  CHECK_THAT(s.message(), Catch::Contains("100000"));
}

TEST_CASE("gemma3 SentencePiece merges the highest score first, ties leftmost", "[tokenizer]") {
  Gemma3Fixture f;
  f.w.set_bool("tokenizer.ggml.add_space_prefix", false);
  const Tokenizer tok = f.make();
  // bc (-2) first, then a+bc = abc (-3); cd (-4) is stale by then.
  CHECK(encode(tok, "abcd") == Ids{f.abc, f.d});
  // Without b, c and d pair up: cd.
  CHECK(encode(tok, "acd") == Ids{f.a, f.cd});
  // "aa" twice at the same score: the left pair wins.
  CHECK(encode(tok, "aaa") == Ids{f.aa, f.a});
  CHECK(encode(tok, " a") == Ids{f.sp_a});
  CHECK(encode(tok, "a", true) == Ids{f.bos, f.a});
  CHECK(encode(tok, "é") == Ids{f.byte0 + 0xC3, f.byte0 + 0xA9});
  CHECK(decode(tok, encode(tok, "é abcd")) == "é abcd");
  // No space clean-up for SentencePiece vocabularies.
  CHECK(decode(tok, {f.a, f.sp, f.byte0 + '.'}) == "a .");
}

TEST_CASE("gemma3 add_space_prefix (on by default) prefixes the first fragment and those after specials", "[tokenizer]") {
  Gemma3Fixture f;
  const Tokenizer tok = f.make();
  CHECK(encode(tok, "a") == Ids{f.sp_a});
  CHECK(encode(tok, "a<start_of_turn>a", false, true) == Ids{f.sp_a, f.turn, f.sp_a});
  // ...and detokenize drops the one space it added.
  CHECK(decode(tok, {f.sp_a}) == "a");
  CHECK(decode(tok, {f.sp_a, f.sp_a}) == "a a");
}

TEST_CASE("gemma3 without keys takes llama.cpp's SentencePiece defaults: BOS 1", "[tokenizer]") {
  VocabBuilder v;
  v.add("<unk>", TokenType::unknown);
  v.add("<s>", TokenType::control);
  v.add("</s>", TokenType::control);
  const int32_t a = v.add("a");
  v.add_bytes();
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  v.write(w);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  Tokenizer tok;
  REQUIRE(load(w, &tok).ok());
  CHECK(encode(tok, "a", true) == Ids{1, a});
  CHECK(tok.eos() == 2);
}

TEST_CASE("gemma3 needs byte tokens for text it cannot merge", "[tokenizer]") {
  Gemma3Fixture f(false);
  f.w.set_bool("tokenizer.ggml.add_space_prefix", false);
  const Tokenizer tok = f.make();
  CHECK(encode(tok, "abc") == Ids{f.abc});
  Ids ids;
  const Status s = tok.tokenize("aé", false, false, &ids);
  CHECK(s.code() == Code::not_found);
  CHECK_THAT(s.message(), Catch::Contains("<0xC3>"));
}

TEST_CASE("llama.cpp's attribute fix-ups: </s> is control, but ordinary text next to <|tool_response>",
          "[tokenizer]") {
  for (const bool with_tool_response : {false, true}) {
    VocabBuilder v;
    v.add("<pad>", TokenType::control);
    v.add("<eos>", TokenType::control);
    const int32_t bos = v.add("<bos>", TokenType::control);
    const int32_t s = v.add("</s>", TokenType::user_defined);
    if (with_tool_response) v.add("<|tool_response>", TokenType::control);
    const int32_t x = v.add("x");
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gemma4");
    v.write(w);
    w.set_array_string("tokenizer.ggml.merges", {});
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
    Tokenizer tok;
    REQUIRE(load(w, &tok).ok());
    if (with_tool_response) {
      // Normal text: matched by merges only (none here, so bytes that do not exist: dropped).
      CHECK(encode(tok, "x</s>") == Ids{x});
      CHECK(decode(tok, {s}) == "</s>");
    } else {
      CHECK(encode(tok, "x</s>", false, true) == Ids{x, s});
      CHECK(encode(tok, "x</s>", false, false) == Ids{x});
      CHECK(decode(tok, {s}).empty());
      CHECK(decode(tok, {s}, true) == "</s>");
    }
  }
}

TEST_CASE("tokenizer load errors name the problem", "[tokenizer]") {
  SECTION("gemma4 without merges") {
    Gemma4Fixture f;
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gemma4");
    f.v.write(w);
    w.set_u32("tokenizer.ggml.bos_token_id", 2);
    Tokenizer tok;
    const Status s = load(w, &tok);
    CHECK(s.code() == Code::not_found);
    CHECK_THAT(s.message(), Catch::Contains("tokenizer.ggml.merges"));
  }
  SECTION("gemma4 without a BOS id") {
    Gemma4Fixture f;
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gemma4");
    f.v.write(w);
    w.set_array_string("tokenizer.ggml.merges", f.merges);
    Tokenizer tok;
    const Status s = load(w, &tok);
    CHECK(s.code() == Code::not_found);
    CHECK_THAT(s.message(), Catch::Contains("bos_token_id"));
  }
  SECTION("no model, unknown model, no tokens") {
    GgufWriter w;
    Tokenizer tok;
    CHECK_THAT(load(w, &tok).message(), Catch::Contains("tokenizer.ggml.model"));
    w.set_string("tokenizer.ggml.model", "bert");
    CHECK(load(w, &tok).code() == Code::unsupported);
    w.set_string("tokenizer.ggml.model", "llama");
    CHECK_THAT(load(w, &tok).message(), Catch::Contains("tokenizer.ggml.tokens"));
  }
  SECTION("arrays of the wrong type or length, duplicate texts, special ids of the wrong type") {
    Gemma3Fixture f;
    Tokenizer tok;
    GgufWriter& w = f.w;
    w.set_array_f32("tokenizer.ggml.token_type", {1.0f});
    Status s = load(w, &tok);
    CHECK(s.code() == Code::malformed);
    CHECK_THAT(s.message(), Catch::Contains("tokenizer.ggml.token_type"));
    w.set_array_i32("tokenizer.ggml.token_type", {1, 1});
    s = load(w, &tok);
    CHECK(s.code() == Code::malformed);
    CHECK_THAT(s.message(), Catch::Contains("fewer than"));
    f.v.write(w);
    w.set_i32("tokenizer.ggml.bos_token_id", 2);
    s = load(w, &tok);
    CHECK(s.code() == Code::malformed);
    CHECK_THAT(s.message(), Catch::Contains("UINT32"));
    w.set_u32("tokenizer.ggml.bos_token_id", 2);
    f.v.add("a");
    f.v.write(w);
    s = load(w, &tok);
    CHECK(s.code() == Code::malformed);
    CHECK_THAT(s.message(), Catch::Contains("twice"));
  }
}
