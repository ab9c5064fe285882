// Argument checks shared by the row-wise quant entry points, so every one words its errors alike.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/ggml_type.h"
#include "base/status.h"

namespace lf {

// "Q4_K", or "type id 99" for an id type_traits does not know.
std::string type_label(GgmlType type);

// A row of n elements of `type`: unsupported for an unknown type id, invalid_argument when n is
// negative or not a multiple of the block size. `caller` starts the message.
Status check_row(const char* caller, GgmlType type, int64_t n, TypeTraits* traits);

}  // namespace lf
