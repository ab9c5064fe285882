// lf_audio: one clip through a Gemma 4 audio encoder (src/audio/), the features and embeddings
// printed for the agreement test with llama.cpp's (tests/js/support/llama_programs/llama_audio.cpp).
//   lf_audio MMPROJ.gguf SAMPLES.f32 [--threads N]
// SAMPLES.f32: 16 kHz mono samples, little-endian f32. stdout, one JSON object:
// {"n_mel", "chunks": [{"n_frames", "mel": [n_mel·n_frames, mel-major], "n_tokens", "n_embd", "embd": [n_tokens·n_embd]}]}.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "audio/audio_encoder.h"
#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "native/mapped_file.h"

namespace {

void print_floats(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) std::printf(i ? ",%.9g" : "%.9g", x[i]);
}

lf::Status run(int argc, char** argv) {
  using lf::Status;
  if (argc < 3) return Status(lf::Code::invalid_argument, "usage: lf_audio MMPROJ SAMPLES.f32 [--threads N]");
  int threads = 1;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    else return Status(lf::Code::invalid_argument, std::string("unknown option '") + argv[i] + "'");
  }
  if (threads < 1 || threads > 256) return Status(lf::Code::invalid_argument, "--threads must be 1 to 256");
  lf::MappedFile file;
  LF_RETURN_IF_ERROR(lf::MappedFile::open(argv[1], &file));
  lf::GgufFile gguf;
  LF_RETURN_IF_ERROR(lf::gguf_parse(file.data(), file.size(), file.size(), &gguf));
  lf::AudioConfig c;
  LF_RETURN_IF_ERROR(lf::read_audio_config(gguf, &c));
  lf::AudioWeights weights;
  LF_RETURN_IF_ERROR(lf::audio_weights(gguf, c, file.data() + gguf.data_offset, file.size() - gguf.data_offset, &weights));

  lf::MappedFile clip;
  LF_RETURN_IF_ERROR(lf::MappedFile::open(argv[2], &clip));
  if (clip.size() % 4 != 0) return Status(lf::Code::invalid_argument, std::string("'") + argv[2] + "' is not a whole number of f32 samples");
  std::vector<float> samples(clip.size() / 4);
  if (!samples.empty()) std::memcpy(samples.data(), clip.data(), clip.size());

  const lf::LogMel mel(c);
  std::vector<lf::MelChunk> features;
  LF_RETURN_IF_ERROR(lf::audio_features(mel, samples.data(), static_cast<int64_t>(samples.size()), &features));
  lf::ThreadPool pool(threads);
  lf::AudioEmbeddings embd;
  LF_RETURN_IF_ERROR(lf::encode_audio(c, weights, mel, samples, &pool, &embd));
  std::printf("{\"n_mel\": %d, \"chunks\": [", c.n_mel);
  size_t row = 0;
  for (size_t i = 0; i < features.size(); ++i) {
    const int n_tokens = embd.chunk_tokens[i];
    std::printf("%s{\"n_frames\": %d, \"mel\": [", i ? ", " : "", features[i].n_frames);
    print_floats(features[i].data.data(), features[i].data.size());
    std::printf("], \"n_tokens\": %d, \"n_embd\": %d, \"embd\": [", n_tokens, c.n_embd_text);
    print_floats(embd.embd.data() + row * c.n_embd_text, static_cast<size_t>(n_tokens) * c.n_embd_text);
    std::printf("]}");
    row += static_cast<size_t>(n_tokens);
  }
  std::printf("]}\n");
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  const lf::Status s = run(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "lf_audio: %s: %s\n", lf::code_name(s.code()), s.message().c_str());
    return 1;
  }
  return 0;
}
