#include "audio/audio_config.h"

#include <string>

#include "gguf/key_reader.h"
#include "projector/projector_keys.h"

namespace lf {
namespace {

Status refuse(const std::string& what) { return Status(Code::unsupported, what); }

// The shape of tensor `name`, which must be there.
Status shape_of(const GgufFile& file, const std::string& name, const GgufTensorInfo** out) {
  *out = file.tensor(name);
  if (!*out) return refuse("missing required tensor '" + name + "'");
  return Status();
}

// Output channels of subsampling convolution i, whose kernel is [3, 3, in_channels, out].
Status conv_channels(const GgufFile& file, int i, int in_channels, int* out) {
  const std::string name = "a.conv1d." + std::to_string(i) + ".weight";
  const GgufTensorInfo* t;
  LF_RETURN_IF_ERROR(shape_of(file, name, &t));
  if (t->ne[0] != 3 || t->ne[1] != 3 || t->ne[2] != in_channels || t->ne[3] <= 0 || t->ne[3] > 4096) {
    return Status(Code::malformed, "tensor '" + name + "' must be [3, 3, " + std::to_string(in_channels) +
                                       ", channels] with 1 to 4096 channels");
  }
  *out = static_cast<int>(t->ne[3]);
  return Status();
}

}  // namespace

Status read_audio_config(const GgufFile& file, AudioConfig* out) {
  LF_RETURN_IF_ERROR(check_projector_tower(file, "audio", "gemma4a"));
  const KeyReader keys(file, "clip");
  AudioConfig c;
  LF_RETURN_IF_ERROR(positive_key(keys, "audio.embedding_length", 1 << 16, &c.n_embd));
  LF_RETURN_IF_ERROR(positive_key(keys, "audio.feed_forward_length", 1 << 18, &c.n_ff));
  LF_RETURN_IF_ERROR(positive_key(keys, "audio.block_count", 256, &c.n_layer));
  LF_RETURN_IF_ERROR(positive_key(keys, "audio.attention.head_count", 1024, &c.n_head));
  LF_RETURN_IF_ERROR(positive_key(keys, "audio.num_mel_bins", 1024, &c.n_mel));
  if (c.n_embd % c.n_head != 0 || c.n_embd % 2 != 0) {
    return refuse("key 'clip.audio.embedding_length' " + std::to_string(c.n_embd) + " must be even and a multiple of the " +
                  std::to_string(c.n_head) + " heads");
  }
  c.head_dim = c.n_embd / c.n_head;
  // The attention's dot products are llama.cpp's AVX-512 ones, 16 lanes by 4 vectors (Google's
  // heads are 128 wide).
  if (c.head_dim % 64 != 0) {
    return refuse("the audio head dim " + std::to_string(c.head_dim) + " (embedding_length / head_count) is not a multiple of 64");
  }
  int n_head_kv = c.n_head;
  bool found = false;
  LF_RETURN_IF_ERROR(keys.get_int("audio.attention.head_count_kv", &n_head_kv, &found));
  if (n_head_kv != c.n_head) {
    return refuse("key 'clip.audio.attention.head_count_kv' is " + std::to_string(n_head_kv) +
                  "; the audio encoder needs as many K/V heads as query heads (" + std::to_string(c.n_head) + ")");
  }
  LF_RETURN_IF_ERROR(conv_channels(file, 0, 1, &c.conv_channels[0]));
  LF_RETURN_IF_ERROR(conv_channels(file, 1, c.conv_channels[0], &c.conv_channels[1]));
  LF_RETURN_IF_ERROR(positive_key(keys, "audio.projection_dim", 1 << 16, &c.n_embd_text));
  // llama.cpp's graph pads the light convolution's input by 4 tokens: a kernel of 5 taps.
  const GgufTensorInfo* t;
  LF_RETURN_IF_ERROR(shape_of(file, "a.blk.0.conv_dw.weight", &t));
  c.conv_kernel = static_cast<int>(t->ne[0]);
  if (c.conv_kernel != 5) {
    return refuse("tensor 'a.blk.0.conv_dw.weight' has " + std::to_string(c.conv_kernel) + " taps; llama.cpp's gemma4a takes 5");
  }
  // Without an output projection the conformer's width goes on as it is.
  c.n_embd_out = c.n_embd;
  if (const GgufTensorInfo* out_proj = file.tensor("a.pre_encode.out.weight")) {
    if (out_proj->ne[1] <= 0 || out_proj->ne[1] > (1 << 16)) {
      return Status(Code::malformed, "tensor 'a.pre_encode.out.weight' has no usable rows");
    }
    c.n_embd_out = static_cast<int>(out_proj->ne[1]);
  }
  *out = c;
  return Status();
}

int AudioConfig::frames(int64_t n_samples) const {
  // C++'s division truncating toward zero, as mtmd's does.
  const int64_t with_left = n_samples + frame_len / 2;
  return static_cast<int>((with_left - (frame_len + 1)) / hop + 1);
}

int AudioConfig::tokens(int n_frames) {
  int n = n_frames;
  for (int i = 0; i < 2; ++i) n = (n - 1) / 2 + 1;
  return n;
}

}  // namespace lf
