// make_model: writes a synthetic Gemma 3 / Gemma 4 GGUF that llama.cpp loads, for tests.
//   make_model --preset tiny --out tiny.gguf [--type Q8_0 --seed 7 ...] [--header-only]
//   make_model --preset tiny --assistant --out tiny-drafter.gguf   (the same target's MTP drafter)
//   make_model --assistant-for target.gguf --out drafter.gguf       (the drafter of a target file)
//   make_model --preset e2b --mmproj --vision-tower tiny --out mmproj.gguf   (its vision projector)
//   make_model --mmproj-for target.gguf --out mmproj.gguf         (the projector of a target file)
//   make_model --preset e2b-shape --mmproj --audio --audio-layers 2 --out mmproj.gguf  (with the audio encoder)
#include <chrono>
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "gguf/gguf_writer.h"
#include "assistant_file.h"
#include "audio_tower_file.h"
#include "gguf_header.h"
#include "mmproj_file.h"
#include "model_file.h"
#include "presets.h"

namespace {

using lf::Status;
using namespace lf::make_model;

// The header, then the file extended to the model's whole size without writing its data.
Status write_header_only(const lf::GgufWriter& w, const std::string& path) {
  const std::vector<uint8_t> header = w.header_buffer();
  const uint64_t bytes = w.file_bytes();
  if (bytes - 1 > static_cast<uint64_t>(LONG_MAX)) return Status(lf::Code::resource_exhausted, "the model is too large to size here");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status(lf::Code::io_error, "cannot create '" + path + "'");
  const uint8_t zero = 0;
  const bool written = std::fwrite(header.data(), 1, header.size(), f) == header.size() &&
                       std::fseek(f, static_cast<long>(bytes - 1), SEEK_SET) == 0 && std::fwrite(&zero, 1, 1, f) == 1;
  if (std::fclose(f) != 0 || !written) return Status(lf::Code::io_error, "cannot write to '" + path + "'");
  return Status();
}

Status make_model(const CliArgs& args, lf::ModelConfig* target) {
  lf::GgufWriter w;
  lf::ModelConfig& model = *target;
  model = args.model;
  MakeSettings settings = args.settings;
  if (!args.target_file.empty()) LF_RETURN_IF_ERROR(read_target_file(args.target_file, &model, &settings));
  if (args.mmproj) {
    LF_RETURN_IF_ERROR(add_mmproj(model, args.vision_shape, settings, &w));
    if (args.audio_shape.enabled) {
      const Status audio = add_audio_tower(model, args.audio_shape, args.vision_shape.type, settings, &w);
      if (!audio.ok() && !args.target_file.empty()) return Status(audio.code(), "'" + args.target_file + "': " + audio.message());
      LF_RETURN_IF_ERROR(audio);
    }
  } else if (args.assistant) {
    LF_RETURN_IF_ERROR(add_assistant(model, args.assistant_shape, settings, &w));
  } else {
    LF_RETURN_IF_ERROR(add_model(&model, settings, &w));
  }
  const std::string& out_path = args.out_path;

  // Written under a temporary name so an interrupted run never leaves a file that a cache
  // would take for a finished model.
  const std::string partial = out_path + ".partial";
  LF_RETURN_IF_ERROR(args.header_only ? write_header_only(w, partial) : w.write_file(partial));
  if (std::rename(partial.c_str(), out_path.c_str()) != 0) {
    std::remove(partial.c_str());
    return Status(lf::Code::io_error, "cannot rename '" + partial + "' to '" + out_path + "'");
  }
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  CliArgs args;
  const Status parsed = parse_cli(std::vector<std::string>(argv + 1, argv + argc), &args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "make_model: %s\n", parsed.message().c_str());
    return 2;
  }
  if (args.help) {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  if (args.list_presets) {
    std::fputs(presets_text().c_str(), stdout);
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  lf::ModelConfig target;
  const Status made = make_model(args, &target);
  if (!made.ok()) {
    std::fprintf(stderr, "make_model: %s: %s\n", lf::code_name(made.code()), made.message().c_str());
    return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (args.mmproj) {
    std::fprintf(stderr, "make_model: wrote %s (gemma4v%s projector for a %d-wide model) in %.2f s\n", args.out_path.c_str(),
                 args.audio_shape.enabled ? " + gemma4a" : "", target.n_embd, seconds);
  } else if (args.assistant) {
    const AssistantShape shape = assistant_shape(target, args.assistant_shape);
    std::fprintf(stderr,
                 "make_model: wrote %s (gemma4-assistant, %zu layers %s, width %d, FFN %d, %d heads, for a %d-layer "
                 "target of width %d) in %.2f s\n",
                 args.out_path.c_str(), shape.pattern.size(), shape.pattern.c_str(), shape.n_embd, shape.n_ff,
                 shape.n_head, target.n_layer, target.n_embd, seconds);
  } else {
    std::fprintf(stderr, "make_model: wrote %s (%s, %d layers %s) in %.2f s\n", args.out_path.c_str(),
                 args.model.arch == lf::Arch::gemma4 ? "gemma4" : "gemma3", args.model.n_layer,
                 args.settings.layers.swa_pattern.c_str(), seconds);
  }
  return 0;
}
