#include "gguf/ggml_type.h"

namespace lf {

bool type_traits(uint32_t type_id, TypeTraits* out) {
  switch (static_cast<GgmlType>(type_id)) {
    case GgmlType::F32: *out = {"F32", 1, 4}; return true;
    case GgmlType::F16: *out = {"F16", 1, 2}; return true;
    case GgmlType::Q4_0: *out = {"Q4_0", 32, 18}; return true;
    case GgmlType::Q4_1: *out = {"Q4_1", 32, 20}; return true;
    case GgmlType::Q5_0: *out = {"Q5_0", 32, 22}; return true;
    case GgmlType::Q5_1: *out = {"Q5_1", 32, 24}; return true;
    case GgmlType::Q8_0: *out = {"Q8_0", 32, 34}; return true;
    case GgmlType::Q8_1: *out = {"Q8_1", 32, 36}; return true;
    case GgmlType::Q2_K: *out = {"Q2_K", 256, 84}; return true;
    case GgmlType::Q3_K: *out = {"Q3_K", 256, 110}; return true;
    case GgmlType::Q4_K: *out = {"Q4_K", 256, 144}; return true;
    case GgmlType::Q5_K: *out = {"Q5_K", 256, 176}; return true;
    case GgmlType::Q6_K: *out = {"Q6_K", 256, 210}; return true;
    case GgmlType::Q8_K: *out = {"Q8_K", 256, 292}; return true;
    case GgmlType::BF16: *out = {"BF16", 1, 2}; return true;
  }
  return false;
}

}  // namespace lf
