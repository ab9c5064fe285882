// The approximate modes: opt-in trades of accuracy for time, each with a measured
// cost and a fallback to the exact computation when that cost is too high. A default-constructed
// ApproxOptions is the exact engine, byte for byte. docs/approximate.md says what each mode does.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "kernels/truncation_stats.h"

namespace lf {

struct ApproxOptions {
  // Truncated attention: per (query row, query head), keys whose score is at most the row's
  // median score leave the softmax and the V sum (attention_truncated in kernels/attention.h).
  bool truncated_attention = false;
  // A row whose dropped share of the softmax mass, Z_dropped / Z_full, exceeds this runs the
  // exact computation instead. In [0, 1].
  float truncation_threshold = 0.15f;

  // Early exit of the last row of each forward call (a decode token, a prompt's last token):
  // after each layer the row's relative update r = |x_out - s·x_in| / |s·x_in| is measured
  // (s: gemma4's layer_output_scale, else 1); once the sum of the last exit_window updates,
  // across nodes, is below exit_threshold, the row skips every later layer's attention output
  // and FFN (its K and V are still written, from its exited state). exit_threshold 0 never exits.
  bool early_exit = false;
  float exit_threshold = 0.0f;
  int exit_window = 2;  // in [1, kMaxExitWindow]

  // Top-K gate FFN: per row, only the ffn_top_k features with the largest |gelu(gate)| keep
  // their up projection and their share of ffn_down. 0: off; in (0, 1]: a fraction of n_ff;
  // above 1: a count. ffn_top_k_layers overrides it per layer (absolute layer index).
  float ffn_top_k = 0.0f;
  std::map<int, float> ffn_top_k_layers;
  // A row whose dropped share of Σ|gelu(gate)| exceeds this runs the dense FFN. In [0, 1].
  float ffn_top_k_threshold = 0.1f;

  bool top_k_ffn_on() const { return ffn_top_k > 0.0f || !ffn_top_k_layers.empty(); }
  // Features layer il keeps out of n_ff (n_ff when the mode is off for it).
  int ffn_keep(int il, int n_ff) const {
    const auto it = ffn_top_k_layers.find(il);
    const float k = it != ffn_top_k_layers.end() ? it->second : ffn_top_k;
    if (k <= 0.0f) return n_ff;
    const double count = k <= 1.0f ? static_cast<double>(k) * n_ff + 0.5 : static_cast<double>(k);
    return static_cast<int>(std::clamp(count, 1.0, static_cast<double>(n_ff)));
  }
};

constexpr int kMaxExitWindow = 16;

// The early-exit state of a forward call's last row as it passes from layer to layer and from
// node to node: the caller hands a node the state the previous node returned.
struct ExitState {
  int exit_layer = -1;                // the layer after which the row exited; -1: it has not
  std::vector<float> recent_updates;  // its last relative updates, oldest first (at most exit_window)
  bool exited() const { return exit_layer >= 0; }
};

// What the approximate modes did: truncated attention's counts (kernels/truncation_stats.h)
// and the top-K FFN's, summed over workers and layers.
struct ApproxStats : TruncationStats {
  // Here a row is one token of one layer.
  int64_t ffn_rows = 0;           // rows through the FFN with the mode on
  int64_t ffn_fallback_rows = 0;  // of those, rows that ran dense (dropped gate mass above the threshold)
  int64_t ffn_features_total = 0; // n_ff per row
  int64_t ffn_features_kept = 0;  // features whose up and down were computed (a fallback row keeps all)
  double max_dropped_gate_mass = 0;  // max dropped share of Σ|gelu(gate)| over rows that ran top-K

  double ffn_features_skipped() const {
    return ffn_features_total == 0 ? 0.0
                                   : static_cast<double>(ffn_features_total - ffn_features_kept) / static_cast<double>(ffn_features_total);
  }
  void merge(const ApproxStats& o) {
    TruncationStats::merge(o);
    ffn_rows += o.ffn_rows;
    ffn_fallback_rows += o.ffn_fallback_rows;
    ffn_features_total += o.ffn_features_total;
    ffn_features_kept += o.ffn_features_kept;
    max_dropped_gate_mass = std::max(max_dropped_gate_mass, o.max_dropped_gate_mass);
  }
};

}  // namespace lf
