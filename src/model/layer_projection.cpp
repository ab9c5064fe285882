// The projections that close each half of a layer, W_o and W_down.
#include <algorithm>

#include "model/layer.h"
#include "ops/ops.h"

namespace lf {

// Rows of W per share: the row-strip kernels' width, so that no worker's rows cut a strip.
constexpr int64_t kRowGrain = 4;

// proj [n_act, n_embd] = W · Xc, each output one dot product over all of W's columns, its blocks
// in column order: the single chain of fused block steps llama.cpp computes (docs/forward-pass.md,
// "Where agreement depends on the shape"). Workers share the output rows, so no value depends on
// the thread count; each worker converted its own units' columns of Xc, hence the first barrier.
// Then each token's row is finished by one worker.
void project_rows(const LayerCall& c, const WeightView& W, const uint8_t* Xc,
                  void (*finish_row)(const LayerCall& c, int64_t t)) {
  c.sync();
  project_my_rows(c, W, Xc, c.b.proj.data());
  c.sync();
  const Share rows = c.my_share(c.n_act());
  for (int64_t t = rows.begin; t < rows.end; ++t) finish_row(c, t);
  c.sync();
}

void project_my_rows(const LayerCall& c, const WeightView& W, const uint8_t* Xc, float* Y) {
  const Share grains = c.my_share((W.n_out + kRowGrain - 1) / kRowGrain);
  const int64_t r0 = grains.begin * kRowGrain, r1 = std::min<int64_t>(grains.end * kRowGrain, W.n_out);
  if (c.n_act() > 0 && r0 < r1) matmul_rows(W, Xc, c.n_act(), Y, r0, r1);
}

}  // namespace lf
