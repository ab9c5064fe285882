// K-quant quantizers for writing weight files (docs/gguf.md, "K-quant quantizers"). Not
// llama.cpp's least-squares search: scales are chosen so that every value of a sub-block lies
// inside the grid it is rounded to, which bounds each element's error by half a grid step.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/quant.h"

namespace lf {
namespace {

// The smallest f16 not below v (v >= 0 and finite): a scale rounded down could leave the
// sub-block's extreme outside the grid.
uint16_t fp16_not_below(float v) {
  uint16_t h = fp32_to_fp16(v);
  if (fp16_to_fp32(h) < v) ++h;  // positive f16 bit patterns are ordered like their values
  return h;
}

// ceil(v / step), 0 when step is 0, capped at `cap` (only reached through f32 rounding).
int ceil_ratio(float v, float step, int cap) {
  if (!(step > 0.0f)) return 0;
  return std::min(cap, static_cast<int>(std::ceil(v / step)));
}

// round-half-away(v) clamped to [lo, hi]
int round_clamped(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::lround(v)), lo, hi); }

// The 6-bit scales and mins of Q4_K / Q5_K, packed as get_scale_min_k4 unpacks them.
void pack_scales_mins(const int sc[8], const int m[8], uint8_t scales[12]) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4));
  }
}

// One super-block x [256] of Q4_K (nmax 15) or Q5_K (nmax 31) -> d, dmin, scales and the
// per-element levels q [256] in [0, nmax]. Element value: d·sc_j·q − dmin·m_j.
//   dmin·m_j  >= −min(min_j, 0)           (m_j rounded up: the sub-block's minimum is on the grid)
//   d·sc_j·nmax >= max_j + dmin·m_j       (sc_j rounded up: so is its maximum)
// so each q is a rounding, never a clamp.
void quantize_super_block_asym(const float* x, int nmax, uint16_t* d_out, uint16_t* dmin_out, uint8_t scales[12],
                               uint8_t q[QK_K]) {
  float neg_min[8];
  float max[8];
  float max_neg_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f, hi = x[32 * j];
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, x[32 * j + l]);
      hi = std::max(hi, x[32 * j + l]);
    }
    neg_min[j] = -lo;
    max[j] = hi;
    max_neg_min = std::max(max_neg_min, neg_min[j]);
  }
  const uint16_t dmin_h = fp16_not_below(max_neg_min / 63);
  const float dmin = fp16_to_fp32(dmin_h);
  int m[8];
  float range[8];
  float max_range = 0.0f;
  for (int j = 0; j < 8; ++j) {
    m[j] = ceil_ratio(neg_min[j], dmin, 63);
    range[j] = max[j] + dmin * static_cast<float>(m[j]);
    max_range = std::max(max_range, range[j]);
  }
  const uint16_t d_h = fp16_not_below(max_range / static_cast<float>(nmax * 63));
  const float d = fp16_to_fp32(d_h);
  int sc[8];
  for (int j = 0; j < 8; ++j) sc[j] = ceil_ratio(range[j], d * static_cast<float>(nmax), 63);
  for (int j = 0; j < 8; ++j) {
    // The products the dequantizer forms (docs/gguf.md, "Q4_K").
    const float step = d * static_cast<float>(sc[j]);
    const float offset = dmin * static_cast<float>(m[j]);
    for (int l = 0; l < 32; ++l) {
      q[32 * j + l] = static_cast<uint8_t>(step > 0.0f ? round_clamped((x[32 * j + l] + offset) / step, 0, nmax) : 0);
    }
  }
  *d_out = d_h;
  *dmin_out = dmin_h;
  pack_scales_mins(sc, m, scales);
}

}  // namespace

// x [n] -> y [n/256]
void quantize_row_q4_K(const float* x, block_q4_K* y, int64_t n) {
  uint8_t q[QK_K];
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    quantize_super_block_asym(x, 15, &y[b].d, &y[b].dmin, y[b].scales, q);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) y[b].qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
  }
}

// x [n] -> y [n/256]
void quantize_row_q5_K(const float* x, block_q5_K* y, int64_t n) {
  uint8_t q[QK_K];
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    quantize_super_block_asym(x, 31, &y[b].d, &y[b].dmin, y[b].scales, q);
    std::memset(y[b].qh, 0, sizeof y[b].qh);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = q[64 * c + l];
        const uint8_t hi = q[64 * c + 32 + l];
        y[b].qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
        y[b].qh[l] = static_cast<uint8_t>(y[b].qh[l] | ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

// x [n] -> y [n/256]. Sub-block j of 16 gets the step s_j = max_j / −32, max_j its value of
// largest magnitude with its sign, so x/s_j lies in [−32, 32]; its int8 scale is rounded away
// from zero (|d·sc_j| >= |s_j|), which keeps that so. Element value: d·sc_j·(L − 32).
void quantize_row_q6_K(const float* x, block_q6_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float s[16];
    float max_abs_s = 0.0f;
    for (int j = 0; j < 16; ++j) {
      float amax = 0.0f, max = 0.0f;
      for (int l = 0; l < 16; ++l) {
        if (std::fabs(x[16 * j + l]) > amax) {
          amax = std::fabs(x[16 * j + l]);
          max = x[16 * j + l];
        }
      }
      s[j] = max / -32;
      max_abs_s = std::max(max_abs_s, std::fabs(s[j]));
    }
    const uint16_t d_h = fp16_not_below(max_abs_s / 127);
    const float d = fp16_to_fp32(d_h);
    uint8_t L[QK_K];
    for (int j = 0; j < 16; ++j) {
      const int mag = ceil_ratio(std::fabs(s[j]), d, 127);
      const int sc = s[j] < 0 ? -mag : mag;
      y[b].scales[j] = static_cast<int8_t>(sc);
      const float step = d * static_cast<float>(sc);
      for (int l = 0; l < 16; ++l) {
        const int v = step != 0.0f ? round_clamped(x[16 * j + l] / step, -32, 31) : 0;
        L[16 * j + l] = static_cast<uint8_t>(v + 32);
      }
    }
    y[b].d = d_h;
    // Two halves of 128, laid out as docs/gguf.md's "Q6_K" table reads them.
    for (int h = 0; h < 2; ++h) {
      const uint8_t* Lh = L + 128 * h;
      uint8_t* ql = y[b].ql + 64 * h;
      uint8_t* qh = y[b].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0x0F) | ((Lh[l + 64] & 0x0F) << 4));
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0x0F) | ((Lh[l + 96] & 0x0F) << 4));
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                     ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace lf
