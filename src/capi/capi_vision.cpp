// C ABI over Gemma 4's vision tower (vision/): a projector read from its header and tensor data,
// its own pool of workers, and images encoded into soft-token embeddings.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/capi_internal.h"
#include "layerfold/capi.h"
#include "vision/image_preprocess.h"
#include "vision/vision_tower.h"

struct lf_vision {
  lf::VisionConfig config;
  lf::VisionWeights weights;
  std::unique_ptr<lf::ThreadPool> pool;
  std::unique_ptr<lf::ImageEncoding> pending;  // the image lf_vision_encode_async started
};

namespace {

using lf::Code;
using lf::Status;

// The largest soft-token budget a request may set, llama.cpp's for Gemma 4.
constexpr int kMaxImageTokens = 1120;

// The projector's configuration with this request's budget (0: the projector's own).
bool config_for(const lf_vision* vision, int max_tokens, lf::VisionConfig* out) {
  if (!vision) return lf::capi::record(Status(Code::invalid_argument, "no vision encoder"));
  *out = vision->config;
  if (max_tokens == 0) return true;
  if (max_tokens < out->min_tokens || max_tokens > kMaxImageTokens) {
    return lf::capi::record(Status(Code::invalid_argument, "an image's token budget must be " +
                                                               std::to_string(out->min_tokens) + " to " +
                                                               std::to_string(kMaxImageTokens) + ", not " +
                                                               std::to_string(max_tokens)));
  }
  out->max_tokens = max_tokens;
  return true;
}

}  // namespace

extern "C" {

lf_vision* lf_vision_create(lf_gguf* gguf, const uint8_t* data, double size, int n_threads) {
  if (!gguf || !data) {
    lf::capi::record(Status(Code::invalid_argument, "lf_vision_create needs the projector's header and tensor data"));
    return nullptr;
  }
  if (n_threads < 1 || n_threads > lf::kMaxThreads) {
    lf::capi::record(Status(Code::invalid_argument, "thread count " + std::to_string(n_threads) + " is outside [1, " +
                                                        std::to_string(lf::kMaxThreads) + "]"));
    return nullptr;
  }
  auto vision = std::make_unique<lf_vision>();
  if (!lf::capi::record(lf::read_vision_config(gguf->file, &vision->config))) return nullptr;
  if (!lf::capi::record(lf::vision_weights(gguf->file, vision->config, data, static_cast<uint64_t>(size), &vision->weights))) {
    return nullptr;
  }
  vision->pool = std::make_unique<lf::ThreadPool>(n_threads);
  return vision.release();
}

int lf_vision_n_embd_text(const lf_vision* vision) { return vision ? vision->config.n_embd_text : 0; }

int lf_vision_tokens(const lf_vision* vision, int width, int height, int max_tokens, int* out_width, int* out_height) {
  lf::VisionConfig c;
  if (!config_for(vision, max_tokens, &c)) return -1;
  int w = 0, h = 0;
  if (!lf::capi::record(lf::checked_vision_input_size(c, width, height, &w, &h))) return -1;
  if (out_width) *out_width = w;
  if (out_height) *out_height = h;
  return lf::vision_tokens(c, w, h);
}

int lf_vision_encode_async(lf_vision* vision, const uint8_t* rgb, int width, int height, int max_tokens, int32_t* done_flag) {
  lf::VisionConfig c;
  if (!config_for(vision, max_tokens, &c)) return -1;
  if (!rgb || !done_flag) {
    lf::capi::record(Status(Code::invalid_argument, "lf_vision_encode_async needs the pixels and a flag"));
    return -1;
  }
  if (vision->pending) {
    lf::capi::record(Status(Code::failed_precondition, "the vision encoder's last image was not taken: lf_vision_encode_result first"));
    return -1;
  }
  lf::RgbImage image;
  image.width = width;
  image.height = height;
  image.rgb = rgb;
  lf::VisionInput input;
  if (!lf::capi::record(lf::image_to_vision_input(c, image, &input))) return -1;
  const int tokens = lf::vision_tokens(c, input.width, input.height);
  *done_flag = 0;
  if (!lf::capi::record(lf::ImageEncoding::start(c, vision->weights, std::move(input), vision->pool.get(),
                                                 [done_flag] { lf::capi::publish(done_flag, 1); }, &vision->pending))) {
    return -1;
  }
  return tokens;
}

int lf_vision_encode_result(lf_vision* vision, float* embd) {
  if (!vision || !vision->pending || !embd) {
    lf::capi::record(Status(Code::failed_precondition, "no image encoded to take (lf_vision_encode_async first)"));
    return -1;
  }
  const std::unique_ptr<lf::ImageEncoding> done = std::move(vision->pending);
  std::vector<float> out;
  if (!lf::capi::record(done->finish(&out))) return -1;
  std::copy(out.begin(), out.end(), embd);
  return static_cast<int>(out.size() / static_cast<size_t>(vision->config.n_embd_text));
}

void lf_vision_free(lf_vision* vision) {
  // Stop the workers before the weights' views go.
  if (vision != nullptr) vision->pool.reset();
  delete vision;
}

}  // extern "C"
