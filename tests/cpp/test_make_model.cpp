// make_model writes the engine's ModelConfig: the engine reads every file it makes back as the
// configuration make_model built, layer by layer.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "tools/make_model/cli.h"
#include "tools/make_model/model_file.h"
#include "tools/make_model/presets.h"

namespace {

using lf::make_model::CliArgs;

// The configuration make_model builds from args, and the one the engine reads from the header
// it writes.
void build_and_read_back(const std::vector<std::string>& args, lf::ModelConfig* built, lf::ModelConfig* read) {
  std::vector<std::string> full = args;
  full.insert(full.end(), {"--out", "unused.gguf"});
  CliArgs parsed;
  const lf::Status ok = lf::make_model::parse_cli(full, &parsed);
  INFO(ok.message());
  REQUIRE(ok.ok());
  *built = parsed.model;
  lf::GgufWriter w;
  REQUIRE(lf::make_model::add_model(built, parsed.settings, &w).ok());
  const std::vector<uint8_t> header = w.header_buffer();
  lf::GgufFile file;
  REQUIRE(lf::gguf_parse(header.data(), header.size(), w.file_bytes(), &file).ok());
  const lf::Status loaded = lf::load_model_config(file, read);
  INFO(loaded.message());
  REQUIRE(loaded.ok());
}

void check_same(const lf::ModelConfig& a, const lf::ModelConfig& b) {
  CHECK(a.arch == b.arch);
  CHECK(a.n_embd == b.n_embd);
  CHECK(a.n_layer == b.n_layer);
  CHECK(a.n_vocab == b.n_vocab);
  CHECK(a.n_ctx_train == b.n_ctx_train);
  CHECK(a.n_swa == b.n_swa);
  CHECK(a.norm_eps == b.norm_eps);
  CHECK(a.final_softcap == b.final_softcap);
  CHECK(a.tied_output == b.tied_output);
  CHECK(a.n_embd_per_layer == b.n_embd_per_layer);
  CHECK(a.n_shared_kv == b.n_shared_kv);
  CHECK(a.n_expert == b.n_expert);
  CHECK(a.n_expert_used == b.n_expert_used);
  CHECK(a.n_ff_exp == b.n_ff_exp);
  // The engine keeps the key it does not use with dense layers.
  if (a.n_expert > 0) CHECK(a.fused_gate_up == b.fused_gate_up);
  REQUIRE(a.layers.size() == b.layers.size());
  for (size_t il = 0; il < a.layers.size(); ++il) {
    INFO("layer " << il);
    const lf::LayerConfig& x = a.layers[il];
    const lf::LayerConfig& y = b.layers[il];
    CHECK(x.sliding == y.sliding);
    CHECK(x.head_dim == y.head_dim);
    CHECK(x.n_head == y.n_head);
    CHECK(x.n_head_kv == y.n_head_kv);
    CHECK(x.n_rot == y.n_rot);
    CHECK(x.rope_base == y.rope_base);
    CHECK(x.rope_freq_scale == y.rope_freq_scale);
    CHECK(x.use_freq_factors == y.use_freq_factors);
    CHECK(x.has_v == y.has_v);
    CHECK(x.has_output_scale == y.has_output_scale);
    CHECK(x.n_ff == y.n_ff);
    CHECK(x.kv_layer == y.kv_layer);
    CHECK(x.shares_kv == y.shares_kv);
    CHECK(x.moe == y.moe);
  }
}

}  // namespace

TEST_CASE("every synthetic-vocabulary preset reads back as the configuration make_model built") {
  int checked = 0;
  for (const lf::make_model::Preset& p : lf::make_model::presets()) {
    // gemma-vocab and gemma4-vocab are tiny with the vocabulary of a file the caller gives (their
    // refusals without one are the last cases here; tests/js/make_model/make_model.test.mjs loads
    // them in llama.cpp).
    const std::string options = p.options;
    if (options.find("--vocab gemma") != std::string::npos || options.find("--vocab gguf") != std::string::npos) continue;
    INFO("preset " << p.name);
    lf::ModelConfig built, read;
    build_and_read_back({"--preset", p.name}, &built, &read);
    check_same(built, read);
    ++checked;
  }
  CHECK(checked + 2 == static_cast<int>(lf::make_model::presets().size()));
}

TEST_CASE("make_model's layer options read back as the configuration make_model built") {
  const std::vector<std::vector<std::string>> cases = {
      {"--preset", "tiny", "--n-layer", "7", "--swa-pattern", "SSGSGSG"},
      {"--preset", "tiny-gemma3", "--n-layer", "6"},
      {"--preset", "small", "--arch", "gemma3", "--head-dim", "64", "--n-head-kv", "4", "--swa-period", "4"},
      {"--preset", "tiny", "--n-ff-layers", "64,96", "--untied-output", "--global-v", "--softcap", "0"},
      {"--preset", "moe-tiny", "--separate-gate-up", "--no-layer-output-scale", "--rope-base", "5e5"},
      {"--preset", "tiny-shared-kv2", "--no-double-wide-shared", "--n-embd-per-layer", "64"},
      {"--preset", "e2b-shape", "--n-embd", "256", "--n-ff", "512", "--head-dim-swa", "64", "--head-dim-global", "128"},
  };
  for (const std::vector<std::string>& args : cases) {
    INFO(args[1] << " with " << args.size() - 2 << " overrides");
    lf::ModelConfig built, read;
    build_and_read_back(args, &built, &read);
    check_same(built, read);
  }
}

TEST_CASE("the Gemma vocabulary comes from the caller's --tokenizer-json") {
  CliArgs parsed;
  const lf::Status refused = lf::make_model::parse_cli({"--preset", "gemma-vocab", "--out", "unused.gguf"}, &parsed);
  CHECK(refused.code() == lf::Code::invalid_argument);
  CHECK(refused.message().find("--vocab gemma needs --tokenizer-json FILE") != std::string::npos);
}

TEST_CASE("the Gemma 4 vocabulary comes from the caller's --vocab-gguf") {
  CliArgs parsed;
  const lf::Status refused = lf::make_model::parse_cli({"--preset", "gemma4-vocab", "--out", "unused.gguf"}, &parsed);
  CHECK(refused.code() == lf::Code::invalid_argument);
  CHECK(refused.message().find("--vocab gguf needs --vocab-gguf FILE") != std::string::npos);
}
