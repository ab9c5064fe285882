// Gemma 4's audio encoder on the engine's pool (docs/audio.md, "The encoder"): each 30 s chunk's
// log-mel features through two strided convolutions with channel LayerNorms, an input projection,
// n_layer Conformer blocks (half-step FFNs, chunked local attention with relative positions and
// a soft cap, the light convolution module), the output projection and the projection into the
// language model's width. Workers share each matrix's output rows and the tokens of every other
// step, so the bytes of the embeddings do not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "audio/audio_config.h"
#include "audio/audio_weights.h"
#include "audio/log_mel.h"
#include "base/status.h"
#include "base/thread_pool.h"

namespace lf {

// A clip's soft tokens: one run per 30 s chunk, in order.
struct AudioEmbeddings {
  std::vector<int> chunk_tokens;  // [chunks] soft tokens of each chunk
  std::vector<float> embd;        // [Σ chunk_tokens, n_embd_text]
};

// samples (16 kHz mono) -> the clip's embeddings; refused by name when a chunk gives no frame.
Status encode_audio(const AudioConfig& c, const AudioWeights& w, const LogMel& mel, std::vector<float> samples,
                    ThreadPool* pool, AudioEmbeddings* out);

// encode_audio without waiting: the encode handed to the pool, whose last worker calls done() when
// it is over (the caller's thread, before start returns, in the wasm32-wasi build).
class AudioEncoding {
 public:
  // Refused, nothing started, when the clip gives no frame or the pool is busy.
  static Status start(const AudioConfig& c, const AudioWeights& w, const LogMel& mel, std::vector<float> samples,
                      ThreadPool* pool, std::function<void()> done, std::unique_ptr<AudioEncoding>* out);
  ~AudioEncoding();
  // After done(): encode_audio's embeddings, or the failure of a worker; refused before.
  Status finish(AudioEmbeddings* out) const;

  struct State;
  // The encode of samples, its chunks checked, not started.
  static Status prepare(const AudioConfig& c, const AudioWeights& w, const LogMel& mel, std::vector<float> samples,
                        ThreadPool* pool, std::unique_ptr<State>* out);

 private:
  AudioEncoding();
  std::unique_ptr<State> state_;
};

// The features of each chunk alone (what the encoder reads), for comparisons with mtmd's.
Status audio_features(const LogMel& mel, const float* samples, int64_t n, std::vector<MelChunk>* out);

}  // namespace lf
