// lf_run: runs a GGUF natively through the engine, as a pipeline of in-process nodes, and prints
// the next-token distribution as JSON. The oracle tests compare it with llama.cpp.
//
//   lf_run --model M.gguf --tokens 2,818,5279 [--split 1,3] [--top-k 50] [--logprobs] [--greedy 16] [--threads N]
//   lf_run --model M.gguf --bench 8,128 [--threads 1,2] [--reps 3]
//   lf_run --model M.gguf --tokens 2,818,5279 --drafter D.gguf --draft-tokens 7,9
// --drafter loads a gemma4-assistant drafter beside the last node and, after the prompt, runs one
// draft step per --draft-tokens entry (the first: the token after the prompt; the others: drafted
// tokens fed back), each from the previous step's hidden state, printing "h" (the target's
// output-normed last row) and "draft": [{"logits", "h_next"}] (the oracle's llama_mtp_draft).
// --relayout reads the file into memory instead of mapping it, and lets the engine lay out the
// weights as its kernels read them (ModelLoadOptions::relayout_in_place).
// --bench times the layers instead (scripts/bench-threads): for each prompt length, a prompt of
// that many tokens, then a one-token decode step, each the best of --reps runs, as one JSON line
// per thread count. With several counts the reps alternate between them in one process, so that
// a neighbour's load on a shared machine falls on every count alike.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/drafter.h"
#include "model/forward.h"
#include "model/per_layer_embd.h"
#include "gguf/gguf_reader.h"
#include "model/session.h"
#include "native/mapped_file.h"
#include "model/model.h"
#include "ops/ops.h"

namespace {

struct Args {
  std::string model;
  std::vector<int32_t> tokens;
  std::vector<int> split;  // layer indices where a new node starts
  int top_k = 10;
  int greedy = 0;
  bool logprobs = false;
  std::vector<int> threads = {1};  // one count, or several for --bench
  std::vector<int> bench;  // prompt lengths to time
  int reps = 3;
  bool relayout = false;
  std::string drafter;
  std::vector<int32_t> draft_tokens;
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
    else if (flag == "--threads") args.threads = parse_ints(value());
    else if (flag == "--bench") args.bench = parse_ints(value());
    else if (flag == "--reps") args.reps = std::max(1, std::atoi(value().c_str()));
    else if (flag == "--relayout") args.relayout = true;
    else if (flag == "--drafter") args.drafter = value();
    else if (flag == "--draft-tokens") { for (int t : parse_ints(value())) args.draft_tokens.push_back(t); }
    else fail("unknown argument " + flag);
  }
  if (args.model.empty() || (args.tokens.empty() && args.bench.empty())) {
    fail("usage: lf_run --model M.gguf --tokens 2,818,... [--split k,..] [--top-k K] [--logprobs] [--greedy N] [--threads N] [--relayout]\n"
         "       lf_run --model M.gguf --bench 8,128 [--threads 1,2,..] [--reps R] [--relayout]");
  }
  if (args.threads.empty() || (args.bench.empty() && args.threads.size() != 1)) fail("--threads takes one count (a list with --bench)");
  if (args.drafter.empty() != args.draft_tokens.empty()) fail("--drafter and --draft-tokens go together");
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

// One timed forward: wall ms per layer, the process's CPU ms (every thread's, for the whole
// forward), the engine's phase split summed over layers, and each worker's time in the job and of
// it at barriers (waiting for the others).
struct Timing {
  double ms_per_layer = 0, cpu_ms = 0, attention_ms = 0, ffn_ms = 0, serial_ms = 0;
  std::vector<lf::ThreadPool::WorkerTimes> workers;
};

Timing timed_forward(const lf::Model& model, lf::Session& session, const std::vector<float>& x, int n) {
  std::vector<float> out(x.size());
  // A model with per-layer embeddings times its branch too, on inputs of the right size.
  session.per_layer_in.resize(lf::per_layer_input_floats(model.config, model.range.begin, model.range.end, n));
  for (size_t k = 0; k < session.per_layer_in.size(); ++k) session.per_layer_in[k] = std::sin(0.23f * static_cast<float>(k % 7919));
  const std::clock_t cpu0 = std::clock();
  const auto t0 = std::chrono::steady_clock::now();
  check(lf::forward(model, session, session.n_past(), x.data(), n, out.data(), false));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double cpu_ms = 1000.0 * static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  const int n_layers = model.range.end - model.range.begin;
  return {ms / n_layers, cpu_ms, session.last.attention_ms, session.last.ffn_ms, session.last.serial_ms,
          model.pool->last_job_times()};
}

nlohmann::json to_json(const Timing& t) {
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& w : t.workers) workers.push_back({{"job_ms", w.job_ms}, {"barrier_ms", w.barrier_ms}});
  return {{"ms_per_layer", t.ms_per_layer}, {"cpu_ms", t.cpu_ms}, {"attention_ms", t.attention_ms}, {"ffn_ms", t.ffn_ms},
          {"serial_ms", t.serial_ms}, {"workers", workers}};
}

// For each thread count and prompt length: the best of reps runs of a fresh prompt, then of one
// decode step after it (each rep on a fresh session, so the decode always sees the same context).
// The counts take turns within each rep.
std::vector<nlohmann::json> bench(lf::Model& model, const Args& args) {
  const int n_embd = model.config.n_embd;
  struct Best {
    Timing prompt, decode;
  };
  std::vector<std::vector<Best>> best(args.threads.size(), std::vector<Best>(args.bench.size()));
  for (int r = 0; r < args.reps; ++r) {
    for (size_t c = 0; c < args.threads.size(); ++c) {
      check(lf::set_threads(&model, args.threads[c]));
      for (size_t i = 0; i < args.bench.size(); ++i) {
        const int n = args.bench[i];
        std::vector<float> prompt(static_cast<size_t>(n) * n_embd), step(static_cast<size_t>(n_embd));
        for (size_t k = 0; k < prompt.size(); ++k) prompt[k] = std::sin(0.37f * static_cast<float>(k % 9973));
        for (size_t k = 0; k < step.size(); ++k) step[k] = std::cos(0.11f * static_cast<float>(k));
        lf::Session session;
        check(lf::Session::create(model, {n + 1, 64}, &session));
        const Timing p = timed_forward(model, session, prompt, n);
        const Timing d = timed_forward(model, session, step, 1);
        Best& b = best[c][i];
        if (r == 0 || p.ms_per_layer < b.prompt.ms_per_layer) b.prompt = p;
        if (r == 0 || d.ms_per_layer < b.decode.ms_per_layer) b.decode = d;
      }
    }
  }
  std::vector<nlohmann::json> out;
  for (size_t c = 0; c < args.threads.size(); ++c) {
    nlohmann::json runs = nlohmann::json::array();
    for (size_t i = 0; i < args.bench.size(); ++i) {
      runs.push_back({{"prompt", args.bench[i]}, {"prefill", to_json(best[c][i].prompt)}, {"decode", to_json(best[c][i].decode)}});
    }
    out.push_back({{"threads", args.threads[c]}, {"layers", model.range.end - model.range.begin}, {"runs", runs}});
  }
  return out;
}

// The drafter's steps after the prompt, from the tail node's session.
nlohmann::json draft(const Args& args, const Node& tail, const std::vector<float>& last_hidden) {
  lf::MappedFile file;
  check(lf::MappedFile::open(args.drafter, &file));
  lf::GgufFile gguf;
  check(lf::gguf_parse(file.data(), file.size(), file.size(), &gguf));
  lf::Drafter drafter;
  check(lf::load_drafter(gguf, [&](const lf::GgufTensorInfo& t) { return file.data() + gguf.data_offset + t.offset; },
                         tail.model, args.threads.front(), &drafter));
  const lf::ModelConfig& c = tail.model.config;
  std::vector<float> h(c.n_embd), logits(drafter.model.config.n_vocab), h_next(c.n_embd);
  lf::rmsnorm(last_hidden.data(), tail.model.output_norm.f32(), c.n_embd, c.norm_eps, h.data());
  nlohmann::json out = {{"h", h}, {"draft", nlohmann::json::array()}};
  for (int32_t token : args.draft_tokens) {
    check(lf::draft_step(drafter, tail.session, token, h.data(), logits.data(), h_next.data()));
    out["draft"].push_back({{"logits", logits}, {"h_next", h_next}});
    h = h_next;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);
  lf::MappedFile file;
  check(lf::MappedFile::open(args.model, &file));
  // The engine may rewrite tensors in place only in a copy of its own; the mapping is read-only.
  std::vector<uint8_t> copy;
  if (args.relayout) {
    copy.assign(file.data(), file.data() + file.size());
    file.close();
  }
  const uint8_t* bytes = args.relayout ? copy.data() : file.data();
  const uint64_t n_bytes = args.relayout ? copy.size() : file.size();
  lf::GgufFile gguf;
  check(lf::gguf_parse(bytes, n_bytes, n_bytes, &gguf));
  auto locate = [&](const lf::GgufTensorInfo& info) { return bytes + gguf.data_offset + info.offset; };

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
    options.n_threads = args.threads.front();
    options.relayout_in_place = args.relayout;
    check(lf::load_model(gguf, locate, options, &nodes[i].model));
    check(lf::Session::create(nodes[i].model, {}, &nodes[i].session));
  }

  if (!args.bench.empty()) {
    if (nodes.size() != 1) fail("--bench times one node: drop --split");
    for (const nlohmann::json& line : bench(nodes.front().model, args)) std::printf("%s\n", line.dump().c_str());
    return 0;
  }

  const int n_embd = config.n_embd;
  std::vector<float> last_hidden;  // the last step's last row into the head
  // tokens -> last position's logits, through every node.
  auto step = [&](const std::vector<int32_t>& tokens) {
    int n = static_cast<int>(tokens.size());
    std::vector<float> hidden(static_cast<size_t>(n) * n_embd);
    check(lf::embed(nodes.front().model, tokens.data(), n, hidden.data()));
    // Every layer's per-layer input, made by the first node; each node takes its layers' slice.
    const size_t layer_floats = static_cast<size_t>(n) * config.n_embd_per_layer;
    std::vector<float> per_layer(layer_floats * config.n_layer);
    if (config.n_embd_per_layer > 0) {
      check(lf::per_layer_inputs(nodes.front().model, tokens.data(), n, hidden.data(), per_layer.data()));
    }
    // The K/V rows of shared-KV sources, handed out by their nodes to the later nodes that
    // mirror them (docs/forward-pass.md, "Shared KV across nodes").
    std::vector<lf::KvRows> shipped;
    for (size_t i = 0; i < nodes.size(); ++i) {
      bool last = i + 1 == nodes.size();
      const lf::LayerRange r = nodes[i].model.range;
      nodes[i].session.per_layer_in.assign(per_layer.begin() + r.begin * layer_floats,
                                           per_layer.begin() + r.end * layer_floats);
      const std::vector<int>& mirrored = nodes[i].session.kv.mirrored();
      nodes[i].session.kv_rows_in.clear();
      for (const lf::KvRows& rows : shipped) {
        if (std::find(mirrored.begin(), mirrored.end(), rows.layer) != mirrored.end()) nodes[i].session.kv_rows_in.push_back(rows);
      }
      std::vector<float> out(static_cast<size_t>(last ? 1 : n) * n_embd);
      check(lf::forward(nodes[i].model, nodes[i].session, nodes[i].session.n_past(), hidden.data(), n, out.data(), last));
      const std::vector<lf::KvRows>& handed_out = nodes[i].session.last.kv_rows_out;
      shipped.insert(shipped.end(), handed_out.begin(), handed_out.end());
      hidden = std::move(out);
    }
    std::vector<float> logits(config.n_vocab);
    check(lf::head(nodes.back().model, hidden.data(), 1, logits.data()));
    last_hidden = hidden;
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
  if (!args.drafter.empty()) out.update(draft(args, nodes.back(), last_hidden));

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
