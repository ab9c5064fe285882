// A synthetic target and its gemma4-assistant drafter made by make_model's code in memory
// (tools/make_model/assistant_file.h), for the drafter's tests.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine_setup.h"
#include "model/drafter.h"
#include "tools/make_model/assistant_file.h"
#include "tools/make_model/cli.h"
#include "tools/make_model/model_file.h"

namespace lf::test {

inline FixtureModel parsed_fixture(const GgufWriter& w) {
  FixtureModel f;
  f.bytes = w.write_buffer();
  require_ok(gguf_parse(f.bytes.data(), f.bytes.size(), f.bytes.size(), &f.file));
  return f;
}

struct DrafterPair {
  FixtureModel target, drafter;
  ModelConfig target_config;  // as make_model built it
};

// make_model's target of args (e.g. {"--preset", "tiny"}) and its drafter of the given shape.
inline DrafterPair drafter_pair(std::vector<std::string> args, const make_model::AssistantShape& shape = {}) {
  args.insert(args.end(), {"--out", "unused.gguf"});
  make_model::CliArgs parsed;
  require_ok(make_model::parse_cli(args, &parsed));
  DrafterPair p;
  GgufWriter target, drafter;
  require_ok(make_model::add_model(&parsed.model, parsed.settings, &target));
  require_ok(make_model::add_assistant(parsed.model, shape, parsed.settings, &drafter));
  p.target = parsed_fixture(target);
  p.drafter = parsed_fixture(drafter);
  p.target_config = parsed.model;
  return p;
}

inline Status load_drafter_of(const FixtureModel& drafter, const Model& target, int n_threads, Drafter* out) {
  return load_drafter(drafter.file, drafter.locator(), target, n_threads, out);
}

}  // namespace lf::test
