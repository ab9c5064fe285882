// How one layer's work is cut into units that workers share (docs/threads.md). Units depend only
// on the model, never on the thread count; every value a unit makes (its heads' attention, its
// FFN features) is the same bytes whichever worker computes it. Workers take contiguous runs of
// units (share()).
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"
#include "model/model_config.h"
#include "base/status.h"

namespace lf {

// Units of `width` consecutive input columns of a projection, the last one possibly narrower.
struct ColumnUnits {
  int n_units = 0;
  int width = 0;
  int n_in = 0;  // columns in all

  int64_t begin(int u) const { return static_cast<int64_t>(u) * width; }
  int64_t end(int u) const { return u + 1 == n_units ? n_in : static_cast<int64_t>(u + 1) * width; }
};

struct LayerShards {
  // Attention unit u: KV heads [u·kv_per_unit, (u+1)·kv_per_unit) and the query heads reading
  // them, so no K/V projection is ever computed twice. Its columns of attn_output [n_embd, D·H]
  // are those query heads' outputs: attn.width = kv_per_unit · (n_head / n_head_kv) · D.
  int kv_per_unit = 1;
  ColumnUnits attn;
  // Where there are fewer attention units than workers, the query heads in this many equal
  // parts, each part's columns of attn_output whole blocks (the fewest heads that fill them).
  int query_parts = 0;
  // FFN unit u: rows [begin(u), end(u)) of ffn_gate / ffn_up, the same columns of ffn_down.
  ColumnUnits ffn;
};

// Aim for this many FFN units: divisible by 1, 2, 4, 8 threads, enough for 3, 5, 6, 7 to stay
// within a unit of balance, and few enough that a unit keeps long runs of features.
constexpr int kFfnUnitTarget = 32;

// Column slices must start on a block of the weight's type (32 for Q4_0/Q8_0, 256 for K-quants).
Status plan_layer_shards(const LayerConfig& layer, GgmlType attn_output_type, GgmlType ffn_down_type,
                         LayerShards* out);

}  // namespace lf
