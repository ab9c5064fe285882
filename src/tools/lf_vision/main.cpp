// lf_vision: one image through a Gemma 4 vision projector (src/vision/), the embeddings printed as
// llama.cpp's tests/js/support/llama_programs/llama_vision.cpp prints them, for the agreement test.
//   lf_vision MMPROJ.gguf IMAGE.rgb WIDTH HEIGHT [--threads N] [--max-tokens N]
// IMAGE.rgb: WIDTH·HEIGHT·3 bytes, interleaved RGB. stdout, one JSON object:
// {"width", "height" (the preprocessed size), "n_tokens", "n_embd", "embd": [n_tokens·n_embd]}.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "native/mapped_file.h"
#include "vision/image_preprocess.h"
#include "vision/vision_tower.h"

namespace {

lf::Status run(int argc, char** argv) {
  using lf::Status;
  if (argc < 5) return Status(lf::Code::invalid_argument, "usage: lf_vision MMPROJ IMAGE.rgb WIDTH HEIGHT [--threads N] [--max-tokens N]");
  int threads = 1, max_tokens = 0;
  for (int i = 5; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--max-tokens") == 0) max_tokens = std::atoi(argv[i + 1]);
    else return Status(lf::Code::invalid_argument, std::string("unknown option '") + argv[i] + "'");
  }
  if (threads < 1 || threads > 256) return Status(lf::Code::invalid_argument, "--threads must be 1 to 256");
  lf::MappedFile file;
  LF_RETURN_IF_ERROR(lf::MappedFile::open(argv[1], &file));
  lf::GgufFile gguf;
  LF_RETURN_IF_ERROR(lf::gguf_parse(file.data(), file.size(), file.size(), &gguf));
  lf::VisionConfig c;
  LF_RETURN_IF_ERROR(lf::read_vision_config(gguf, &c));
  if (max_tokens > 0) c.max_tokens = max_tokens;
  lf::VisionWeights weights;
  LF_RETURN_IF_ERROR(lf::vision_weights(gguf, c, file.data() + gguf.data_offset, file.size() - gguf.data_offset, &weights));

  lf::RgbImage image;
  image.width = std::atoi(argv[3]);
  image.height = std::atoi(argv[4]);
  if (image.width <= 0 || image.height <= 0 || image.width > 46000 || image.height > 46000) {
    return Status(lf::Code::invalid_argument, "WIDTH and HEIGHT must be 1 to 46000");
  }
  std::vector<uint8_t> rgb(static_cast<size_t>(image.width) * image.height * 3);
  std::FILE* f = std::fopen(argv[2], "rb");
  const bool read = f && std::fread(rgb.data(), 1, rgb.size(), f) == rgb.size();
  if (f) std::fclose(f);
  if (!read) return Status(lf::Code::io_error, std::string("cannot read ") + std::to_string(rgb.size()) + " bytes of '" + argv[2] + "'");
  image.rgb = rgb.data();

  lf::VisionInput input;
  LF_RETURN_IF_ERROR(lf::image_to_vision_input(c, image, &input));
  lf::ThreadPool pool(threads);
  std::vector<float> embd;
  LF_RETURN_IF_ERROR(lf::encode_image(c, weights, input, &pool, &embd));
  std::printf("{\"width\": %d, \"height\": %d, \"n_tokens\": %d, \"n_embd\": %d, \"embd\": [", input.width, input.height,
              lf::vision_tokens(c, input.width, input.height), c.n_embd_text);
  for (size_t i = 0; i < embd.size(); ++i) std::printf(i ? ",%.9g" : "%.9g", embd[i]);
  std::printf("]}\n");
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  const lf::Status s = run(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "lf_vision: %s: %s\n", lf::code_name(s.code()), s.message().c_str());
    return 1;
  }
  return 0;
}
