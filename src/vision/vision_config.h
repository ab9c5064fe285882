// Gemma 4's vision tower as a projector GGUF ("mmproj", llama.cpp's PROJECTOR_TYPE_GEMMA4V)
// describes it (docs/vision.md): the widths, the image budget and the options its keys give.
// The one VisionConfig: read_vision_config checks a file's keys into it, make_model writes from it.
#pragma once

#include <string>

#include "base/status.h"
#include "gguf/gguf_reader.h"

namespace lf {

// The FFN's activation as llama.cpp picks it from clip.use_gelu / clip.use_silu (neither key:
// gelu_quick, which is what a converted Gemma 4 projector carries).
enum class VisionFfnOp { gelu_quick, gelu };

struct VisionConfig {
  int n_embd = 0;        // clip.vision.embedding_length: the tower's width
  int n_ff = 0;          // clip.vision.feed_forward_length
  int n_layer = 0;       // clip.vision.block_count
  int n_head = 0;        // clip.vision.attention.head_count (K/V heads the same)
  int head_dim = 0;      // clip.vision.attention.head_dim, or n_embd / n_head
  int patch_size = 0;    // clip.vision.patch_size: a patch is patch_size² pixels of 3 channels
  int n_merge = 3;       // clip.vision.projector.scale_factor: the pooler's kernel and stride
  int pos_size = 0;      // rows of each learned position table (v.position_embd [n_embd, pos_size, 2])
  int n_embd_text = 0;   // clip.vision.projection_dim: the language model's width
  float eps = 1e-6f;     // clip.vision.attention.layer_norm_epsilon
  float rope_theta = 100.0f;  // fixed by llama.cpp for Gemma 4, no key
  VisionFfnOp ffn_op = VisionFfnOp::gelu_quick;
  bool standardize = false;   // v.std_bias and v.std_scale present
  float image_mean[3] = {0, 0, 0};  // clip.vision.image_mean / image_std: (x/255 - mean) / std
  float image_std[3] = {1, 1, 1};
  // The soft-token budget of one image (llama.cpp's 70 and 1120 unless its caller overrides).
  int min_tokens = 70;
  int max_tokens = 1120;

  int q_dim() const { return n_head * head_dim; }
  int patch_dim() const { return 3 * patch_size * patch_size; }  // one patch's values, (c, y, x) order
};

// The keys of a parsed mmproj into *out (pos_size and standardize from the tensor table), each
// missing, mistyped, out-of-range or unsupported value refused by the key's name.
Status read_vision_config(const GgufFile& file, VisionConfig* out);

}  // namespace lf
