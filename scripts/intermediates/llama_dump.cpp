// llama.cpp's named intermediates for one prompt, from the very binaries the oracle runs
// (node-llama-cpp's prebuilt libllama and CPU backends, loaded as it loads them), through
// llama.cpp's eval callback. Built by scripts/compare-intermediates against the headers of the
// bundled llama.cpp source (the same release).
//
//   llama_dump MODEL.gguf TOKENS(csv) OUTDIR [threads] > log
//
// OUTDIR/<name>.bin per f32/f16 tensor the graph names (attn_norm-0, Qcur-0, kqv_out-0, l_out-1,
// ...; '/' and ' ' in a name become '_'): four int64 ne, then the values as f32. The last
// position's logits go to OUTDIR/final_logits.bin. The context settings are the oracle's
// (js-glue/src/cli/llama_reference.js): F16 K/V unless LF_CACHE_TYPE_K / _V name q8_0 or q4_0,
// flash attention auto, SWA cache not full.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

namespace {

std::string g_outdir;

void write_tensor(const std::string& name, const int64_t ne[4], const float* x, size_t n) {
  FILE* f = std::fopen((g_outdir + "/" + name + ".bin").c_str(), "wb");
  if (!f) return;
  std::fwrite(ne, sizeof(int64_t), 4, f);
  std::fwrite(x, sizeof(float), n, f);
  std::fclose(f);
}

// Asked first whether we want a node (always), then called with it computed.
bool on_tensor(ggml_tensor* t, bool ask, void*) {
  if (ask || !ggml_is_contiguous(t)) return true;
  std::vector<float> x(static_cast<size_t>(ggml_nelements(t)));
  if (t->type == GGML_TYPE_F32) {
    ggml_backend_tensor_get(t, x.data(), 0, ggml_nbytes(t));
  } else if (t->type == GGML_TYPE_F16) {
    std::vector<ggml_fp16_t> h(x.size());
    ggml_backend_tensor_get(t, h.data(), 0, ggml_nbytes(t));
    for (size_t i = 0; i < h.size(); ++i) x[i] = ggml_fp16_to_fp32(h[i]);
  } else {
    return true;
  }
  std::string name = t->name;
  for (char& c : name) if (c == '/' || c == ' ') c = '_';
  const int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
  write_tensor(name, ne, x.data(), x.size());
  std::printf("%s %s [%lld %lld %lld] %s\n", t->name, ggml_type_name(t->type), static_cast<long long>(ne[0]),
              static_cast<long long>(ne[1]), static_cast<long long>(ne[2]), ggml_op_desc(t));
  return true;
}

}  // namespace

// A cache type by llama.cpp's name from the environment (lf_dump reads the same variables); f16
// when unset.
static ggml_type cache_type(const char* variable) {
  const char* name = std::getenv(variable);
  if (!name || std::string(name) == "f16") return GGML_TYPE_F16;
  if (std::string(name) == "q8_0") return GGML_TYPE_Q8_0;
  if (std::string(name) == "q4_0") return GGML_TYPE_Q4_0;
  std::fprintf(stderr, "%s: unsupported cache type %s\n", variable, name);
  std::exit(2);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: llama_dump MODEL.gguf TOKENS OUTDIR BACKEND_DIR [threads]\n");
    return 2;
  }
  g_outdir = argv[3];
  const int threads = argc > 5 ? std::atoi(argv[5]) : 2;
  // The CPU variant is chosen as node-llama-cpp's addon chooses it: the best one this CPU runs.
  ggml_backend_load_all_from_path(argv[4]);
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t d = ggml_backend_dev_get(i);
    std::printf("device %s: %s\n", ggml_backend_dev_name(d), ggml_backend_dev_description(d));
  }
  std::vector<llama_token> tokens;
  {
    std::stringstream in(argv[2]);
    std::string item;
    while (std::getline(in, item, ',')) tokens.push_back(std::atoi(item.c_str()));
  }
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 256;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
  cp.type_k = cache_type("LF_CACHE_TYPE_K");
  cp.type_v = cache_type("LF_CACHE_TYPE_V");
  cp.swa_full = false;
  cp.cb_eval = on_tensor;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  llama_batch batch = llama_batch_init(static_cast<int32_t>(tokens.size()), 0, 1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = i + 1 == tokens.size();
  }
  batch.n_tokens = static_cast<int32_t>(tokens.size());
  if (llama_decode(ctx, batch) != 0) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const int64_t ne[4] = {n_vocab, 1, 1, 1};
  write_tensor("final_logits", ne, llama_get_logits_ith(ctx, static_cast<int32_t>(tokens.size()) - 1),
               static_cast<size_t>(n_vocab));
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
