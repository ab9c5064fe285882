// lf_run: runs a GGUF natively through the engine, as a pipeline of in-process nodes, and prints
// the next-token distribution as JSON. The oracle tests compare it with llama.cpp.
//
//   lf_run --model M.gguf --tokens 2,818,5279 [--split 1,3] [--top-k 50] [--logprobs] [--greedy 16]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layerfold/engine.h"
#include "layerfold/gguf.h"
#include "layerfold/kv_cache.h"
#include "layerfold/mapped_file.h"
#include "layerfold/model.h"

namespace {

struct Args {
  std::string model;
  std::vector<int32_t> tokens;
  std::vector<int> split;  // layer indices where a new node starts
  int top_k = 10;
  int greedy = 0;
  bool logprobs = false;
};

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "lf_run: %s\n", message.c_str());
  std::exit(2);
}

void check(const lf::Status& status) {
  if (!status.ok()) fail(std::string(lf::code_name(status.code())) + ": " + status.message());
}

std::vector<int> parse_ints(const std::string& csv) {
  std::vector<int> out;
  std::stringstream in(csv);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') fail("not an integer list: " + csv);
    out.push_back(static_cast<int>(v));
  }
  return out;
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail("missing value after " + flag);
      return argv[++i];
    };
    if (flag == "--model") args.model = value();
    else if (flag == "--tokens") { for (int t : parse_ints(value())) args.tokens.push_back(t); }
    else if (flag == "--split") args.split = parse_ints(value());
    else if (flag == "--top-k") args.top_k = std::atoi(value().c_str());
    else if (flag == "--greedy") args.greedy = std::atoi(value().c_str());
    else if (flag == "--logprobs") args.logprobs = true;
    else fail("unknown argument " + flag);
  }
  if (args.model.empty() || args.tokens.empty()) fail("usage: lf_run --model M.gguf --tokens 2,818,... [--split k,..] [--top-k K] [--logprobs] [--greedy N]");
  return args;
}

// One in-process node per layer range; the first embeds, the last has the head.
struct Node {
  lf::Model model;
  lf::Session session;
};

std::vector<double> log_softmax(const std::vector<float>& logits) {
  double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(l - max);
  double log_z = max + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_z;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  lf::MappedFile file;
  check(lf::MappedFile::open(args.model, &file));
  lf::GgufFile gguf;
  check(lf::gguf_parse(file.data(), file.size(), file.size(), &gguf));
  auto locate = [&](const lf::GgufTensorInfo& info) { return file.data() + gguf.data_offset + info.offset; };

  lf::ModelConfig config;
  check(lf::load_model_config(gguf, &config));
  std::vector<int> bounds = {0};
  for (int s : args.split) bounds.push_back(s);
  bounds.push_back(config.n_layer);

  std::vector<Node> nodes(bounds.size() - 1);
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    lf::ModelLoadOptions options;
    options.range = {bounds[i], bounds[i + 1]};
    options.with_embedding = i == 0;
    options.with_head = i + 2 == bounds.size();
    check(lf::load_model(gguf, locate, options, &nodes[i].model));
    check(lf::Session::create(nodes[i].model, {}, &nodes[i].session));
  }

  const int n_embd = config.n_embd;
  // tokens -> last position's logits, through every node.
  auto step = [&](const std::vector<int32_t>& tokens) {
    int n = static_cast<int>(tokens.size());
    std::vector<float> hidden(static_cast<size_t>(n) * n_embd);
    check(lf::embed(nodes.front().model, tokens.data(), n, hidden.data()));
    for (size_t i = 0; i < nodes.size(); ++i) {
      bool last = i + 1 == nodes.size();
      std::vector<float> out(static_cast<size_t>(last ? 1 : n) * n_embd);
      check(lf::forward(nodes[i].model, nodes[i].session, nodes[i].session.n_past(), hidden.data(), n, out.data(), last));
      hidden = std::move(out);
    }
    std::vector<float> logits(config.n_vocab);
    check(lf::head(nodes.back().model, hidden.data(), 1, logits.data()));
    return logits;
  };

  std::vector<double> logprobs = log_softmax(step(args.tokens));
  std::vector<int> order(logprobs.size());
  std::iota(order.begin(), order.end(), 0);
  int k = std::min<int>(args.top_k, static_cast<int>(order.size()));
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return logprobs[a] > logprobs[b]; });

  nlohmann::json out;
  out["n_vocab"] = config.n_vocab;
  out["tokens"] = args.tokens;
  out["top"] = nlohmann::json::array();
  for (int i = 0; i < k; ++i) out["top"].push_back({{"id", order[i]}, {"logprob", logprobs[order[i]]}});
  if (args.logprobs) out["logprobs"] = logprobs;

  if (args.greedy > 0) {
    std::vector<int32_t> generated = {order[0]};
    while (static_cast<int>(generated.size()) < args.greedy) {
      std::vector<float> logits = step({generated.back()});
      generated.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    }
    out["greedy"] = generated;
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
