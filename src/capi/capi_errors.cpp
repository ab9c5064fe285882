// Per-thread last error, memory for the host, version and kernels: the plumbing of the C ABI.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "capi/capi_internal.h"
#include "layerfold/capi.h"
#include "kernels/gemm.h"

namespace lf::capi {
namespace {
// Trivially destructible on purpose: a thread_local std::string needs __cxa_thread_atexit,
// which wasm32-wasi lacks. Messages longer than the buffer are cut.
thread_local Code last_code = Code::ok;
thread_local char last_message[2048];
}  // namespace

bool record(const Status& status) {
  last_code = status.code();
  const std::string& message = status.message();
  size_t n = std::min(message.size(), sizeof(last_message) - 1);
  std::memcpy(last_message, message.data(), n);
  last_message[n] = '\0';
  return status.ok();
}

}  // namespace lf::capi

extern "C" {

int lf_last_error_code(void) { return static_cast<int>(lf::capi::last_code); }
const char* lf_last_error_message(void) { return lf::capi::last_message; }

void* lf_alloc(size_t n_bytes) {
  // 64-byte alignment: tensors land on cache-line and SIMD boundaries whatever their size.
  void* ptr = std::aligned_alloc(64, (n_bytes + 63) / 64 * 64);
  if (ptr == nullptr) {
    lf::capi::record(lf::Status(lf::Code::resource_exhausted,
                                "out of memory allocating " + std::to_string(n_bytes) + " bytes"));
  }
  return ptr;
}

void lf_free(void* ptr) { std::free(ptr); }

const char* lf_version(void) { return "0.1.0"; }

const char* lf_kernel_isa(void) { return lf::gemm_kernel_isa(); }

}  // extern "C"
