#include "projector/clamped_linear.h"

#include <algorithm>

#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {

void LinearScratch::size_for(int workers, int64_t widest_input, int64_t most_values) {
  xc.resize(static_cast<size_t>(activation_row_bytes(GgmlType::F32, most_values)));  // f32: the widest vec_dot type there is
  row.assign(static_cast<size_t>(workers), std::vector<float>(static_cast<size_t>(widest_input)));
  failed.assign(static_cast<size_t>(workers), Status());
}

void clamped_linear(ThreadPool& pool, int worker, const ClampedLinear& L, const float* X, int n_tok, float* Y,
                    LinearScratch* s, Src0 src0) {
  // llamafile's tinyBLAS takes 2 tokens and more and src0's rows in fours; ggml's vector dot the rest.
  const int64_t src0_rows = src0 == Src0::weight ? L.w.n_out : n_tok;
  const bool lanes16 = n_tok >= 2 && src0_rows % 4 == 0 && gemm_lanes16_fits(L.w);
  const bool dots = !lanes16 && gemm_ggml_fits(L.w), floats = dots || lanes16;
  const uint64_t xrow = floats ? sizeof(float) * L.w.n_in : activation_row_bytes(L.w.type, L.w.n_in);
  const Share own = share(n_tok, worker, pool.size());
  std::vector<float>& r = s->row[worker];
  for (int64_t t = own.begin; t < own.end; ++t) {
    clamp_floats(X + t * L.w.n_in, L.w.n_in, L.in_min, L.in_max, r.data());
    if (floats) {
      auto* x = reinterpret_cast<float*>(s->xc.data() + xrow * t);
      if (L.w.type == GgmlType::F16) {
        round_floats_to_halves(r.data(), x, static_cast<int>(L.w.n_in));
      } else if (L.w.type == GgmlType::BF16) {
        for (int64_t i = 0; i < L.w.n_in; ++i) x[i] = bf16_to_fp32(fp32_to_bf16(r[i]));
      } else {
        std::copy(r.begin(), r.begin() + L.w.n_in, x);
      }
      continue;
    }
    const Status st = convert_activation_row(L.w.type, r.data(), s->xc.data() + xrow * t, L.w.n_in);
    if (!st.ok()) s->failed[worker] = st;
  }
  pool.barrier();
  const Share strips = share(L.w.n_out / 4, worker, pool.size());  // the F16 kernel's rows come in fours
  const Share rows = lanes16 ? Share{strips.begin * 4, strips.end * 4} : share(L.w.n_out, worker, pool.size());
  if (dots) {
    gemm_ggml(L.w, reinterpret_cast<const float*>(s->xc.data()), n_tok, Y, rows.begin, rows.end);
  } else if (lanes16) {
    gemm_lanes16(L.w, reinterpret_cast<const float*>(s->xc.data()), n_tok, Y, rows.begin, rows.end);
  } else {
    matmul_rows(L.w, s->xc.data(), n_tok, Y, rows.begin, rows.end);
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    float* y = Y + t * L.w.n_out + rows.begin;
    clamp_floats(y, rows.end - rows.begin, L.out_min, L.out_max, y);
  }
  pool.barrier();
}

}  // namespace lf
