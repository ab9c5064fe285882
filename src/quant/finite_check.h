// Whether a tensor can only give finite products: every value of an F32 / F16 / BF16 tensor,
// and the f16 scales (d, and m or dmin where the format has one) of every block of a quantized
// one. A non-finite scale makes every product with its block NaN, so such a tensor is refused at
// load, by name, rather than served.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"
#include "gguf/ggml_type.h"

namespace lf {

// data [n_out rows of n_in values of type] -> invalid_argument naming `name`, the row and the
// block (or element) of the first non-finite value; unsupported for a type it cannot read.
Status check_finite_tensor(const std::string& name, GgmlType type, const uint8_t* data, int64_t n_in, int64_t n_out);
// x [rows of width floats] -> invalid_argument naming `what`, the row and element of the first
// NaN or infinity.
Status check_finite_rows(std::span<const float> x, int width, const std::string& what);

}  // namespace lf
