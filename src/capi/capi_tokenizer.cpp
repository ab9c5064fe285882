// C ABI over the tokenizer: built from a parsed GGUF header, so a host that only reads the
// header (no tensors) can tokenize. Output buffers work like snprintf: the return value is the
// full count, and only min(count, max_out) items are written.
#include <algorithm>
#include <string>
#include <vector>

#include "capi/capi_internal.h"
#include "layerfold/capi.h"
#include "tokenizer/tokenizer.h"

struct lf_tokenizer {
  lf::Tokenizer tokenizer;
  std::vector<int32_t> ids;  // scratch of the last call
  std::string text;
};

namespace {

using lf::Code;
using lf::Status;

bool check_handle(const void* handle, const char* what) {
  if (handle != nullptr) return true;
  return lf::capi::record(Status(Code::invalid_argument, std::string(what) + " is NULL"));
}

bool check_buffer(const void* data, int n, const char* what) {
  if (n >= 0 && (n == 0 || data != nullptr)) return true;
  return lf::capi::record(Status(Code::invalid_argument, std::string(what) + " of " + std::to_string(n) +
                                                             " items must be non-negative and not NULL"));
}

// The last call's ids into out, snprintf-like.
int copy_ids(const lf_tokenizer* tok, int32_t* out, int max_out) {
  const size_t n = tok->ids.size();
  for (size_t i = 0; i < n && i < static_cast<size_t>(max_out); ++i) out[i] = tok->ids[i];
  return static_cast<int>(n);
}

}  // namespace

extern "C" {

lf_tokenizer* lf_tokenizer_create(lf_gguf* gguf) {
  if (!check_handle(gguf, "gguf")) return nullptr;
  auto handle = new lf_tokenizer();
  if (!lf::capi::record(lf::Tokenizer::from_gguf(gguf->file, &handle->tokenizer))) {
    delete handle;
    return nullptr;
  }
  return handle;
}

int lf_tokenize(lf_tokenizer* tok, const char* utf8, int n_bytes, int add_bos, int parse_special, int32_t* out,
                int max_out) {
  if (!check_handle(tok, "tokenizer") || !check_buffer(utf8, n_bytes, "text") ||
      !check_buffer(out, max_out, "output")) {
    return -1;
  }
  tok->ids.clear();
  const std::string_view text(utf8 == nullptr ? "" : utf8, static_cast<size_t>(n_bytes));
  if (!lf::capi::record(tok->tokenizer.tokenize(text, add_bos != 0, parse_special != 0, &tok->ids))) return -1;
  return copy_ids(tok, out, max_out);
}

int lf_tokenize_untrusted(lf_tokenizer* tok, const char* utf8, int n_bytes, int add_bos, const uint32_t* spans,
                          int n_spans, int32_t* out, int max_out) {
  if (!check_handle(tok, "tokenizer") || !check_buffer(utf8, n_bytes, "text") ||
      !check_buffer(spans, n_spans, "spans") || !check_buffer(out, max_out, "output")) {
    return -1;
  }
  if (n_spans > INT32_MAX / 2) {
    lf::capi::record(Status(Code::invalid_argument, std::to_string(n_spans) + " spans are too many"));
    return -1;
  }
  std::vector<lf::ByteSpan> untrusted(static_cast<size_t>(n_spans));
  for (size_t i = 0; i < untrusted.size(); ++i) untrusted[i] = {spans[2 * i], spans[2 * i + 1]};
  tok->ids.clear();
  const std::string_view text(utf8 == nullptr ? "" : utf8, static_cast<size_t>(n_bytes));
  if (!lf::capi::record(tok->tokenizer.tokenize_untrusted(text, add_bos != 0, untrusted, &tok->ids))) return -1;
  return copy_ids(tok, out, max_out);
}

int lf_detokenize(lf_tokenizer* tok, const int32_t* ids, int n, int render_special, char* out, int max_out) {
  if (!check_handle(tok, "tokenizer") || !check_buffer(ids, n, "ids") || !check_buffer(out, max_out, "output")) {
    return -1;
  }
  tok->text.clear();
  if (!lf::capi::record(tok->tokenizer.detokenize(ids, static_cast<size_t>(n), render_special != 0, &tok->text))) {
    return -1;
  }
  tok->text.copy(out, std::min(tok->text.size(), static_cast<size_t>(max_out)));
  return static_cast<int>(tok->text.size());
}

int lf_tokenizer_n_vocab(const lf_tokenizer* tok) { return check_handle(tok, "tokenizer") ? tok->tokenizer.n_vocab() : -1; }
int lf_tokenizer_max_token_bytes(const lf_tokenizer* tok) {
  if (!check_handle(tok, "tokenizer")) return -1;
  return static_cast<int>(std::min<size_t>(tok->tokenizer.max_token_bytes(), INT32_MAX));
}
int lf_tokenizer_bos(const lf_tokenizer* tok) { return check_handle(tok, "tokenizer") ? tok->tokenizer.bos() : -1; }
int lf_tokenizer_eos(const lf_tokenizer* tok) { return check_handle(tok, "tokenizer") ? tok->tokenizer.eos() : -1; }

const char* lf_tokenizer_piece(const lf_tokenizer* tok, int id) {
  if (!check_handle(tok, "tokenizer")) return nullptr;
  if (id < 0 || id >= tok->tokenizer.n_vocab()) {
    lf::capi::record(Status(Code::invalid_argument, "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                                        std::to_string(tok->tokenizer.n_vocab())));
    return nullptr;
  }
  return tok->tokenizer.text(id).c_str();
}

void lf_tokenizer_free(lf_tokenizer* tok) { delete tok; }

}  // extern "C"
