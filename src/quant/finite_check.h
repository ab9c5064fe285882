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
// x [rows of width floats] that go into an RMSNorm: finite, and every square finite too. The
// norm squares in float32 before it sums (as llama.cpp does), so a value of magnitude 2^64 or
// more would make its row's norm infinite and the row all zeros: refused by name instead.
Status check_norm_input_rows(std::span<const float> x, int width, const std::string& what);
// logits [rows of n_vocab floats] -> invalid_argument when one is not finite or a row is all
// zeros (what a row of overflowed squares gives): no sampler can use either.
Status check_logit_rows(std::span<const float> logits, int n_vocab);

}  // namespace lf
