// The scalar reference of llama.cpp's tiled CPU flash attention (ggml-cpu/ops.cpp,
// ggml_compute_forward_flash_attn_ext_tiled; docs/attention.md, "The f32 tile path"), for a call
// without softcap or sinks: the path ggml takes for an f16 K and V when a call has 64 or more
// query rows and the head dim is a multiple of the SIMD width (16 on AVX-512), as mtmd's vision
// tower and an image's decode have. Operation for operation as its AVX-512 build computes each
// query row.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/exp_ggml.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {

void attention_f32_tiles_ref(const float* q, int n_q, int pos0, int n_head, const KvView& kv, const KeyMask& mask,
                             float kq_scale, float* out) {
  const int D = kv.head_dim;
  const F32TileKeys keys = f32_tile_keys(pos0, n_q, mask);
  std::vector<float> kq(kF32TileKeys), acc(D);
  for (int i = 0; i < n_q; ++i) {
    const int p = pos0 + i, first = mask.first_key(p), last = mask.last_key(p);
    for (int h = 0; h < n_head; ++h) {
      const float* qh = q + (static_cast<int64_t>(i) * n_head + h) * D;
      const int g = kv_head_for(h, n_head, kv.n_head_kv);
      const auto row = [&](const void* rows, int key) { return halves(kv_row(kv, rows, GgmlType::F16, g, key)); };
      float M = -INFINITY, S = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int p0 = keys.begin; p0 <= keys.last; p0 += kF32TileKeys) {
        // The call's keys of the tile (past them, padding: no score, no value) and this row's.
        const int t0 = std::max(0, keys.first - p0), t1 = std::min(kF32TileKeys, keys.last + 1 - p0);
        // scores: one FMA chain over d each, from 0; keys the row does not see -inf
        for (int t = 0; t < kF32TileKeys; ++t) {
          const int key = p0 + t;
          if (key < first || key > last) {
            kq[t] = -INFINITY;
            continue;
          }
          float s = 0.0f;
          for (int d = 0; d < D; ++d) s = fma_f32(qh[d], fp16_to_fp32(row(kv.k, key)[d]), s);
          kq[t] = s * kq_scale;
        }
        float tile_max = -INFINITY;
        for (int t = 0; t < kF32TileKeys; ++t) tile_max = tile_max > kq[t] ? tile_max : kq[t];
        if (tile_max == -INFINITY) {
          for (float& a : acc) a += 0.0f;  // ggml's GEMM over the row's zeroed weights: -0 becomes +0
          continue;
        }
        const float M_new = std::fmax(M, tile_max);
        if (M_new > M) {
          const float ms = expf(M - M_new);
          for (float& a : acc) a *= ms;
          S *= ms;
        }
        M = M_new;
        double sum = 0.0;
        for (int t = 0; t < kF32TileKeys; t += kExpLanes) sum += static_cast<double>(sum_exp_lanes(kq.data() + t, M));
        S = static_cast<float>(static_cast<double>(S) + sum);
        // the values: one FMA chain over the call's keys for each d (keys the row does not see
        // weigh 0), then the padding's 0 · 0
        for (int t = t0; t < t1; ++t) {
          for (int d = 0; d < D; ++d) acc[d] = fma_f32(kq[t], fp16_to_fp32(row(kv.v, p0 + t)[d]), acc[d]);
        }
        if (t1 - t0 < kF32TileKeys) for (float& a : acc) a += 0.0f;
      }
      const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
      float* o = out + (static_cast<int64_t>(i) * n_head + h) * D;
      for (int d = 0; d < D; ++d) o[d] = acc[d] * S_inv;
    }
  }
}

}  // namespace lf
