// Gemma 4's vision tower and projector on the engine's pool (docs/vision.md, "The tower"): the
// patches embedded with their learned x/y positions, n_layer ViT layers (RMS norms, Q/K norms,
// 2-D NEOX RoPE, V norm, non-causal attention, clamped linears, a gated quick-GELU FFN), the
// average-pooling merger, standardization and the projection into the language model's width.
// Workers share each matrix's output rows and the attention's queries, so the bytes of the
// embeddings do not depend on the thread count.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "vision/image_preprocess.h"
#include "vision/vision_config.h"
#include "vision/vision_weights.h"

namespace lf {

// Soft tokens a preprocessed width × height gives: its patch grid pooled n_merge × n_merge.
int vision_tokens(const VisionConfig& c, int width, int height);

// in -> embd [vision_tokens, n_embd_text], the rows the language model receives, row-major in
// the pooled grid's order (y, then x).
Status encode_image(const VisionConfig& c, const VisionWeights& w, const VisionInput& in, ThreadPool* pool,
                    std::vector<float>* embd);

// encode_image without waiting: the encode handed to the pool, whose last worker calls done() when
// it is over (the caller's thread, before start returns, in the wasm32-wasi build).
class ImageEncoding {
 public:
  // Refused, nothing started, when `in` is not a preprocessed image of c or the pool is busy.
  static Status start(const VisionConfig& c, const VisionWeights& w, VisionInput in, ThreadPool* pool,
                      std::function<void()> done, std::unique_ptr<ImageEncoding>* out);
  ~ImageEncoding();
  // After done(): encode_image's embd, or the failure of a worker; refused before.
  Status finish(std::vector<float>* embd) const;

  struct State;

 private:
  ImageEncoding();
  std::unique_ptr<State> state_;
};

}  // namespace lf
