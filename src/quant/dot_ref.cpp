// Reference dot products, bit-exact with llama.cpp's vec_dot functions (docs/gguf.md, "Quantized
// matmul in llama.cpp's CPU backend"): integers wherever llama.cpp uses integers (their order is
// free), and its exact f32 operation order wherever it uses floats: its generic C order, except
// for the Q4_0 and Q8_0 block step, which follows the kernels its x86 builds run for them. Fast
// kernels are tested against these.
#include <cassert>
#include <cstring>
#include <limits>
#include <type_traits>

#include "quant/quant.h"
#include "quant/row_check.h"
#include "quant/unpack.h"

namespace lf {
namespace {

// --- float rows ---

float f32_identity(float f) { return f; }

// w [n] · a [n] f32 -> f32. As llama.cpp's scalar ggml_vec_dot_f32: each product is rounded to
// f32, the sum is kept in double (ggml_float) and rounded to f32 once at the end. The activation
// stays f32 for F16 and BF16 weights too, as llama.cpp's AMX build multiplies F16 weights: its
// other builds round the activation to the weight's type first, which puts them further from the
// model (docs/forward-pass.md, "What the engine computes").
template <typename T, float (*ToF32)(T)>
float dot_float(const T* w, const float* a, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(ToF32(w[i]) * a[i]);
  return static_cast<float>(sum);
}

// --- 32-element blocks ---

// w [32] · a [32] -> exact integer sum
int32_t dot_i8_32(const int8_t* w, const int8_t* a) {
  int32_t sum = 0;
  for (int i = 0; i < QK8_0; ++i) sum += w[i] * a[i];
  return sum;
}

void unpack_q8_0(const block_q8_0& b, int8_t q[QK8_0]) { std::memcpy(q, b.qs, QK8_0); }

// Q4_0 or Q8_0 weights [nb blocks] · Q8_0 activation [nb blocks], as llama.cpp's repacked Q4_0
// kernels (x86 AVX2 / AVX-512, ARM NEON) and its AMX kernels for Q4_0 and Q8_0 compute each
// output: one fused step per block in increasing block order, sumf = fma(sumi, dw·dy, sumf)
// (dw·dy, two f16 values, is exact in f32). Its generic C rounds sumi·dw·dy before adding it.
template <typename Block, void (*Unpack)(const Block&, int8_t*)>
float dot_fused_q8_0(const Block* x, const block_q8_0* y, int64_t nb) {
  int8_t q[QK8_0];
  float sumf = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    Unpack(x[b], q);
    const int32_t sumi = dot_i8_32(q, y[b].qs);
    sumf = fma_f32(static_cast<float>(sumi), fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d), sumf);
  }
  return sumf;
}

// Q5_0 weights [nb blocks] · Q8_0 activation [nb blocks], as the generic C: no x86 kernel of
// llama.cpp keeps a block's sum whole for this type.
template <typename Block, void (*Unpack)(const Block&, int8_t*)>
float dot_scaled_q8_0(const Block* x, const block_q8_0* y, int64_t nb) {
  int8_t q[QK8_0];
  float sumf = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    Unpack(x[b], q);
    const int32_t sumi = dot_i8_32(q, y[b].qs);
    sumf += static_cast<float>(sumi) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
  }
  return sumf;
}

// Q4_1 or Q5_1 weights [nb blocks] · Q8_1 activation [nb blocks]
template <typename Block, void (*Unpack)(const Block&, int8_t*)>
float dot_offset_q8_1(const Block* x, const block_q8_1* y, int64_t nb) {
  int8_t q[QK8_1];
  float sumf = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    Unpack(x[b], q);
    const int32_t sumi = dot_i8_32(q, y[b].qs);
    // Σ(q·d + m)·a = d·dy·Σq·qa + m·Σa, and y.s holds Σa.
    sumf += (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d)) * static_cast<float>(sumi) +
            fp16_to_fp32(x[b].m) * fp16_to_fp32(y[b].s);
  }
  return sumf;
}

// --- 256-element super-blocks ---

// The generic K dots sum q·q8·scale into 8 int32 lanes (lane = element index mod 8) per
// super-block, scale each lane by d·dy in f32, and add the 8 lanes into the result only at
// the very end; that lane split is what fixes the f32 rounding.
constexpr int kLanes = 8;

// q [256] · q8 [256] with scale16 [16] (one per 16 elements) -> lanes [8] (overwritten)
void accumulate_lanes(const int8_t* q, const int32_t* scale16, const int8_t* q8, int32_t lanes[kLanes]) {
  for (int l = 0; l < kLanes; ++l) lanes[l] = 0;
  for (int i = 0; i < QK_K; ++i) lanes[i % kLanes] += scale16[i / 16] * (q[i] * q8[i]);
}

// Weight super-block as integers: q [256], scale16 [16], and for Q4_K/Q5_K the min term
// Σ_g bsums[g]·min(sub-block of g), which needs the activation's bsums.
struct KInts {
  int8_t q[QK_K];
  int32_t scale16[QK_K / 16];
  int32_t min_term;
};

template <typename Block, void (*Unpack)(const Block&, int8_t*)>
void unpack_k_with_mins(const Block& x, const block_q8_K& y, KInts* out) {
  Unpack(x, out->q);
  out->min_term = 0;
  for (int g = 0; g < QK_K / 16; ++g) {
    const ScaleMin sm = scale_min_k4(x.scales, g / 2);
    out->scale16[g] = sm.scale;
    out->min_term += y.bsums[g] * sm.min;
  }
}

void unpack_k(const block_q4_K& x, const block_q8_K& y, KInts* out) {
  unpack_k_with_mins<block_q4_K, unpack_q4_K>(x, y, out);
}

void unpack_k(const block_q5_K& x, const block_q8_K& y, KInts* out) {
  unpack_k_with_mins<block_q5_K, unpack_q5_K>(x, y, out);
}

void unpack_k(const block_q6_K& x, const block_q8_K& y, KInts* out) {
  unpack_q6_K(x, out->q);
  for (int g = 0; g < QK_K / 16; ++g) out->scale16[g] = x.scales[g];
  out->min_term = 0;
}

// Q4_K, Q5_K or Q6_K weights [nb super-blocks] · Q8_K activation [nb super-blocks]
template <typename Block>
float dot_k_q8_K(const Block* x, const block_q8_K* y, int64_t nb) {
  constexpr bool kHasMins = !std::is_same_v<Block, block_q6_K>;
  KInts ints;
  int32_t lanes[kLanes];
  float sums[kLanes] = {};
  float sumf = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    unpack_k(x[b], y[b], &ints);
    accumulate_lanes(ints.q, ints.scale16, y[b].qs, lanes);
    const float d = fp16_to_fp32(x[b].d) * y[b].d;
    for (int l = 0; l < kLanes; ++l) sums[l] += d * static_cast<float>(lanes[l]);
    if constexpr (kHasMins) {
      const float dmin = fp16_to_fp32(x[b].dmin) * y[b].d;
      sumf -= dmin * static_cast<float>(ints.min_term);
    }
  }
  for (int l = 0; l < kLanes; ++l) sumf += sums[l];
  return sumf;
}

bool has_reference_dot(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return true;
    default: return false;
  }
}

}  // namespace

GgmlType vec_dot_type(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0: return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: return GgmlType::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return GgmlType::Q8_K;
    case GgmlType::F16:
    case GgmlType::BF16: return GgmlType::F32;
    default: return weight_type;  // F32 (and types without a dot) pair with themselves
  }
}

uint64_t activation_row_bytes(GgmlType weight_type, int64_t n) {
  TypeTraits traits;
  if (n < 0 || !type_traits(static_cast<uint32_t>(vec_dot_type(weight_type)), &traits)) return 0;
  return row_bytes(traits, static_cast<uint64_t>(n));
}

Status convert_activation_row(GgmlType weight_type, const float* x, void* dst, int64_t n) {
  if (!has_reference_dot(weight_type)) {
    return Status(Code::unsupported, "convert_activation_row: no dot product for weight type " + type_label(weight_type));
  }
  const GgmlType act_type = vec_dot_type(weight_type);
  TypeTraits traits;
  LF_RETURN_IF_ERROR(check_row("convert_activation_row", act_type, n, &traits));
  if (n == 0) return Status::ok_status();
  switch (act_type) {
    case GgmlType::F32: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float)); break;
    case GgmlType::Q8_0: quantize_row_q8_0_x86(x, static_cast<block_q8_0*>(dst), n); break;
    case GgmlType::Q8_1: quantize_row_q8_1_x86(x, static_cast<block_q8_1*>(dst), n); break;
    case GgmlType::Q8_K: quantize_row_q8_K_ref(x, static_cast<block_q8_K*>(dst), n); break;
    default:
      return Status(Code::internal, "convert_activation_row: no converter for " + type_label(act_type));
  }
  return Status::ok_status();
}

float vec_dot_ref(GgmlType weight_type, const void* w_row, const void* a_row, int64_t n) {
  TypeTraits traits;
  const bool known = type_traits(static_cast<uint32_t>(weight_type), &traits);
  assert(known && has_reference_dot(weight_type) && n % traits.block_elems == 0);
  if (!known) return std::numeric_limits<float>::quiet_NaN();
  const int64_t nb = n / traits.block_elems;
  switch (weight_type) {
    case GgmlType::F32:
      return dot_float<float, f32_identity>(static_cast<const float*>(w_row), static_cast<const float*>(a_row), n);
    case GgmlType::F16:
      return dot_float<uint16_t, fp16_to_fp32>(static_cast<const uint16_t*>(w_row), static_cast<const float*>(a_row), n);
    case GgmlType::BF16:
      return dot_float<uint16_t, bf16_to_fp32>(static_cast<const uint16_t*>(w_row), static_cast<const float*>(a_row), n);
    case GgmlType::Q4_0:
      return dot_fused_q8_0<block_q4_0, unpack_q4_0>(static_cast<const block_q4_0*>(w_row),
                                                     static_cast<const block_q8_0*>(a_row), nb);
    case GgmlType::Q5_0:
      return dot_scaled_q8_0<block_q5_0, unpack_q5_0>(static_cast<const block_q5_0*>(w_row),
                                                      static_cast<const block_q8_0*>(a_row), nb);
    case GgmlType::Q8_0:
      return dot_fused_q8_0<block_q8_0, unpack_q8_0>(static_cast<const block_q8_0*>(w_row),
                                                     static_cast<const block_q8_0*>(a_row), nb);
    case GgmlType::Q4_1:
      return dot_offset_q8_1<block_q4_1, unpack_q4_1>(static_cast<const block_q4_1*>(w_row),
                                                      static_cast<const block_q8_1*>(a_row), nb);
    case GgmlType::Q5_1:
      return dot_offset_q8_1<block_q5_1, unpack_q5_1>(static_cast<const block_q5_1*>(w_row),
                                                      static_cast<const block_q8_1*>(a_row), nb);
    case GgmlType::Q4_K:
      return dot_k_q8_K(static_cast<const block_q4_K*>(w_row), static_cast<const block_q8_K*>(a_row), nb);
    case GgmlType::Q5_K:
      return dot_k_q8_K(static_cast<const block_q5_K*>(w_row), static_cast<const block_q8_K*>(a_row), nb);
    case GgmlType::Q6_K:
      return dot_k_q8_K(static_cast<const block_q6_K*>(w_row), static_cast<const block_q8_K*>(a_row), nb);
    default: return std::numeric_limits<float>::quiet_NaN();  // refused by the assert above
  }
}

}  // namespace lf
