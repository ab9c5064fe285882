// Errors that cross a module boundary: a stable code for programs, a message for people.
// The library never throws (the wasm32-wasi build has no exceptions); every fallible call
// returns a Status, and the C ABI hands code + message to the JS host unchanged.
#pragma once

#include <string>
#include <utility>

namespace lf {

enum class Code : int {
  ok = 0,
  invalid_argument = 1,     // caller passed something wrong (shape, NaN, range)
  malformed = 2,            // bytes that do not form a valid file
  unsupported = 3,          // valid, but a feature we refuse to run half-way
  need_more_data = 4,       // a prefix was too short; message says how many bytes are needed
  io_error = 5,             // open/read/mmap failed
  failed_precondition = 6,  // e.g. start position does not match the session's cache
  resource_exhausted = 7,   // over a configured limit (sessions, memory, context)
  not_found = 8,            // unknown session, missing tensor
  internal = 9,
};

const char* code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::ok;
  std::string message_;
};

}  // namespace lf

#define LF_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::lf::Status lf_status_ = (expr);       \
    if (!lf_status_.ok()) return lf_status_; \
  } while (0)
