// The engine's named intermediates for one prompt (the session's debug hook, src/model/session.h),
// in llama_dump's file format, for scripts/compare-intermediates. One node, last_only as the
// oracle's runs use.
//
//   lf_dump MODEL.gguf TOKENS(csv) OUTDIR [threads]
//
// OUTDIR/<name>-<layer>.bin (attn_norm, q_rope, k_rope, v_normed, attn_out, attn_residual,
// ffn_out, layer_out) and OUTDIR/final_logits.bin.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "model/forward.h"
#include "model/per_layer_embd.h"
#include "model/model.h"
#include "model/session.h"
#include "native/mapped_file.h"

namespace {

void check(const lf::Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "lf_dump: %s\n", s.message().c_str());
  std::exit(2);
}

void write_tensor(const std::string& path, int64_t cols, int64_t rows, const float* x) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  const int64_t ne[4] = {cols, rows, 1, 1};
  std::fwrite(ne, sizeof(int64_t), 4, f);
  std::fwrite(x, sizeof(float), static_cast<size_t>(cols * rows), f);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: lf_dump MODEL.gguf TOKENS OUTDIR [threads]\n");
    return 2;
  }
  const std::string outdir = argv[3];
  std::vector<int32_t> tokens;
  {
    std::stringstream in(argv[2]);
    std::string item;
    while (std::getline(in, item, ',')) tokens.push_back(std::atoi(item.c_str()));
  }
  lf::MappedFile file;
  check(lf::MappedFile::open(argv[1], &file));
  lf::GgufFile gguf;
  check(lf::gguf_parse(file.data(), file.size(), file.size(), &gguf));
  lf::ModelConfig config;
  check(lf::load_model_config(gguf, &config));
  lf::ModelLoadOptions options;
  options.range = {0, config.n_layer};
  options.with_embedding = true;
  options.with_head = true;
  options.n_threads = argc > 4 ? std::atoi(argv[4]) : 1;
  lf::Model model;
  check(lf::load_model(gguf, [&](const lf::GgufTensorInfo& t) { return file.data() + gguf.data_offset + t.offset; },
                       options, &model));
  lf::KvCacheOptions cache;  // LF_CACHE_TYPE_K / _V: llama.cpp's names, as llama_dump reads them
  if (const char* k = std::getenv("LF_CACHE_TYPE_K")) check(lf::parse_kv_type(k, "K", &cache.k_type));
  if (const char* v = std::getenv("LF_CACHE_TYPE_V")) check(lf::parse_kv_type(v, "V", &cache.v_type));
  lf::Session session;
  check(lf::Session::create(model, cache, &session));
  session.debug_hook = [&](const char* name, int il, const float* x, int rows, int cols) {
    write_tensor(outdir + "/" + name + "-" + std::to_string(il) + ".bin", cols, rows, x);
  };
  const int n = static_cast<int>(tokens.size());
  std::vector<float> hidden(static_cast<size_t>(n) * config.n_embd), last(config.n_embd), logits(config.n_vocab);
  check(lf::embed(model, tokens.data(), n, hidden.data()));
  if (config.n_embd_per_layer > 0) {
    // Every layer's per-layer input, [n_layer, n, n_pl]; written token-major as llama.cpp's
    // "inp_per_layer" [n_pl, n_layer, n_tokens] before its permute.
    const int n_pl = config.n_embd_per_layer, L = config.n_layer;
    std::vector<float> per_layer(static_cast<size_t>(L) * n * n_pl), token_major(per_layer.size());
    check(lf::per_layer_inputs(model, tokens.data(), n, hidden.data(), per_layer.data()));
    for (int l = 0; l < L; ++l) {
      for (int t = 0; t < n; ++t) {
        std::copy_n(per_layer.data() + (static_cast<size_t>(l) * n + t) * n_pl, n_pl,
                    token_major.data() + (static_cast<size_t>(t) * L + l) * n_pl);
      }
    }
    write_tensor(outdir + "/inp_per_layer--1.bin", n_pl, L * n, token_major.data());
    session.per_layer_in = per_layer;
  }
  check(lf::forward(model, session, 0, hidden.data(), n, last.data(), true));
  check(lf::head(model, last.data(), 1, logits.data()));
  write_tensor(outdir + "/final_logits.bin", config.n_vocab, 1, logits.data());
  return 0;
}
