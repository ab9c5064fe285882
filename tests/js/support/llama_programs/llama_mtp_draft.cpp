// llama.cpp's MTP drafting with a gemma4-assistant drafter, as common/speculative.cpp's
// draft-mtp drives it: the target decodes the prompt and hands the drafter its last row's
// output-normed hidden state (llama_get_embeddings_nextn_ith); each draft step then decodes the
// last token with that state at position n_past through the drafter's context, which shares the
// target's KV cache (ctx_other), and hands the next step its logits and h_nextn. Built at test
// time against the oracle's libllama (tests/js/support/llama_mtp_draft.mjs).
//   llama_mtp_draft TARGET.gguf DRAFTER.gguf PROMPT(csv) DRAFT_TOKENS(csv) BACKEND_DIR [threads]
// The first draft token is the one after the prompt, the others the drafted tokens fed back.
// stdout, one JSON object: {"h": the target's state, "steps": [{"logits": [...], "h_next": [...]}]}.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

// llama.cpp's staging API for MTP (src/llama-ext.h), exported with C++ linkage.
void llama_set_embeddings_nextn(llama_context* ctx, bool value, bool masked);
float* llama_get_embeddings_nextn_ith(llama_context* ctx, int32_t i);

namespace {

std::vector<llama_token> parse_tokens(const char* csv) {
  std::vector<llama_token> out;
  std::stringstream in(csv);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

void print_floats(const char* name, const float* x, int n) {
  std::printf("\"%s\": [", name);
  for (int i = 0; i < n; ++i) std::printf(i ? ",%.9g" : "%.9g", x[i]);
  std::printf("]");
}

// The oracle's context settings (js-glue/src/cli/llama_reference.js): F16 K/V, flash attention
// auto, SWA cache not full.
llama_context_params context_params(int threads) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
  cp.type_k = GGML_TYPE_F16;
  cp.type_v = GGML_TYPE_F16;
  cp.swa_full = false;
  return cp;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: llama_mtp_draft TARGET.gguf DRAFTER.gguf PROMPT DRAFT_TOKENS BACKEND_DIR [threads]\n");
    return 2;
  }
  const std::vector<llama_token> prompt = parse_tokens(argv[3]), drafts = parse_tokens(argv[4]);
  const int threads = argc > 6 ? std::atoi(argv[6]) : 2;
  ggml_backend_load_all_from_path(argv[5]);
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* target = llama_model_load_from_file(argv[1], mp);
  llama_model* drafter = llama_model_load_from_file(argv[2], mp);
  if (!target || !drafter || prompt.empty() || drafts.empty()) return 1;

  llama_context* ctx_tgt = llama_init_from_model(target, context_params(threads));
  if (!ctx_tgt) return 1;
  llama_set_embeddings_nextn(ctx_tgt, true, false);
  // Before the target decodes anything, as llama.cpp's server makes it: creating a context
  // clears the cells of the cache it shares with the target.
  llama_context_params dp = context_params(threads);
  dp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
  dp.ctx_other = ctx_tgt;
  llama_context* ctx_dft = llama_init_from_model(drafter, dp);
  if (!ctx_dft) return 1;
  llama_set_embeddings_nextn(ctx_dft, true, true);
  llama_batch batch = llama_batch_init(static_cast<int32_t>(prompt.size()), 0, 1);
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.token[i] = prompt[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = i + 1 == prompt.size();
  }
  batch.n_tokens = static_cast<int32_t>(prompt.size());
  if (llama_decode(ctx_tgt, batch) != 0) return 1;
  const int n_embd = llama_model_n_embd(target);
  std::vector<float> h(llama_get_embeddings_nextn_ith(ctx_tgt, static_cast<int32_t>(prompt.size()) - 1),
                       llama_get_embeddings_nextn_ith(ctx_tgt, static_cast<int32_t>(prompt.size()) - 1) + n_embd);

  // One row carrying both the token and the state, as draft-mtp's batches do.
  llama_batch step = llama_batch_init(1, n_embd, 1);
  step.token = static_cast<llama_token*>(std::malloc(sizeof(llama_token)));
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(drafter));

  std::printf("{");
  print_floats("h", h.data(), n_embd);
  std::printf(", \"steps\": [");
  for (size_t k = 0; k < drafts.size(); ++k) {
    step.n_tokens = 1;
    step.token[0] = drafts[k];
    for (int j = 0; j < n_embd; ++j) step.embd[j] = h[j];
    step.pos[0] = static_cast<llama_pos>(prompt.size());
    step.n_seq_id[0] = 1;
    step.seq_id[0][0] = 0;
    step.logits[0] = 1;
    if (llama_decode(ctx_dft, step) != 0) return 1;
    const float* h_next = llama_get_embeddings_nextn_ith(ctx_dft, 0);
    std::printf(k ? ", {" : "{");
    print_floats("logits", llama_get_logits_ith(ctx_dft, 0), n_vocab);
    std::printf(", ");
    print_floats("h_next", h_next, n_embd);
    std::printf("}");
    h.assign(h_next, h_next + n_embd);
  }
  std::printf("]}\n");
  llama_batch_free(step);
  llama_batch_free(batch);
  llama_free(ctx_dft);
  llama_free(ctx_tgt);
  llama_model_free(drafter);
  llama_model_free(target);
  return 0;
}
