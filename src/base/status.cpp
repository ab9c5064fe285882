#include "base/status.h"

namespace lf {

const char* code_name(Code code) {
  switch (code) {
    case Code::ok: return "ok";
    case Code::invalid_argument: return "invalid_argument";
    case Code::malformed: return "malformed";
    case Code::unsupported: return "unsupported";
    case Code::need_more_data: return "need_more_data";
    case Code::io_error: return "io_error";
    case Code::failed_precondition: return "failed_precondition";
    case Code::resource_exhausted: return "resource_exhausted";
    case Code::not_found: return "not_found";
    case Code::internal: return "internal";
  }
  return "unknown";
}

}  // namespace lf
