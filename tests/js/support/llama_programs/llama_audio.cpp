// llama.cpp's Gemma 4 audio encoder (tools/mtmd: clip.cpp, mtmd-audio.cpp, models/gemma4a.cpp,
// compiled into this program against the oracle's prebuilt libggml; tests/js/support/llama_audio.mjs):
// an mmproj and raw PCM in, the log-mel chunks mtmd makes of it and the embeddings the language
// model would receive for each out, by the calls mtmd.cpp makes for an audio input.
//   llama_audio MMPROJ.gguf PCM.f32 BACKEND_DIR [threads] [reps]
// PCM.f32: little-endian f32 samples, 16 kHz mono. stdout, one JSON object:
// {"n_mel", "preprocess_ms", "chunks": [{"n_frames", "mel": [n_mel·n_frames, mel[m·n_frames + t]: bin m
// of frame t], "n_tokens", "n_embd", "encode_ms" (the fastest of reps encodes), "embd": [n_tokens·n_embd]}]}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "clip.h"
#include "clip-impl.h"
#include "ggml-backend.h"
#include "mtmd-audio.h"

static double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

static void print_floats(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) std::printf(i ? ",%.9g" : "%.9g", x[i]);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: llama_audio MMPROJ PCM.f32 BACKEND_DIR [threads] [reps]\n");
    return 2;
  }
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
  const int reps = argc > 5 ? std::max(1, std::atoi(argv[5])) : 1;
  ggml_backend_load_all_from_path(argv[3]);

  std::FILE* f = std::fopen(argv[2], "rb");
  if (!f) {
    std::fprintf(stderr, "cannot open %s\n", argv[2]);
    return 1;
  }
  std::vector<float> samples;
  float buf[4096];
  for (size_t n; (n = std::fread(buf, sizeof(float), 4096, f)) > 0;) samples.insert(samples.end(), buf, buf + n);
  std::fclose(f);

  // mtmd's defaults: CPU, flash attention auto, no warmup (this program encodes once per rep).
  clip_context_params params{};
  params.use_gpu = false;
  params.flash_attn_type = CLIP_FLASH_ATTN_TYPE_AUTO;
  params.image_min_tokens = -1;
  params.image_max_tokens = -1;
  params.warmup = false;
  clip_init_result init = clip_init(argv[1], params);
  if (!init.ctx_a) {
    std::fprintf(stderr, "clip_init found no audio encoder in %s\n", argv[1]);
    return 1;
  }
  clip_ctx* ctx = init.ctx_a;

  // As mtmd's init_audio and tokenize do for a gemma4a projector.
  mtmd_audio_preprocessor_gemma4a preprocessor(ctx);
  preprocessor.initialize();
  std::vector<mtmd_audio_mel> chunks;
  const auto t0 = std::chrono::steady_clock::now();
  if (!preprocessor.preprocess(samples.data(), samples.size(), chunks)) {
    std::fprintf(stderr, "preprocessing %zu samples failed\n", samples.size());
    return 1;
  }
  const double preprocess_ms = ms_since(t0);

  const int n_embd = clip_n_mmproj_embd(ctx);
  std::printf("{\"n_mel\": %d, \"preprocess_ms\": %.3f, \"chunks\": [", chunks.empty() ? 0 : static_cast<int>(chunks[0].n_mel),
              preprocess_ms);
  for (size_t c = 0; c < chunks.size(); ++c) {
    const mtmd_audio_mel& mel = chunks[c];
    // mtmd hands the whole buffer on as n_mel rows of n_len frames: a buffer of any other size
    // would be read in another layout than the one printed.
    if (mel.data.size() != static_cast<size_t>(mel.n_mel) * mel.n_len) {
      std::fprintf(stderr, "chunk %zu: %zu mel values for %lld x %lld\n", c, mel.data.size(), (long long)mel.n_mel, (long long)mel.n_len);
      return 1;
    }
    clip_image_f32 input;
    input.set_size({static_cast<int>(mel.n_len), static_cast<int>(mel.n_mel)}, false, /* is_audio */ true);
    input.cpy_buf(mel.data);
    const int n_tokens = clip_n_output_tokens(ctx, &input);
    clip_image_f32_batch batch;
    batch.is_audio = true;
    batch.entries.push_back(input);
    // clip_image_batch_encode copies into the vector's existing storage only.
    std::vector<float> embd(static_cast<size_t>(n_tokens) * n_embd);
    double best_ms = 0;
    for (int rep = 0; rep < reps; ++rep) {
      const auto t1 = std::chrono::steady_clock::now();
      if (!clip_image_batch_encode(ctx, threads, &batch, embd)) {
        std::fprintf(stderr, "clip_image_batch_encode failed on chunk %zu\n", c);
        return 1;
      }
      const double ms = ms_since(t1);
      if (rep == 0 || ms < best_ms) best_ms = ms;
    }
    std::printf("%s{\"n_frames\": %d, \"mel\": [", c ? ", " : "", static_cast<int>(mel.n_len));
    print_floats(mel.data.data(), static_cast<size_t>(mel.n_mel) * mel.n_len);
    std::printf("], \"n_tokens\": %d, \"n_embd\": %d, \"encode_ms\": %.3f, \"embd\": [", n_tokens, n_embd, best_ms);
    print_floats(embd.data(), embd.size());
    std::printf("]}");
  }
  std::printf("]}\n");
  clip_free(ctx);
  if (init.ctx_v) clip_free(init.ctx_v);
  return 0;
}
