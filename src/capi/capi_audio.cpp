// C ABI over Gemma 4's audio encoder (audio/): a projector read from its header and tensor data,
// its own pool of workers, and 16 kHz clips encoded into soft-token embeddings.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "audio/audio_encoder.h"
#include "capi/capi_internal.h"
#include "layerfold/capi.h"

struct lf_audio {
  lf::AudioConfig config;
  lf::AudioWeights weights;
  std::unique_ptr<lf::LogMel> mel;
  std::unique_ptr<lf::ThreadPool> pool;
  std::unique_ptr<lf::AudioEncoding> pending;  // the clip lf_audio_encode_async started
};

namespace {

using lf::Code;
using lf::Status;

// A clip's samples as a count: whole, positive and within what a 32-bit module could hold.
bool sample_count(double n_samples, int64_t* out) {
  if (!(n_samples >= 1) || n_samples > 1e9 || n_samples != static_cast<double>(static_cast<int64_t>(n_samples))) {
    return lf::capi::record(Status(Code::invalid_argument, "a clip's sample count must be a whole number from 1 to 1e9"));
  }
  *out = static_cast<int64_t>(n_samples);
  return true;
}

}  // namespace

extern "C" {

lf_audio* lf_audio_create(lf_gguf* gguf, const uint8_t* data, double size, int n_threads) {
  if (!gguf || !data) {
    lf::capi::record(Status(Code::invalid_argument, "lf_audio_create needs the projector's header and tensor data"));
    return nullptr;
  }
  if (n_threads < 1 || n_threads > lf::kMaxThreads) {
    lf::capi::record(Status(Code::invalid_argument, "thread count " + std::to_string(n_threads) + " is outside [1, " +
                                                        std::to_string(lf::kMaxThreads) + "]"));
    return nullptr;
  }
  auto audio = std::make_unique<lf_audio>();
  if (!lf::capi::record(lf::read_audio_config(gguf->file, &audio->config))) return nullptr;
  if (!lf::capi::record(lf::audio_weights(gguf->file, audio->config, data, static_cast<uint64_t>(size), &audio->weights))) {
    return nullptr;
  }
  audio->mel = std::make_unique<lf::LogMel>(audio->config);
  audio->pool = std::make_unique<lf::ThreadPool>(n_threads);
  return audio.release();
}

int lf_audio_n_embd_text(const lf_audio* audio) { return audio ? audio->config.n_embd_text : 0; }

int lf_audio_tokens(const lf_audio* audio, double n_samples, int32_t* chunk_tokens, int max_chunks) {
  if (!audio) {
    lf::capi::record(Status(Code::invalid_argument, "no audio encoder"));
    return -1;
  }
  int64_t n = 0;
  if (!sample_count(n_samples, &n)) return -1;
  std::vector<int64_t> starts, lengths;
  if (!lf::capi::record(audio->mel->chunks(n, &starts, &lengths))) return -1;
  for (size_t i = 0; i < lengths.size() && static_cast<int>(i) < max_chunks && chunk_tokens; ++i) {
    chunk_tokens[i] = lf::AudioConfig::tokens(audio->config.frames(lengths[i]));
  }
  return static_cast<int>(lengths.size());
}

int lf_audio_encode_async(lf_audio* audio, const float* samples, double n_samples, int32_t* done_flag) {
  int64_t n = 0;
  if (!audio || !samples || !done_flag) {
    lf::capi::record(Status(Code::invalid_argument, "lf_audio_encode_async needs an encoder, the samples and a flag"));
    return -1;
  }
  if (!sample_count(n_samples, &n)) return -1;
  if (audio->pending) {
    lf::capi::record(Status(Code::failed_precondition, "the audio encoder's last clip was not taken: lf_audio_encode_result first"));
    return -1;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(samples[i])) {
      lf::capi::record(Status(Code::invalid_argument, "sample " + std::to_string(i) + " of the clip is not a finite number"));
      return -1;
    }
  }
  *done_flag = 0;
  if (!lf::capi::record(lf::AudioEncoding::start(audio->config, audio->weights, *audio->mel,
                                                 std::vector<float>(samples, samples + n), audio->pool.get(),
                                                 [done_flag] { lf::capi::publish(done_flag, 1); }, &audio->pending))) {
    return -1;
  }
  return 0;
}

int lf_audio_encode_result(lf_audio* audio, float* embd, int32_t* chunk_tokens, int max_chunks) {
  if (!audio || !audio->pending || !embd) {
    lf::capi::record(Status(Code::failed_precondition, "no clip encoded to take (lf_audio_encode_async first)"));
    return -1;
  }
  const std::unique_ptr<lf::AudioEncoding> done = std::move(audio->pending);
  lf::AudioEmbeddings out;
  if (!lf::capi::record(done->finish(&out))) return -1;
  std::copy(out.embd.begin(), out.embd.end(), embd);
  for (size_t i = 0; i < out.chunk_tokens.size() && static_cast<int>(i) < max_chunks && chunk_tokens; ++i) {
    chunk_tokens[i] = out.chunk_tokens[i];
  }
  return static_cast<int>(out.embd.size() / static_cast<size_t>(audio->config.n_embd_text));
}

void lf_audio_free(lf_audio* audio) {
  // Stop the workers before the weights' views go.
  if (audio != nullptr) audio->pool.reset();
  delete audio;
}

}  // extern "C"
