// What truncated attention (attention_truncated, kernels/attention.h) did, summed over rows,
// heads, workers and layers: the kernel counts here, and the approximate modes' statistics
// (approx/approx.h) extend it with the other modes' counts. A "row" is one (query row, query
// head) pair of one layer.
#pragma once

#include <algorithm>
#include <cstdint>

namespace lf {

struct TruncationStats {
  int64_t attention_rows = 0;   // rows attended with truncated_attention on
  int64_t truncated_rows = 0;   // of those, rows that ran truncated
  int64_t fallback_rows = 0;    // rows that ran the exact computation (dropped mass above the threshold)
  int64_t v_keys_total = 0;     // keys the rows could see: the V accumulations of the exact kernel
  int64_t v_keys_kept = 0;      // V accumulations done (a fallback row keeps all its keys)
  double max_dropped_mass = 0;  // max Z_dropped / Z_full over truncated rows
  double max_error_bound = 0;   // max 2 · (Z_dropped / Z_full) · max|V| over truncated rows

  // Share of the exact kernel's V accumulations skipped, in [0, 1].
  double v_work_skipped() const {
    return v_keys_total == 0 ? 0.0 : static_cast<double>(v_keys_total - v_keys_kept) / static_cast<double>(v_keys_total);
  }
  void merge(const TruncationStats& o) {
    attention_rows += o.attention_rows;
    truncated_rows += o.truncated_rows;
    fallback_rows += o.fallback_rows;
    v_keys_total += o.v_keys_total;
    v_keys_kept += o.v_keys_kept;
    max_dropped_mass = std::max(max_dropped_mass, o.max_dropped_mass);
    max_error_bound = std::max(max_error_bound, o.max_error_bound);
  }
};

}  // namespace lf
