// Gemma 4's audio encoder (a Conformer; llama.cpp's PROJECTOR_TYPE_GEMMA4A) as a projector GGUF
// ("mmproj") and llama.cpp describe it (docs/audio.md): the widths its keys and tensors give and
// the constants llama.cpp fixes for every Gemma 4 audio tower, keyed or not. make_model writes
// from it; the engine's encoder reads into it.
#pragma once

namespace lf {

struct AudioConfig {
  // From the file.
  int n_embd = 0;            // clip.audio.embedding_length: the conformer's width (Google: 1024)
  int n_ff = 0;              // clip.audio.feed_forward_length: each half-step FFN's inner width (4·n_embd)
  int n_layer = 0;           // clip.audio.block_count: conformer blocks (12)
  int n_head = 0;            // clip.audio.attention.head_count (8); K and V have as many
  int head_dim = 0;          // n_embd / n_head (no key; 128)
  int n_mel = 0;             // clip.audio.num_mel_bins: log-mel features per frame (128)
  int conv_channels[2] = {0, 0};  // the two subsampling Conv2Ds' output channels (128, 32): a.conv1d.{0,1}.weight's ne[3]
  int conv_kernel = 0;       // the light conv's causal depthwise kernel (5): a.blk.N.conv_dw.weight [conv_kernel, n_embd]
  int n_embd_out = 0;        // a.pre_encode.out's output width (Google's output_proj_dims, 1536), what the embedder reads
  int n_embd_text = 0;       // clip.audio.projection_dim: the language model's width (mm.a.input_projection's rows)
  float eps = 1e-6f;         // every norm's; llama.cpp fixes it whatever clip.audio.attention.layer_norm_epsilon says

  // Fixed by llama.cpp for gemma4a, no key (Google's audio_config values).
  int chunk_size = 12;       // queries per attention block (attention_chunk_size)
  int max_past = 12;         // how far a block's keys reach back (attention_context_left - 1): chunk_size + max_past keys per block
  float logit_cap = 50.0f;   // attention scores through cap·tanh(s / cap) (attention_logit_cap)
  float residual_weight = 0.5f;  // each half-step FFN's share of the residual (residual_weight)

  // mtmd's log-mel front end (mtmd_audio_preprocessor_gemma4a).
  int sample_rate = 16000;   // Hz, mono
  int n_fft = 512;           // FFT size; the window is zero-padded to it on the right
  int frame_len = 320;       // periodic Hann window, 20 ms
  int hop = 160;             // 10 ms between frames
  float mel_floor = 1e-3f;   // log(max(mel, mel_floor))
  int chunk_seconds = 30;    // a clip is encoded in pieces of at most this long, each its own run of tokens

  int q_dim() const { return n_head * head_dim; }
};

}  // namespace lf
