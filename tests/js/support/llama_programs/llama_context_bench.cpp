// llama.cpp's speed at long context, for scripts/bench-context: a prompt of PROMPT_LEN tokens
// evaluated in batches of 512 (prefill, timed), then DECODES single-token steps after it (each
// timed), with its KV cache in CACHE_K / CACHE_V (f16, q8_0, q4_0) and flash attention as
// llama.cpp's CPU backend chooses it; the sliding layers keep their window only.
//   llama_context_bench MODEL.gguf PROMPT_LEN DECODES CACHE_K CACHE_V BACKEND_DIR THREADS
// stdout, one JSON object: {"prefill_ms": X, "decode_ms": [...], "rss_mib": X, "kv_mib": X}.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

constexpr int kBatch = 512;

ggml_type cache_type(const char* name) {
  if (std::strcmp(name, "f16") == 0) return GGML_TYPE_F16;
  if (std::strcmp(name, "q8_0") == 0) return GGML_TYPE_Q8_0;
  if (std::strcmp(name, "q4_0") == 0) return GGML_TYPE_Q4_0;
  std::fprintf(stderr, "llama_context_bench: unknown cache type %s\n", name);
  std::exit(2);
}

// The prompt scripts/bench-context gives our engine too: tokens away from the control tokens.
llama_token token_at(int i) { return 10 + (i * 37 + 77) % 4000; }

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Resident memory of this process, from /proc/self/status (kB).
double rss_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return -1;
}

// Decodes tokens [pos0, pos0 + n) as one batch, the last row's logits asked for.
void decode(llama_context* ctx, llama_batch* b, int pos0, int n) {
  b->n_tokens = n;
  for (int i = 0; i < n; ++i) {
    b->token[i] = token_at(pos0 + i);
    b->pos[i] = pos0 + i;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = 0;
    b->logits[i] = i + 1 == n;
  }
  if (llama_decode(ctx, *b) != 0) {
    std::fprintf(stderr, "llama_context_bench: llama_decode failed at position %d\n", pos0);
    std::exit(1);
  }
  llama_synchronize(ctx);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: llama_context_bench MODEL.gguf PROMPT_LEN DECODES CACHE_K CACHE_V BACKEND_DIR THREADS\n");
    return 2;
  }
  const int n_prompt = std::atoi(argv[2]), n_decode = std::atoi(argv[3]), threads = std::atoi(argv[7]);
  ggml_backend_load_all_from_path(argv[6]);
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model || n_prompt < 1 || n_decode < 1) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n_prompt + n_decode;
  cp.n_batch = kBatch;
  cp.n_ubatch = kBatch;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
  cp.type_k = cache_type(argv[4]);
  cp.type_v = cache_type(argv[5]);
  cp.swa_full = false;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;

  llama_batch batch = llama_batch_init(kBatch, 0, 1);
  const auto t0 = std::chrono::steady_clock::now();
  for (int p = 0; p < n_prompt; p += kBatch) decode(ctx, &batch, p, std::min(kBatch, n_prompt - p));
  const double prefill_ms = ms_since(t0);
  std::vector<double> steps;
  for (int k = 0; k < n_decode; ++k) {
    const auto t1 = std::chrono::steady_clock::now();
    decode(ctx, &batch, n_prompt + k, 1);
    steps.push_back(ms_since(t1));
  }
  std::printf("{\"prefill_ms\": %.3f, \"decode_ms\": [", prefill_ms);
  for (size_t i = 0; i < steps.size(); ++i) std::printf(i ? ",%.4f" : "%.4f", steps[i]);
  std::printf("], \"rss_mib\": %.1f, \"kv_mib\": %.2f}\n", rss_mib(),
              llama_state_seq_get_size(ctx, 0) / 1048576.0);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
