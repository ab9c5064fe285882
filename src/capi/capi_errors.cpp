// Per-thread last error, memory for the host, done flags, version and kernels: the plumbing of
// the C ABI.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "capi/capi_internal.h"
#include "layerfold/capi.h"
#include "kernels/gemm.h"
#include "model/kv_cache.h"

#if defined(__EMSCRIPTEN__)
#include <emscripten/threading.h>
#endif

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

bool record_kv_types(const char* k_type, const char* v_type, GgmlType* k, GgmlType* v) {
  GgmlType parsed_k = GgmlType::F16, parsed_v = GgmlType::F16;
  if (!record(parse_kv_type(k_type ? k_type : "f16", "K", &parsed_k)) ||
      !record(parse_kv_type(v_type ? v_type : "f16", "V", &parsed_v))) {
    return false;
  }
  *k = parsed_k;
  *v = parsed_v;
  return true;
}

// *flag = value, seen by a host thread waiting on it (JS: Atomics.waitAsync on wasm memory).
void publish(int32_t* flag, int32_t value) {
#if defined(__wasi__)
  *flag = value;  // no threads: the host reads it after the call returns
#elif defined(__EMSCRIPTEN__)
  // Emscripten's libc++ has no atomic_ref, and a JS waiter is woken by a futex wake on the
  // address, not by libc++'s notify.
  __atomic_store_n(flag, value, __ATOMIC_RELEASE);
  emscripten_futex_wake(flag, INT_MAX);
#else
  std::atomic_ref<int32_t> published(*flag);
  published.store(value, std::memory_order_release);
  published.notify_all();
#endif
}

}  // namespace lf::capi

extern "C" {

int lf_last_error_code(void) { return static_cast<int>(lf::capi::last_code); }
const char* lf_last_error_message(void) { return lf::capi::last_message; }

void* lf_alloc(double n_bytes) {
  // A JS number arrives whole: checked here, never cut to this module's 32-bit size_t on the way.
  // The rounding up to 64 bytes must fit too.
  if (!(n_bytes >= 0) || n_bytes != std::floor(n_bytes) || n_bytes > static_cast<double>(SIZE_MAX - 63)) {
    lf::capi::record(lf::Status(lf::Code::resource_exhausted,
                                "cannot allocate " + std::to_string(n_bytes) + " bytes: more than this module can address (" +
                                    std::to_string(SIZE_MAX) + " bytes)"));
    return nullptr;
  }
  const size_t n = static_cast<size_t>(n_bytes);
  // 64-byte alignment: tensors land on cache-line and SIMD boundaries whatever their size.
  void* ptr = std::aligned_alloc(64, (n + 63) / 64 * 64);
  if (ptr == nullptr) {
    lf::capi::record(lf::Status(lf::Code::resource_exhausted, "out of memory allocating " + std::to_string(n) + " bytes"));
  }
  return ptr;
}

void lf_free(void* ptr) { std::free(ptr); }

const char* lf_version(void) { return "0.1.0"; }

const char* lf_kernel_isa(void) { return lf::gemm_kernel_isa(); }

const char* lf_kernel_dot_form(const char* form) {
  // Formatted into a buffer of its own, not on the heap: this runs at load, before any tensor is
  // placed, and a freed allocation there would leave a hole below them.
  static char json[160];
  if (!lf::relaxed_kernels_run()) {
    if (form != nullptr) {
      lf::capi::record(lf::Status(lf::Code::failed_precondition,
                                  std::string("the dot form \"") + form + "\" names a relaxed kernel; this module runs " +
                                      lf::gemm_kernel_isa()));
      return nullptr;
    }
    std::snprintf(json, sizeof json, "{\"form\":null}");
  } else if (form == nullptr) {
    const lf::DotFormChoice seen = lf::choose_dot_form();
    std::snprintf(json, sizeof json, "{\"form\":\"%s\",\"dot_add_ms\":%.6f,\"pairs_ms\":%.6f}", lf::dot_form_name(seen.form),
                  seen.dot_add_ms, seen.pairs_ms);
  } else {
    const std::string name = form;
    if (name != lf::dot_form_name(lf::DotForm::dot_add) && name != lf::dot_form_name(lf::DotForm::pairs)) {
      lf::capi::record(lf::Status(lf::Code::invalid_argument, "unknown dot form \"" + name + "\": expected dot-add or pairs"));
      return nullptr;
    }
    const lf::DotForm chosen = name == "pairs" ? lf::DotForm::pairs : lf::DotForm::dot_add;
    lf::set_dot_form(chosen);
    std::snprintf(json, sizeof json, "{\"form\":\"%s\"}", lf::dot_form_name(chosen));
  }
  return json;
}

}  // extern "C"
