// The tensors of a Gemma 4 audio encoder (llama.cpp's names, docs/audio.md "Tensors"), checked
// against an AudioConfig and seen as typed views onto the file's bytes (never copied). What
// llama.cpp's graph treats as optional is null (or an absent matrix) when the file lacks it.
#pragma once

#include <cstdint>
#include <vector>

#include "audio/audio_config.h"
#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "model/tensor_table.h"
#include "projector/projector_tensors.h"

namespace lf {

// One Conformer block: a half-step FFN, chunked local self-attention with relative positions,
// the light convolution module, a second half-step FFN and the block's output norm.
struct AudioLayerWeights {
  const float* ffn_norm;          // [n_embd]
  ClampedLinear ffn_up;           // [n_ff, n_embd]
  ClampedLinear ffn_down;         // [n_embd, n_ff]
  const float* ffn_post_norm;     // [n_embd] or null
  const float* attn_pre_norm;     // [n_embd] or null (then ln1, then none)
  const float* ln1;               // [n_embd] or null
  ClampedLinear attn_q, attn_k, attn_v;  // [n_embd, n_embd]
  const float* per_dim_scale;     // [head_dim] or null: Q's per-dimension scale
  const float* per_dim_k_scale;   // [head_dim] or null
  WeightView attn_k_rel;          // [n_embd, n_embd] or absent: the relative positions' projection (never clamped)
  ClampedLinear attn_out;         // [n_embd, n_embd]
  const float* attn_out_b;        // [n_embd] or null
  const float* attn_post_norm;    // [n_embd] or null
  const float* conv_in_norm;      // [n_embd] or null: the file's "conv_norm" (llama.cpp loads the pair crossed)
  ClampedLinear conv_pw1;         // [2·n_embd, n_embd]: GLU's values, then its gates
  const float* conv_taps;         // [conv_kernel, n_embd]: the causal depthwise kernel by tap, for vectors
                                  // over channels (AudioWeights::conv_taps; the file has it by channel)
  const float* conv_dw_b;         // [n_embd] or null
  const float* conv_out_norm;     // [n_embd] or null: the file's "norm_conv"
  ClampedLinear conv_pw2;         // [n_embd, n_embd]
  const float* ffn_norm_1;        // [n_embd]
  ClampedLinear ffn_up_1;         // [n_ff, n_embd]
  ClampedLinear ffn_down_1;       // [n_embd, n_ff]
  const float* ffn_post_norm_1;   // [n_embd] or null
  const float* ln2;               // [n_embd] or null: the block's output norm
};

struct AudioWeights {
  // [channels_i, 9 · in_channels]: each kernel's rows, (in, time, frequency) order, in F16 whatever
  // the file's type: ggml_conv_2d's im2col holds the patches in F16, and its mul_mat converts the
  // kernel to the patches' type.
  WeightView conv[2];
  std::vector<uint16_t> conv_f16[2];  // the kernels rounded to F16 where the file has them in F32
  const float* conv_norm[2];      // [channels_i] or null: LayerNorm over the channels
  ClampedLinear input_projection; // a.input_projection [n_embd, n_embd_sub]
  const float* input_projection_b;
  std::vector<AudioLayerWeights> layers;  // [n_layer]
  ClampedLinear out_projection;   // a.pre_encode.out [n_embd_out, n_embd] or absent (n_embd_out == n_embd)
  const float* out_projection_b;
  const float* soft_emb_norm;     // mm.a.soft_emb_norm [n_embd_out] or null
  ClampedLinear mm_input_projection;  // mm.a.input_projection [n_embd_text, n_embd_out]
  std::vector<float> conv_taps;   // [n_layer, conv_kernel, n_embd]: each layer's depthwise kernel by tap
};

// Every tensor an audio encoder of this configuration may hold, with its shape and role.
std::vector<TensorSpec> audio_tensors(const AudioConfig& c);

// file's table checked against audio_tensors(c), then views onto data (the file's data blob,
// `size` bytes, 4-byte aligned); errors name the tensor.
Status audio_weights(const GgufFile& file, const AudioConfig& c, const uint8_t* data, uint64_t size, AudioWeights* out);

}  // namespace lf
