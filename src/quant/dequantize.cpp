// dequantize_row: every block format a Gemma GGUF may hold -> f32, with llama.cpp's
// dequantize_row_* arithmetic (docs/gguf.md, "Legacy blocks" and "K-quants").
#include <cstring>

#include "quant/quant.h"
#include "quant/row_check.h"
#include "quant/unpack.h"

namespace lf {
namespace {

// src [n] f16 or bf16 -> dst [n] f32
template <float (*ToF32)(uint16_t)>
void dequantize_halves(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, h + 2 * i, sizeof bits);
    dst[i] = ToF32(bits);
  }
}

// x [nb] Q4_0/Q5_0 blocks -> y [32·nb]: value = q·d
template <typename Block, void (*Unpack)(const Block&, int8_t*)>
void dequantize_scaled(const Block* x, float* y, int64_t nb) {
  int8_t q[QK4_0];
  for (int64_t b = 0; b < nb; ++b, y += QK4_0) {
    Unpack(x[b], q);
    const float d = fp16_to_fp32(x[b].d);
    for (int i = 0; i < QK4_0; ++i) y[i] = q[i] * d;
  }
}

// x [nb] Q4_1/Q5_1 blocks -> y [32·nb]: value = q·d + m
template <typename Block, void (*Unpack)(const Block&, int8_t*)>
void dequantize_scaled_offset(const Block* x, float* y, int64_t nb) {
  int8_t q[QK4_0];
  for (int64_t b = 0; b < nb; ++b, y += QK4_0) {
    Unpack(x[b], q);
    const float d = fp16_to_fp32(x[b].d);
    const float m = fp16_to_fp32(x[b].m);
    for (int i = 0; i < QK4_0; ++i) y[i] = q[i] * d + m;
  }
}

// x [nb] Q8_0 blocks -> y [32·nb]: value = q·d
void dequantize_q8_0(const block_q8_0* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += QK8_0) {
    const float d = fp16_to_fp32(x[b].d);
    for (int i = 0; i < QK8_0; ++i) y[i] = x[b].qs[i] * d;
  }
}

// x [nb] Q4_K/Q5_K super-blocks -> y [256·nb]: value = (d·sc)·q − (dmin·m) per 32-element sub-block
template <typename Block, void (*Unpack)(const Block&, int8_t*)>
void dequantize_k_with_mins(const Block* x, float* y, int64_t nb) {
  int8_t q[QK_K];
  for (int64_t b = 0; b < nb; ++b) {
    Unpack(x[b], q);
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    for (int s = 0; s < QK_K / 32; ++s, y += 32) {
      const ScaleMin sm = scale_min_k4(x[b].scales, s);
      const float d1 = d * sm.scale;
      const float m1 = dmin * sm.min;
      for (int l = 0; l < 32; ++l) y[l] = d1 * q[32 * s + l] - m1;
    }
  }
}

// x [nb] Q6_K super-blocks -> y [256·nb]: value = (d·sc)·q per 16-element sub-block, sc signed
void dequantize_q6_K(const block_q6_K* x, float* y, int64_t nb) {
  int8_t q[QK_K];
  for (int64_t b = 0; b < nb; ++b) {
    unpack_q6_K(x[b], q);
    const float d = fp16_to_fp32(x[b].d);
    // Element order within a half of 128 is l, l+32, l+64, l+96 with scale index is + 0/2/4/6
    // (is = l/16), i.e. the scale of element e in the half is scales[e/16]: plain 16-groups.
    for (int g = 0; g < QK_K / 16; ++g, y += 16) {
      for (int l = 0; l < 16; ++l) y[l] = d * x[b].scales[g] * q[16 * g + l];
    }
  }
}

}  // namespace

Status dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  TypeTraits traits;
  LF_RETURN_IF_ERROR(check_row("dequantize_row", type, n, &traits));
  if (n == 0) return Status::ok_status();
  const int64_t nb = n / traits.block_elems;
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
    case GgmlType::F16: dequantize_halves<fp16_to_fp32>(src, dst, n); break;
    case GgmlType::BF16: dequantize_halves<bf16_to_fp32>(src, dst, n); break;
    case GgmlType::Q4_0:
      dequantize_scaled<block_q4_0, unpack_q4_0>(static_cast<const block_q4_0*>(src), dst, nb);
      break;
    case GgmlType::Q5_0:
      dequantize_scaled<block_q5_0, unpack_q5_0>(static_cast<const block_q5_0*>(src), dst, nb);
      break;
    case GgmlType::Q4_1:
      dequantize_scaled_offset<block_q4_1, unpack_q4_1>(static_cast<const block_q4_1*>(src), dst, nb);
      break;
    case GgmlType::Q5_1:
      dequantize_scaled_offset<block_q5_1, unpack_q5_1>(static_cast<const block_q5_1*>(src), dst, nb);
      break;
    case GgmlType::Q8_0: dequantize_q8_0(static_cast<const block_q8_0*>(src), dst, nb); break;
    case GgmlType::Q4_K:
      dequantize_k_with_mins<block_q4_K, unpack_q4_K>(static_cast<const block_q4_K*>(src), dst, nb);
      break;
    case GgmlType::Q5_K:
      dequantize_k_with_mins<block_q5_K, unpack_q5_K>(static_cast<const block_q5_K*>(src), dst, nb);
      break;
    case GgmlType::Q6_K: dequantize_q6_K(static_cast<const block_q6_K*>(src), dst, nb); break;
    default:
      return Status(Code::unsupported, "dequantize_row: no dequantization for type " + type_label(type));
  }
  return Status::ok_status();
}

}  // namespace lf
