// attention_tiled: lf::attention's arithmetic, operation for operation, reorganized so that a
// tile of (query row, query head) pairs sharing one KV head reads each K/V row once. Each
// pair keeps its own sequential order over keys and over the head dim, which is what makes the
// bytes equal (docs/attention.md).
#include <algorithm>
#include <vector>

#include "kernels/attention_steps.h"
#include "kernels/attention.h"
#include "quant/quant.h"

namespace lf {
namespace {

using namespace attn_steps;

// One tile: query rows [i0, i1) × the `group` query heads of KV head g.
class Tile : TileShape {
 public:
  Tile(const float* q, int pos0, int n_head, const KvView& kv, const KeyMask& mask, float kq_scale,
       AttentionWorkspace& ws, int g, int i0, int i1)
      : TileShape(q, pos0, n_head, kv, mask, kq_scale, ws, g, i0, i1) {}

  void run(float* out) {
    load_queries();
    const int first = first_key(), last = last_key();
    for (int pb = first; pb <= last; pb += kKeyBlock) {
      const int nb = std::min(kKeyBlock, last - pb + 1);
      load_keys(pb, nb);
      score(pb, nb);
      accumulate(pb, nb);
    }
    store(out);
  }

 private:
  void load_queries() {
    for (int i = i0_; i < i1_; ++i) {
      for (int hh = 0; hh < group_; ++hh) {
        load_query(q_ + q_offset(i, hh), D_, ws_.q.data() + static_cast<int64_t>(dot_index(i, hh)) * D_);
      }
    }
    const int n_dots = (i1_ - i0_) * group_;
    std::fill(ws_.acc.begin(), ws_.acc.begin() + static_cast<int64_t>(n_dots) * D_, 0.0f);
    std::fill(ws_.max.begin(), ws_.max.begin() + n_dots, -INFINITY);
    std::fill(ws_.sum.begin(), ws_.sum.begin() + n_dots, 0.0f);
  }

  // Keys pb .. pb+nb-1 -> k [D, kKeyBlock] (missing keys zero), v and v64 [kKeyBlock, D]
  void load_keys(int pb, int nb) {
    load_keys_transposed(kv_, g_, pb, nb, ws_.k32.data(), ws_.k.data());
    load_values(kv_, g_, pb, nb, ws_.v.data(), ws_.v64.data());
  }

  void score(int pb, int nb) {
    for (int i = i0_; i < i1_; ++i) {
      if (!sees_any(i, pb, nb)) continue;
      for (int hh = 0; hh < group_; ++hh) {
        const int j = dot_index(i, hh);
        score_block(ws_.q.data() + static_cast<int64_t>(j) * D_, ws_.k.data(), D_, kq_scale_,
                    ws_.scores.data() + j * kKeyBlock);
      }
    }
  }

  // Online softmax and V accumulation of each pair, keys in increasing position, exactly the
  // reference's sequence of operations.
  void accumulate(int pb, int nb) {
    for (int i = i0_; i < i1_; ++i) {
      for (int hh = 0; hh < group_; ++hh) {
        const int j = dot_index(i, hh);
        float* acc = ws_.acc.data() + static_cast<int64_t>(j) * D_;
        WeightedKeys queued;
        for (int b = 0; b < nb; ++b) {
          if (!visible(pb + b, i)) continue;
          const int64_t vb = static_cast<int64_t>(b) * D_;
          softmax_step(ws_.scores[j * kKeyBlock + b], ws_.v.data() + vb, ws_.v64.data() + vb, D_, acc, ws_.max[j],
                       ws_.sum[j], queued);
        }
        add_weighted_keys(acc, queued, D_);
      }
    }
  }
};

}  // namespace

void AttentionWorkspace::fit(int D, int tile_dots) {
  const size_t dots = static_cast<size_t>(tile_dots);
  q.resize(dots * D);
  k.resize(static_cast<size_t>(D) * kKeyBlock);
  v.resize(static_cast<size_t>(kKeyBlock) * D);
  v64.resize(v.size());
  k32.resize(static_cast<size_t>(kKeyBlock) * D);
  acc.resize(dots * D);
  scores.resize(dots * kKeyBlock);
  max.resize(dots);
  sum.resize(dots);
}

void halves_to_floats(const uint16_t* h, float* f, int n) { halves_to_f32(h, f, n); }

void round_floats_to_halves(const float* x, float* y, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) simd::store(y + i, round_to_half(simd::load_f32x4(x + i)));
  for (; i < n; ++i) y[i] = round_to_half(x[i]);
}

void accumulate_weighted_value(float* acc, const float* v, float w, int n) {
  const std::vector<double> v64(v, v + n);
  add_weighted(acc, v, v64.data(), w, n);
}

// q [n_q, n_head, D] · K, V [positions, n_head_kv, D] (f16) -> out [n_q, n_head, D]
void attention_tiled(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                     float kq_scale, float* out, AttentionWorkspace* ws) {
  if (kv.k_type != GgmlType::F16 || kv.v_type != GgmlType::F16) {
    attention_tiled_quantized(q, n_q, pos0, n_head, kv, mask, kq_scale, out, ws);
    return;
  }
  const int group = n_head / kv.n_head_kv;
  const int rows_per_tile = std::max(1, kTileDots / group);
  ws->fit(kv.head_dim, rows_per_tile * group);
  for (int g = 0; g < kv.n_head_kv; ++g) {
    for (int i0 = 0; i0 < n_q; i0 += rows_per_tile) {
      Tile(q, pos0, n_head, kv, mask, kq_scale, *ws, g, i0, std::min(n_q, i0 + rows_per_tile)).run(out);
    }
  }
}

}  // namespace lf
