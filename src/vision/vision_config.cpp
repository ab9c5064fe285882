#include "vision/vision_config.h"

#include <cmath>

#include "gguf/key_reader.h"
#include "projector/projector_keys.h"

namespace lf {
namespace {

Status refuse(const std::string& what) { return Status(Code::unsupported, what); }

// clip.vision.image_mean / image_std: three finite floats, the std's nonzero.
Status channel_floats(const GgufFile& file, const std::string& key, bool nonzero, float* out) {
  const GgufValue* v = file.find(key);
  if (!v) return Status();  // llama.cpp's defaults then: mean 0, std 1
  if (v->type != GgufType::ARRAY || v->floats.size() < 3) {
    return Status(Code::malformed, "key '" + key + "' must be an array of at least 3 floats");
  }
  for (int c = 0; c < 3; ++c) {
    const float f = static_cast<float>(v->floats[c]);
    if (!std::isfinite(f) || (nonzero && f == 0.0f)) {
      return Status(Code::malformed, "key '" + key + "' holds " + std::to_string(f) + " for channel " + std::to_string(c));
    }
    out[c] = f;
  }
  return Status();
}

}  // namespace

Status read_vision_config(const GgufFile& file, VisionConfig* out) {
  LF_RETURN_IF_ERROR(check_projector_tower(file, "vision", "gemma4v"));
  const KeyReader keys(file, "clip");
  VisionConfig c;
  LF_RETURN_IF_ERROR(positive_key(keys, "vision.embedding_length", 1 << 16, &c.n_embd));
  LF_RETURN_IF_ERROR(positive_key(keys, "vision.feed_forward_length", 1 << 18, &c.n_ff));
  LF_RETURN_IF_ERROR(positive_key(keys, "vision.block_count", 256, &c.n_layer));
  LF_RETURN_IF_ERROR(positive_key(keys, "vision.attention.head_count", 1024, &c.n_head));
  LF_RETURN_IF_ERROR(positive_key(keys, "vision.patch_size", 64, &c.patch_size));
  LF_RETURN_IF_ERROR(positive_key(keys, "vision.projection_dim", 1 << 16, &c.n_embd_text));
  int n_head_kv = c.n_head;
  bool found = false;
  LF_RETURN_IF_ERROR(keys.get_int("vision.attention.head_count_kv", &n_head_kv, &found));
  if (n_head_kv != c.n_head) {
    return refuse("key 'clip.vision.attention.head_count_kv' is " + std::to_string(n_head_kv) +
                  "; the vision tower needs as many K/V heads as query heads (" + std::to_string(c.n_head) + ")");
  }
  c.head_dim = c.n_embd / c.n_head;
  LF_RETURN_IF_ERROR(keys.get_int("vision.attention.head_dim", &c.head_dim, &found));
  // Each half of a head is rotated by one axis's position, NEOX pairs within the half.
  if (c.head_dim <= 0 || c.head_dim % 4 != 0 || c.head_dim > 1024) {
    return refuse("the vision head dim " + std::to_string(c.head_dim) + " must be a positive multiple of 4 up to 1024");
  }
  LF_RETURN_IF_ERROR(keys.get_float("vision.attention.layer_norm_epsilon", &c.eps));
  if (!(c.eps > 0.0f)) return refuse("key 'clip.vision.attention.layer_norm_epsilon' must be positive");
  LF_RETURN_IF_ERROR(keys.get_int("vision.projector.scale_factor", &c.n_merge, &found));
  if (c.n_merge < 1 || c.n_merge > 16) {
    return refuse("key 'clip.vision.projector.scale_factor' is " + std::to_string(c.n_merge) + ", outside [1, 16]");
  }
  bool use_gelu = false, use_silu = false;
  file.get_bool("clip.use_gelu", &use_gelu);
  file.get_bool("clip.use_silu", &use_silu);
  if (use_silu) return refuse("clip.use_silu: a SiLU vision FFN is not Gemma 4's and is not supported");
  c.ffn_op = use_gelu ? VisionFfnOp::gelu : VisionFfnOp::gelu_quick;
  LF_RETURN_IF_ERROR(channel_floats(file, "clip.vision.image_mean", false, c.image_mean));
  LF_RETURN_IF_ERROR(channel_floats(file, "clip.vision.image_std", true, c.image_std));

  const GgufTensorInfo* pos = file.tensor("v.position_embd.weight");
  if (!pos) return refuse("missing tensor 'v.position_embd.weight'");
  if (pos->ne[1] <= 0 || pos->ne[1] > (1 << 20)) return refuse("tensor 'v.position_embd.weight' has no usable rows");
  c.pos_size = static_cast<int>(pos->ne[1]);
  c.standardize = file.tensor("v.std_bias") != nullptr || file.tensor("v.std_scale") != nullptr;
  *out = c;
  return Status();
}

}  // namespace lf
