// llama.cpp's Gemma 4 vision tower (tools/mtmd: clip.cpp, mtmd-image.cpp, models/gemma4v.cpp,
// compiled into this program against the oracle's prebuilt libggml; tests/js/support/llama_vision.mjs):
// an mmproj and a raw RGB image in, the image as mtmd preprocesses it and the embeddings the
// language model would receive out.
//   llama_vision MMPROJ.gguf IMAGE.rgb WIDTH HEIGHT BACKEND_DIR [threads] [max_tokens] [reps]
// IMAGE.rgb: WIDTH·HEIGHT·3 bytes, interleaved RGB. stdout, one JSON object:
// {"width", "height" (the preprocessed size), "n_tokens", "n_embd", "encode_ms" (the fastest of reps
// preprocessings and encodes), "embd": [n_tokens·n_embd]}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "clip.h"
#include "clip-impl.h"
#include "ggml-backend.h"
#include "mtmd-image.h"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: llama_vision MMPROJ IMAGE.rgb WIDTH HEIGHT BACKEND_DIR [threads] [max_tokens] [reps]\n");
    return 2;
  }
  const int width = std::atoi(argv[3]), height = std::atoi(argv[4]);
  const int threads = argc > 6 ? std::atoi(argv[6]) : 2;
  const int max_tokens = argc > 7 ? std::atoi(argv[7]) : -1;
  const int reps = argc > 8 ? std::max(1, std::atoi(argv[8])) : 1;  // encodes timed, the fastest reported
  ggml_backend_load_all_from_path(argv[5]);

  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  std::FILE* f = std::fopen(argv[2], "rb");
  if (!f || std::fread(rgb.data(), 1, rgb.size(), f) != rgb.size()) {
    std::fprintf(stderr, "cannot read %zu bytes of %s\n", rgb.size(), argv[2]);
    return 1;
  }
  std::fclose(f);

  // mtmd's defaults: CPU, flash attention auto (enabled on the CPU), the model's token budget.
  clip_context_params params{};
  params.use_gpu = false;
  params.flash_attn_type = CLIP_FLASH_ATTN_TYPE_AUTO;
  params.image_min_tokens = -1;
  params.image_max_tokens = max_tokens;
  params.warmup = false;
  clip_init_result init = clip_init(argv[1], params);
  if (!init.ctx_v) {
    std::fprintf(stderr, "clip_init failed\n");
    return 1;
  }
  clip_ctx* ctx = init.ctx_v;

  clip_image_u8 image;
  image.set_size({width, height}, false);
  image.cpy_buf(rgb);
  const mtmd_image_preprocessor_dyn_size preprocessor(ctx);
  // Each rep from the RGB bytes to the embeddings, preprocessing included, as ours is timed.
  std::vector<float> embd;
  clip_image_f32 input;
  int n_tokens = 0, n_embd = 0;
  double best_ms = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    mtmd_image_preproc_out out = preprocessor.preprocess(image);
    if (out.entries.size() != 1) {
      std::fprintf(stderr, "expected one preprocessed image, got %zu\n", out.entries.size());
      return 1;
    }
    input = out.entries[0];
    n_tokens = clip_n_output_tokens(ctx, &input);
    n_embd = clip_n_mmproj_embd(ctx);
    // clip_image_encode copies into the vector's existing storage only.
    embd.resize(static_cast<size_t>(n_tokens) * n_embd);
    if (!clip_image_encode(ctx, threads, &input, embd)) {
      std::fprintf(stderr, "clip_image_encode failed\n");
      return 1;
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rep == 0 || ms < best_ms) best_ms = ms;
  }
  std::printf("{\"width\": %d, \"height\": %d, \"n_tokens\": %d, \"n_embd\": %d, \"encode_ms\": %.3f, \"embd\": [",
              input.nx(), input.ny(), n_tokens, n_embd, best_ms);
  for (size_t i = 0; i < static_cast<size_t>(n_tokens) * n_embd; ++i) std::printf(i ? ",%.9g" : "%.9g", embd[i]);
  std::printf("]}\n");
  clip_free(ctx);
  return 0;
}
