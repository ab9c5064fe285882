// A plain forward pass for tests: the math of docs/gemma-architecture.md, "Gemma 4 forward",
// "Mixture of experts" and "Gemma 3" written out directly, with no cache and f32 everywhere (weights dequantized to f32, dot
// products summed in double, exact tanh GELU, exact softmax). The engine must agree with it within
// the tolerance stated in docs/forward-pass.md; it is not fast and never used to serve.
#pragma once

#include <vector>

#include "model/model.h"
#include "base/status.h"

namespace lf {

// Positions [begin, end) that the sliding layers attend both ways (Session::span_in); none when empty.
struct MediaSpan {
  int begin = 0, end = 0;
};

// in [n, n_embd] at positions 0 .. n-1 -> out [n, n_embd] after the model's layers. A model
// with per-layer embeddings also needs per_layer_in [range layers, n, n_embd_per_layer].
Status reference_layers(const Model& model, const float* in, int n, std::vector<float>* out,
                        const float* per_layer_in = nullptr, MediaSpan span = {});

// tokens [n], x0 [n, n_embd] (embed()) -> out [n_layer, n, n_embd_per_layer], the per-layer
// inputs of docs/gemma-architecture.md, "E2B and E4B", written out directly.
Status reference_per_layer_inputs(const Model& model, const int32_t* tokens, int n, const float* x0,
                                  std::vector<float>* out);

// hidden [n, n_embd] -> logits [n, n_vocab] (output_norm, LM head, soft-cap). Needs model.has_head.
Status reference_head(const Model& model, const float* hidden, int n, std::vector<float>* logits);

}  // namespace lf
