// attention_truncated: attention_tiled's tiles in two passes. The first scores every key of the
// tile (the exact kernel's scores, bit for bit) and decides per row which keys it keeps; the
// second runs the exact kernel's online softmax and f16 V accumulation over the kept keys only,
// converting a block of values only if some row of the tile keeps one of its keys.
// docs/approximate.md says why the reported bound holds.
#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/attention_steps.h"
#include "kernels/attention.h"

namespace lf {
namespace {

using namespace attn_steps;

// f16 magnitude bits of inf: every finite |v| is below, and among finite halves the magnitude
// bits order like the values.
constexpr uint16_t kHalfInfBits = 0x7C00;

// v [D] f16 -> max |v| as f16 magnitude bits (>= kHalfInfBits: some v is inf or NaN)
uint16_t max_magnitude_bits(const uint16_t* v, int D) {
  uint16_t m = 0;
  for (int d = 0; d < D; ++d) m = std::max<uint16_t>(m, v[d] & 0x7FFF);
  return m;
}

// What one row keeps, from its visible scores s [n] and the largest |v| of their keys.
struct RowChoice {
  bool exact = true;        // run the exact computation (fallback)
  float keep_above = 0;     // otherwise keep the keys scoring above this: the median
  int64_t kept = 0;         // keys whose values are accumulated
  double dropped_mass = 0;  // Z_dropped / Z_full
};

// The median is the lower middle of the sorted scores, element (n-1)/2, found by selection; a
// key is kept when its score is strictly above it, so ties with the median are dropped and at
// most n/2 keys are kept. Z sums run in f64 relative to the row max, where nothing underflows
// short of 745 below it.
RowChoice choose_keys(const float* s, int n, uint16_t v_max_bits, float max_dropped_mass, std::vector<float>& selection) {
  RowChoice c;
  c.kept = n;
  float m = -INFINITY;
  for (int k = 0; k < n; ++k) {
    // NaN or +inf scores: no median, no finite mass; the exact kernel's bytes, whatever they are.
    if (std::isnan(s[k]) || s[k] == INFINITY) return c;
    m = std::max(m, s[k]);
  }
  if (m == -INFINITY || v_max_bits >= kHalfInfBits) return c;
  selection.assign(s, s + n);
  const auto middle = selection.begin() + (n - 1) / 2;
  std::nth_element(selection.begin(), middle, selection.end());
  const float median = *middle;
  double z_full = 0, z_dropped = 0;
  int64_t kept = 0;
  for (int k = 0; k < n; ++k) {
    const double e = std::exp(static_cast<double>(s[k]) - m);
    z_full += e;
    if (s[k] > median) {
      ++kept;
    } else {
      z_dropped += e;
    }
  }
  // z_full >= 1: the max key contributes exp(0).
  const double dropped_mass = z_dropped / z_full;
  if (kept == 0 || dropped_mass > static_cast<double>(max_dropped_mass)) return c;
  c.exact = false;
  c.keep_above = median;
  c.kept = kept;
  c.dropped_mass = dropped_mass;
  return c;
}

// One tile: query rows [i0, i1) × the `group` query heads of KV head g; keys [first_key,
// last_key], which row_scores holds from index 0 with a stride of span (a multiple of kKeyBlock).
class TruncatedTile : TileShape {
 public:
  TruncatedTile(const float* q, int pos0, int n_head, const KvView& kv, const KeyMask& mask, float kq_scale,
                AttentionWorkspace& ws, int g, int i0, int i1)
      : TileShape(q, pos0, n_head, kv, mask, kq_scale, ws, g, i0, i1), first_key_(first_key()), last_key_(last_key()),
        span_((last_key_ - first_key_ + kKeyBlock) / kKeyBlock * kKeyBlock) {}

  void run(float max_dropped_mass, float* out, TruncationStats* stats) {
    load_queries();
    score_all();
    for (int i = i0_; i < i1_; ++i) {
      for (int hh = 0; hh < group_; ++hh) choose(i, hh, max_dropped_mass, stats);
    }
    for (int pb = first_key_; pb <= last_key_; pb += kKeyBlock) {
      const int nb = std::min(kKeyBlock, last_key_ - pb + 1);
      if (!any_kept(pb, nb)) continue;
      load_values(kv_, g_, pb, nb, ws_.v.data(), ws_.v64.data());
      accumulate(pb, nb);
    }
    for (int i = i0_; i < i1_; ++i) {
      for (int hh = 0; hh < group_; ++hh) {
        const int j = dot_index(i, hh);
        store_output(ws_.acc.data() + static_cast<int64_t>(j) * D_, ws_.sum[j], D_, out + q_offset(i, hh));
      }
    }
  }

 private:
  // Row i sees keys [first_visible(i), last_visible(i)].
  int first_visible(int i) const { return mask_.first_key(pos0_ + i); }
  int last_visible(int i) const { return mask_.last_key(pos0_ + i); }
  float* row_scores(int j) { return ws_.row_scores.data() + static_cast<int64_t>(j) * span_; }
  bool keeps(int j, float s) const { return ws_.keeps_all[j] || s > ws_.keep_above[j]; }

  void load_queries() {
    const int n_dots = (i1_ - i0_) * group_;
    ws_.row_scores.resize(static_cast<size_t>(n_dots) * static_cast<size_t>(span_));
    ws_.v_max.resize(static_cast<size_t>(span_));
    ws_.keep_above.resize(static_cast<size_t>(n_dots));
    ws_.keeps_all.resize(static_cast<size_t>(n_dots));
    for (int i = i0_; i < i1_; ++i) {
      for (int hh = 0; hh < group_; ++hh) {
        load_query(q_ + q_offset(i, hh), D_, ws_.q.data() + static_cast<int64_t>(dot_index(i, hh)) * D_);
      }
    }
    std::fill(ws_.acc.begin(), ws_.acc.begin() + static_cast<int64_t>(n_dots) * D_, 0.0f);
    std::fill(ws_.max.begin(), ws_.max.begin() + n_dots, -INFINITY);
    std::fill(ws_.sum.begin(), ws_.sum.begin() + n_dots, 0.0f);
  }

  // Pass 1: row_scores of every row that sees some key of a block, and v_max of every key.
  void score_all() {
    for (int pb = first_key_; pb <= last_key_; pb += kKeyBlock) {
      const int nb = std::min(kKeyBlock, last_key_ - pb + 1);
      load_keys_transposed(kv_, g_, pb, nb, ws_.k32.data(), ws_.k.data());
      for (int b = 0; b < nb; ++b) ws_.v_max[pb - first_key_ + b] = max_magnitude_bits(halves(kv_.v) + kv_offset(kv_, g_, pb + b), D_);
      for (int i = i0_; i < i1_; ++i) {
        if (last_visible(i) < pb || first_visible(i) >= pb + nb) continue;
        for (int hh = 0; hh < group_; ++hh) {
          const int j = dot_index(i, hh);
          score_block(ws_.q.data() + static_cast<int64_t>(j) * D_, ws_.k.data(), D_, kq_scale_,
                      row_scores(j) + (pb - first_key_));
        }
      }
    }
  }

  void choose(int i, int hh, float max_dropped_mass, TruncationStats* stats) {
    const int j = dot_index(i, hh);
    const int lo = first_visible(i) - first_key_, n = last_visible(i) - first_visible(i) + 1;
    const uint16_t v_max_bits = *std::max_element(ws_.v_max.begin() + lo, ws_.v_max.begin() + lo + n);
    const RowChoice c = choose_keys(row_scores(j) + lo, n, v_max_bits, max_dropped_mass, ws_.selection);
    ws_.keeps_all[j] = c.exact;
    ws_.keep_above[j] = c.keep_above;
    stats->attention_rows += 1;
    stats->v_keys_total += n;
    stats->v_keys_kept += c.kept;
    if (c.exact) {
      stats->fallback_rows += 1;
      return;
    }
    stats->truncated_rows += 1;
    stats->max_dropped_mass = std::max(stats->max_dropped_mass, c.dropped_mass);
    const double v_max = fp16_to_fp32(v_max_bits);
    stats->max_error_bound = std::max(stats->max_error_bound, 2.0 * c.dropped_mass * v_max);
  }

  bool any_kept(int pb, int nb) {
    for (int i = i0_; i < i1_; ++i) {
      for (int hh = 0; hh < group_; ++hh) {
        const int j = dot_index(i, hh);
        for (int b = 0; b < nb; ++b) {
          if (visible(pb + b, i) && keeps(j, row_scores(j)[pb - first_key_ + b])) return true;
        }
      }
    }
    return false;
  }

  // Pass 2: each row's kept keys of the block, in increasing position, with the exact steps.
  void accumulate(int pb, int nb) {
    for (int i = i0_; i < i1_; ++i) {
      for (int hh = 0; hh < group_; ++hh) {
        const int j = dot_index(i, hh);
        float* acc = ws_.acc.data() + static_cast<int64_t>(j) * D_;
        const float* s = row_scores(j) + (pb - first_key_);
        WeightedKeys queued;
        for (int b = 0; b < nb; ++b) {
          if (!visible(pb + b, i) || !keeps(j, s[b])) continue;
          const int64_t vb = static_cast<int64_t>(b) * D_;
          softmax_step(s[b], ws_.v.data() + vb, ws_.v64.data() + vb, D_, acc, ws_.max[j], ws_.sum[j], queued);
        }
        add_weighted_keys(acc, queued, D_);
      }
    }
  }

  int first_key_, last_key_;
  int span_;  // keys [first_key, last_key] rounded up to whole blocks
};

}  // namespace

// q [n_q, n_head, D] · K, V [positions, n_head_kv, D] (f16) -> out [n_q, n_head, D]
void attention_truncated(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                         float kq_scale, float max_dropped_mass, float* out, AttentionWorkspace* ws, TruncationStats* stats) {
  assert(max_dropped_mass >= 0.0f && max_dropped_mass <= 1.0f);
  const int group = n_head / kv.n_head_kv;
  const int rows_per_tile = std::max(1, kTileDots / group);
  ws->fit(kv.head_dim, rows_per_tile * group);
  for (int g = 0; g < kv.n_head_kv; ++g) {
    for (int i0 = 0; i0 < n_q; i0 += rows_per_tile) {
      TruncatedTile(q, pos0, n_head, kv, mask, kq_scale, *ws, g, i0, std::min(n_q, i0 + rows_per_tile))
          .run(max_dropped_mass, out, stats);
    }
  }
}

}  // namespace lf
