// llama.cpp's own costs of MTP drafting, for scripts/bench-drafter: after a prompt, one target
// decode step (one token, its logits), a verification of k drafted tokens (k rows, every row's
// logits) for each k, and one draft step of a gemma4-assistant drafter over the target's cache,
// set up as llama_mtp_draft.cpp does (the drafter's context made before the target decodes). Each
// is timed reps times from the same cache: the rows a step adds are removed before the next.
//   llama_mtp_bench TARGET.gguf DRAFTER.gguf PROMPT_LEN MAX_K BACKEND_DIR THREADS REPS
// stdout, one JSON object of milliseconds: {"decode": [...], "verify": {"1": [...], ...}, "draft": [...]}.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

void llama_set_embeddings_nextn(llama_context* ctx, bool value, bool masked);
float* llama_get_embeddings_nextn_ith(llama_context* ctx, int32_t i);

namespace {

llama_context_params context_params(int threads) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512;
  cp.n_batch = 512;
  cp.n_ubatch = 512;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
  cp.type_k = GGML_TYPE_F16;
  cp.type_v = GGML_TYPE_F16;
  cp.swa_full = false;
  return cp;
}

// Tokens of the synthetic vocabularies, away from the control tokens at its start.
llama_token token_at(int i) { return 10 + (i * 37) % 500; }

void fill(llama_batch* b, int n, int pos0, bool all_logits) {
  b->n_tokens = n;
  for (int i = 0; i < n; ++i) {
    b->token[i] = token_at(pos0 + i);
    b->pos[i] = pos0 + i;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = 0;
    b->logits[i] = all_logits || i + 1 == n;
  }
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One decode of n rows at pos0, its outputs read, then the rows removed from the cache.
double timed_decode(llama_context* ctx, llama_batch* b, int n, int pos0, bool all_logits) {
  fill(b, n, pos0, all_logits);
  const auto t0 = std::chrono::steady_clock::now();
  if (llama_decode(ctx, *b) != 0) std::exit(1);
  llama_synchronize(ctx);
  const double ms = ms_since(t0);
  if (!llama_memory_seq_rm(llama_get_memory(ctx), 0, pos0, -1)) std::exit(1);
  return ms;
}

void print_list(const char* name, const std::vector<double>& v) {
  std::printf("\"%s\": [", name);
  for (size_t i = 0; i < v.size(); ++i) std::printf(i ? ",%.4f" : "%.4f", v[i]);
  std::printf("]");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: llama_mtp_bench TARGET.gguf DRAFTER.gguf PROMPT_LEN MAX_K BACKEND_DIR THREADS REPS\n");
    return 2;
  }
  const int n_prompt = std::atoi(argv[3]), max_k = std::atoi(argv[4]), threads = std::atoi(argv[6]),
            reps = std::atoi(argv[7]);
  ggml_backend_load_all_from_path(argv[5]);
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* target = llama_model_load_from_file(argv[1], mp);
  llama_model* drafter = llama_model_load_from_file(argv[2], mp);
  if (!target || !drafter || n_prompt < 1 || max_k < 1 || reps < 1) return 1;
  llama_context* ctx_tgt = llama_init_from_model(target, context_params(threads));
  if (!ctx_tgt) return 1;
  llama_set_embeddings_nextn(ctx_tgt, true, false);
  llama_context_params dp = context_params(threads);
  dp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
  dp.ctx_other = ctx_tgt;
  llama_context* ctx_dft = llama_init_from_model(drafter, dp);
  if (!ctx_dft) return 1;
  llama_set_embeddings_nextn(ctx_dft, true, true);

  llama_batch batch = llama_batch_init(n_prompt + max_k, 0, 1);
  fill(&batch, n_prompt, 0, false);
  if (llama_decode(ctx_tgt, batch) != 0) return 1;
  const int n_embd = llama_model_n_embd(target);
  const float* h = llama_get_embeddings_nextn_ith(ctx_tgt, n_prompt - 1);
  llama_batch step = llama_batch_init(1, n_embd, 1);
  step.token = static_cast<llama_token*>(std::malloc(sizeof(llama_token)));
  step.n_tokens = 1;
  step.token[0] = token_at(n_prompt);
  for (int j = 0; j < n_embd; ++j) step.embd[j] = h[j];
  step.pos[0] = n_prompt;
  step.n_seq_id[0] = 1;
  step.seq_id[0][0] = 0;
  step.logits[0] = 1;

  std::vector<double> decode, draft;
  std::vector<std::vector<double>> verify(max_k + 1);
  // One warm-up of each, then the reps, each kind in turn so that drift falls on all alike.
  for (int r = -1; r < reps; ++r) {
    const double d = timed_decode(ctx_tgt, &batch, 1, n_prompt, true);
    const auto t0 = std::chrono::steady_clock::now();
    if (llama_decode(ctx_dft, step) != 0) return 1;
    llama_synchronize(ctx_dft);
    const double s = ms_since(t0);
    if (r >= 0) {
      decode.push_back(d);
      draft.push_back(s);
    }
    for (int k = 1; k <= max_k; ++k) {
      const double v = timed_decode(ctx_tgt, &batch, k, n_prompt, true);
      if (r >= 0) verify[k].push_back(v);
    }
  }
  std::printf("{");
  print_list("decode", decode);
  std::printf(", ");
  print_list("draft", draft);
  std::printf(", \"verify\": {");
  for (int k = 1; k <= max_k; ++k) {
    std::printf(k > 1 ? ", \"%d\": " : "\"%d\": ", k);
    std::printf("[");
    for (size_t i = 0; i < verify[k].size(); ++i) std::printf(i ? ",%.4f" : "%.4f", verify[k][i]);
    std::printf("]");
  }
  std::printf("}}\n");
  llama_batch_free(step);
  llama_batch_free(batch);
  llama_free(ctx_dft);
  llama_free(ctx_tgt);
  llama_model_free(drafter);
  llama_model_free(target);
  return 0;
}
