// The audio encoder's input as mtmd's gemma4a preprocessing computes it (docs/audio.md,
// "Preprocessing (log-mel)"): 16 kHz samples cut into 30 s chunks, each framed 20 ms every 10 ms
// after a half frame of
// zeros, a periodic Hann window zero-padded to a 512-point FFT, magnitudes through an HTK mel
// filterbank without area normalization, floored at 0.001 and logged.
#pragma once

#include <cstdint>
#include <vector>

#include "audio/audio_config.h"
#include "base/status.h"

namespace lf {

// One chunk's features, mel-major as mtmd lays them out.
struct MelChunk {
  int n_frames = 0;
  std::vector<float> data;  // [n_mel, n_frames]
};

class LogMel {
 public:
  explicit LogMel(const AudioConfig& c);

  const AudioConfig& config() const { return c_; }

  // The chunks of n samples: offsets and lengths of each 30 s piece. Refused (naming the
  // lengths) when there are no samples or a piece is too short to give a frame.
  Status chunks(int64_t n_samples, std::vector<int64_t>* starts, std::vector<int64_t>* lengths) const;

  // A chunk of n samples zero-padded as the frames read it: half a window before, enough after.
  std::vector<float> padded_chunk(const float* samples, int64_t n) const;

  // Frames [f0, f1) of the chunk whose padded copy is `padded` into out->data (sized by the
  // caller for out->n_frames frames); scratch is the caller's, any size.
  void frames(const std::vector<float>& padded, int f0, int f1, MelChunk* out, std::vector<float>* scratch) const;

 private:
  void fft(float* in, int n, float* out) const;

  AudioConfig c_;
  std::vector<float> sin_, cos_;  // [n_fft] sin/cos(2πi/n_fft), the angles rounded to f32 as in mtmd's table
  std::vector<float> hann_;       // [n_fft] the frame_len-point window, then zeros
  std::vector<float> filters_;    // [n_mel, n_fft/2 + 1]
};

}  // namespace lf
