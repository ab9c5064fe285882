#include "quant/row_check.h"

namespace lf {

std::string type_label(GgmlType type) {
  TypeTraits traits;
  if (type_traits(static_cast<uint32_t>(type), &traits)) return traits.name;
  return "type id " + std::to_string(static_cast<uint32_t>(type));
}

Status check_row(const char* caller, GgmlType type, int64_t n, TypeTraits* traits) {
  if (!type_traits(static_cast<uint32_t>(type), traits)) {
    return Status(Code::unsupported, std::string(caller) + ": unknown ggml " + type_label(type));
  }
  if (n < 0 || n % traits->block_elems != 0) {
    return Status(Code::invalid_argument, std::string(caller) + ": n = " + std::to_string(n) +
                                              " is not a non-negative multiple of the " + traits->name +
                                              " block size " + std::to_string(traits->block_elems));
  }
  return Status::ok_status();
}

}  // namespace lf
