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

const char* refused_type_name(uint32_t type_id) {
  // ggml.h's ids 16..42; the gaps are retired ids.
  static const char* const kNames[] = {"IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S",
                                       "IQ4_XS",  "I8",     "I16",     "I32",   "I64",    "F64",   "IQ1_M",
                                       nullptr,   nullptr,  nullptr,   nullptr, "TQ1_0",  "TQ2_0", nullptr,
                                       nullptr,   nullptr,  "MXFP4",   "NVFP4", "Q1_0",   "Q2_0"};
  if (type_id < 16 || type_id >= 16 + sizeof kNames / sizeof kNames[0]) return nullptr;
  return kNames[type_id - 16];
}

}  // namespace lf
