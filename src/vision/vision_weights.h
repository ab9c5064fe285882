// The tensors of a Gemma 4 vision tower (llama.cpp's names, docs/vision.md "Tensors"), checked
// against a VisionConfig and seen as typed views onto the file's bytes (never copied).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "layout/weight_view.h"
#include "model/tensor_table.h"
#include "projector/projector_tensors.h"
#include "vision/vision_config.h"

namespace lf {

struct VisionLayerWeights {
  const float* ln1;             // [n_embd] attention input norm
  ClampedLinear attn_q, attn_k, attn_v;  // [q_dim, n_embd]
  const float* attn_q_norm;     // [head_dim] per-head Q norm
  const float* attn_k_norm;     // [head_dim] per-head K norm (V is normed without weight)
  ClampedLinear attn_out;       // [n_embd, q_dim]
  const float* attn_post_norm;  // [n_embd]
  const float* ln2;             // [n_embd] FFN input norm
  ClampedLinear ffn_gate, ffn_up;  // [n_ff, n_embd]
  ClampedLinear ffn_down;       // [n_embd, n_ff]
  const float* ffn_post_norm;   // [n_embd]
  const float* out_scale;       // [1] the layer's output scale, or null
};

struct VisionWeights {
  WeightView patch_embd;        // [n_embd, 3·patch²]: the patch kernel, columns in (c, y, x) order
  const float* position_embd;   // [2, pos_size, n_embd]: the x table, then the y table
  std::vector<VisionLayerWeights> layers;  // [n_layer]
  const float* std_bias;        // [n_embd] or null (no standardization)
  const float* std_scale;       // [n_embd] or null
  ClampedLinear input_projection;  // mm.input_projection [n_embd_text, n_embd]
};

// Every tensor a tower of this configuration may hold, with its shape and role.
std::vector<TensorSpec> vision_tensors(const VisionConfig& c);

// file's table checked against vision_tensors(c), then views onto data (the file's data blob,
// `size` bytes, 4-byte aligned); errors name the tensor.
Status vision_weights(const GgufFile& file, const VisionConfig& c, const uint8_t* data, uint64_t size,
                      VisionWeights* out);

}  // namespace lf
