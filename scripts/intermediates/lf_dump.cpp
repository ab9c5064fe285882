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
  lf::Session session;
  check(lf::Session::create(model, {}, &session));
  session.debug_hook = [&](const char* name, int il, const float* x, int rows, int cols) {
    write_tensor(outdir + "/" + name + "-" + std::to_string(il) + ".bin", cols, rows, x);
  };
  const int n = static_cast<int>(tokens.size());
  std::vector<float> hidden(static_cast<size_t>(n) * config.n_embd), last(config.n_embd), logits(config.n_vocab);
  check(lf::embed(model, tokens.data(), n, hidden.data()));
  check(lf::forward(model, session, 0, hidden.data(), n, last.data(), true));
  check(lf::head(model, last.data(), 1, logits.data()));
  write_tensor(outdir + "/final_logits.bin", config.n_vocab, 1, logits.data());
  return 0;
}
