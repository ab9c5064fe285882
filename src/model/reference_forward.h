// A plain forward pass for tests: the math of docs/gemma-architecture.md, "Gemma 4 forward",
// "Mixture of experts" and "Gemma 3" written out directly, with no cache and f32 everywhere (weights dequantized to f32, dot
// products summed in double, exact tanh GELU, exact softmax). The engine must agree with it within
// the tolerance stated in docs/forward-pass.md; it is not fast and never used to serve.
#pragma once

#include <vector>

#include "model/model.h"
#include "base/status.h"

namespace lf {

// in [n, n_embd] at positions 0 .. n-1 -> out [n, n_embd] after the model's layers.
Status reference_layers(const Model& model, const float* in, int n, std::vector<float>* out);

// hidden [n, n_embd] -> logits [n, n_vocab] (output_norm, LM head, soft-cap). Needs model.has_head.
Status reference_head(const Model& model, const float* hidden, int n, std::vector<float>* logits);

}  // namespace lf
