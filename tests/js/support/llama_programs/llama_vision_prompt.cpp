// llama.cpp with an image or an audio clip in the prompt (libmtmd compiled from the oracle's
// source against its prebuilt libllama and libggml; tests/js/support/llama_vision_prompt.mjs): a
// model, its projector, a raw RGB image (or, with WIDTH and HEIGHT 0, 16 kHz f32 samples) and a
// prompt whose media marker (<__media__>) stands for it,
// evaluated as mtmd's helper does (text in batches, the image's rows in one decode, non-causal
// where mtmd says so), then greedy tokens.
//   llama_vision_prompt MODEL.gguf MMPROJ.gguf IMAGE.rgb WIDTH HEIGHT PROMPT BACKEND_DIR
//                       [threads] [max_tokens] [n_greedy] [cache_type_k] [cache_type_v]
// (cache types f16, q8_0 or q4_0)
// stdout, one JSON object: {"chunks": [{"type": "text", "tokens": [...]} or {"type": "image" | "audio",
// "n_tokens", "non_causal"}], "logits": [n_vocab] (after the prompt), "greedy": [n_greedy]}.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

namespace {

void print_floats(const float* v, int n) {
  for (int i = 0; i < n; ++i) std::printf(i ? ",%.9g" : "%.9g", v[i]);
}

ggml_type cache_type(const char* name) {
  const std::string s = name;
  return s == "q8_0" ? GGML_TYPE_Q8_0 : s == "q4_0" ? GGML_TYPE_Q4_0 : GGML_TYPE_F16;
}

int argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) best = v[i] > v[best] ? i : best;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: llama_vision_prompt MODEL MMPROJ IMAGE.rgb WIDTH HEIGHT PROMPT BACKEND_DIR [threads] [max_tokens] [n_greedy] [cache_type_k] [cache_type_v]\n");
    return 2;
  }
  const int width = std::atoi(argv[4]), height = std::atoi(argv[5]);
  const int threads = argc > 8 ? std::atoi(argv[8]) : 2;
  const int max_tokens = argc > 9 ? std::atoi(argv[9]) : -1;
  const int n_greedy = argc > 10 ? std::atoi(argv[10]) : 16;
  ggml_backend_load_all_from_path(argv[7]);

  // WIDTH and HEIGHT 0: the file is an audio clip, 16 kHz mono f32 samples.
  const bool audio = width == 0 && height == 0;
  std::vector<unsigned char> rgb(static_cast<size_t>(width) * height * 3);
  std::vector<float> samples;
  std::FILE* f = std::fopen(argv[3], "rb");
  if (audio && f) {
    float buf[4096];
    for (size_t n; (n = std::fread(buf, sizeof(float), 4096, f)) > 0;) samples.insert(samples.end(), buf, buf + n);
  }
  if (!f || (!audio && std::fread(rgb.data(), 1, rgb.size(), f) != rgb.size()) || (audio && samples.empty())) {
    std::fprintf(stderr, "cannot read %s\n", argv[3]);
    return 1;
  }
  std::fclose(f);

  llama_model_params mparams = llama_model_default_params();
  mparams.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mparams);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  // One ubatch holds the whole prompt: an image's rows must be in one when they attend both ways.
  llama_context_params cparams = llama_context_default_params();
  cparams.n_ctx = 1024;
  cparams.n_batch = 512;
  cparams.n_ubatch = 512;
  cparams.n_threads = threads;
  cparams.n_threads_batch = threads;
  cparams.type_k = cache_type(argc > 11 ? argv[11] : "f16");
  cparams.type_v = cache_type(argc > 12 ? argv[12] : "f16");
  llama_context* lctx = llama_init_from_model(model, cparams);
  if (!lctx) {
    std::fprintf(stderr, "cannot make a context\n");
    return 1;
  }

  mtmd_context_params vparams = mtmd_context_params_default();
  vparams.use_gpu = false;
  vparams.print_timings = false;
  vparams.n_threads = threads;
  vparams.warmup = false;
  vparams.image_max_tokens = max_tokens;
  mtmd_context* vctx = mtmd_init_from_file(argv[2], model, vparams);
  if (!vctx) {
    std::fprintf(stderr, "cannot load the projector %s\n", argv[2]);
    return 1;
  }

  mtmd_bitmap* bitmap = audio ? mtmd_bitmap_init_from_audio(samples.size(), samples.data()) : mtmd_bitmap_init(width, height, rgb.data());
  mtmd_input_text text{argv[6], std::strlen(argv[6]), true, true};
  mtmd_input_chunks* chunks = mtmd_input_chunks_init();
  const mtmd_bitmap* bitmaps[] = {bitmap};
  if (mtmd_tokenize(vctx, chunks, &text, bitmaps, 1) != 0) {
    std::fprintf(stderr, "mtmd_tokenize failed\n");
    return 1;
  }
  llama_pos n_past = 0;
  if (mtmd_helper_eval_chunks(vctx, lctx, chunks, 0, 0, cparams.n_batch, true, &n_past) != 0) {
    std::fprintf(stderr, "mtmd_helper_eval_chunks failed\n");
    return 1;
  }

  std::printf("{\"chunks\": [");
  for (size_t i = 0; i < mtmd_input_chunks_size(chunks); ++i) {
    const mtmd_input_chunk* chunk = mtmd_input_chunks_get(chunks, i);
    std::printf(i ? ", " : "");
    if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
      size_t n = 0;
      const llama_token* tokens = mtmd_input_chunk_get_tokens_text(chunk, &n);
      std::printf("{\"type\": \"text\", \"tokens\": [");
      for (size_t j = 0; j < n; ++j) std::printf(j ? ",%d" : "%d", tokens[j]);
      std::printf("]}");
    } else {
      const bool is_audio = mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_AUDIO;
      std::printf("{\"type\": \"%s\", \"n_tokens\": %zu, \"non_causal\": %s}", is_audio ? "audio" : "image",
                  mtmd_input_chunk_get_n_tokens(chunk), mtmd_decode_use_non_causal(vctx, chunk) ? "true" : "false");
    }
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  const float* logits = llama_get_logits_ith(lctx, -1);
  std::printf("], \"logits\": [");
  print_floats(logits, n_vocab);
  std::printf("], \"greedy\": [");
  int token = argmax(logits, n_vocab);
  for (int i = 0; i < n_greedy; ++i) {
    std::printf(i ? ",%d" : "%d", token);
    llama_batch one = llama_batch_get_one(&token, 1);
    if (llama_decode(lctx, one) != 0) {
      std::fprintf(stderr, "llama_decode failed\n");
      return 1;
    }
    token = argmax(llama_get_logits_ith(lctx, -1), n_vocab);
  }
  std::printf("]}\n");
  mtmd_input_chunks_free(chunks);
  mtmd_bitmap_free(bitmap);
  mtmd_free(vctx);
  llama_free(lctx);
  llama_model_free(model);
  return 0;
}
