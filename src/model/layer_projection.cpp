// The reduced projections of a layer, W_o and W_down, whose input columns are cut into units.
#include <algorithm>

#include "model/layer.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {

// proj [n_act, n_embd] = Σ over units, in unit order, of W[:, unit columns] · Xc[:, unit columns].
// The sum runs in the same order whichever worker made each partial, so the bytes do not depend
// on the thread count. A unit's columns of W are one contiguous region when W is unit-major
// (ModelLoadOptions::relayout_in_place), strided rows otherwise: the same bytes either way. Each
// worker's Xc columns are its own units' (converted by the step before, without a barrier).
// Partials in blocks of kTokenBlock tokens; a block's rows are shared out, each reduced and
// finished by one worker, so that the residual step needs no barrier of its own.
void project_in_units(const LayerCall& c, const WeightView& W, const uint8_t* Xc, const ColumnUnits& units,
                      void (*finish_row)(const LayerCall& c, int64_t t)) {
  const int E = c.E(), n_act = c.n_act(), token_block = c.b.token_block;
  const Share mine = c.my_share(units.n_units);
  const uint64_t xc_row = activation_row_bytes(W.type, W.n_in);
  const size_t slot = static_cast<size_t>(token_block) * E;
  for (int t0 = 0; t0 < n_act; t0 += token_block) {
    const int nb = std::min(token_block, n_act - t0);
    for (int64_t u = mine.begin; u < mine.end; ++u) {
      const int64_t k0 = units.begin(static_cast<int>(u)), k1 = units.end(static_cast<int>(u));
      matmul_rows_strided(W.columns(k0, k1), Xc + xc_row * static_cast<uint64_t>(t0) + activation_row_bytes(W.type, k0),
                          xc_row, nb, c.b.partial.data() + u * slot, 0, E);
    }
    c.sync();
    const Share rows = c.my_share(nb);
    for (int64_t t = rows.begin; t < rows.end; ++t) {
      float* y = row(c.b.proj, t0 + t, E);
      const float* p0 = c.b.partial.data() + static_cast<size_t>(t) * E;
      std::copy(p0, p0 + E, y);
      for (int u = 1; u < units.n_units; ++u) {
        const float* pu = p0 + u * slot;
        for (int j = 0; j < E; ++j) y[j] += pu[j];
      }
      finish_row(c, t0 + t);
    }
    c.sync();
  }
}

}  // namespace lf
