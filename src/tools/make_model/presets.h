// make_model's presets: named starting points, each written as the command line's own options,
// which apply before the caller's (so the caller's override them).
#pragma once

#include <span>
#include <string>
#include <vector>

namespace lf::make_model {

struct Preset {
  const char* name;
  const char* summary;  // one line of --list-presets
  const char* base;     // a preset whose options come first, or nullptr
  const char* options;  // space-separated, as on the command line
};

std::span<const Preset> presets();

// The preset of that name, or nullptr.
const Preset* find_preset(const std::string& name);

// Its base's options, then its own, one argument each:
// preset_args(*find_preset("moe-tiny")) -> {"--ctx", "512", "--n-expert", "7", ...}.
std::vector<std::string> preset_args(const Preset& preset);

std::string presets_text();  // one line per preset, for --list-presets

}  // namespace lf::make_model
