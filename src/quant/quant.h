// Block formats and their scalar reference arithmetic, bit-exact with llama.cpp's generic C
// definitions (docs/gguf.md, "Block formats"). Fast kernels elsewhere are tested against these.
#pragma once

#include <cstdint>
#include <cstring>

#include "gguf/ggml_type.h"
#include "base/status.h"

namespace lf {

// --- float formats (docs/gguf.md, "Float types") ---
// An f32's bits and back (std::bit_cast is missing from Emscripten 3.1.6's libc++).
inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even, subnormals kept, overflow -> inf, NaN -> 0x7E00
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even, NaN forced quiet
// a·b + c rounded once, as a fused multiply-add: llama.cpp's x86 and ARM kernels take their
// per-block f32 step so (docs/gguf.md, "The fused step") and its RoPE is compiled so. Computed
// in double with an exact fix-up for the rare double rounding, never by an FMA instruction or
// libc's fmaf (Emscripten's musl double-rounds results that are f32 subnormals), so every build
// gives the same, correctly rounded bits.
float fma_f32(float a, float b, float c);

// --- blocks (packed, little-endian; sizes as in ggml-common.h) ---
constexpr int QK4_0 = 32;
constexpr int QK8_0 = 32;
constexpr int QK_K = 256;

#pragma pack(push, 1)
struct block_q4_0 { uint16_t d; uint8_t qs[QK4_0 / 2]; };
struct block_q4_1 { uint16_t d; uint16_t m; uint8_t qs[QK4_0 / 2]; };
struct block_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[QK4_0 / 2]; };
struct block_q5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[QK4_0 / 2]; };
struct block_q8_0 { uint16_t d; int8_t qs[QK8_0]; };
struct block_q4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[QK_K / 2]; };
struct block_q5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; };
struct block_q6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; };
struct block_q8_K { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };
#pragma pack(pop)

static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q4_K) == 144);
static_assert(sizeof(block_q5_K) == 176);
static_assert(sizeof(block_q6_K) == 210);
static_assert(sizeof(block_q8_K) == 292);

// Q8_1, the activation format of Q4_1/Q5_1 dots (compute-only, never in files).
constexpr int QK8_1 = 32;
#pragma pack(push, 1)
struct block_q8_1 { uint16_t d; uint16_t s; int8_t qs[QK8_1]; };  // s = f16(d·Σqs), d un-rounded
#pragma pack(pop)
static_assert(sizeof(block_q8_1) == 36);

// --- dequantization: n elements (a multiple of the block size) of `type` at src -> dst ---
// Supports F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
Status dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// --- quantization (reference; n a multiple of the block size) ---
void quantize_row_q4_0_ref(const float* x, block_q4_0* y, int64_t n);
void quantize_row_q8_0_ref(const float* x, block_q8_0* y, int64_t n);  // weights (llama.cpp's generic C)
// Activations, as llama.cpp's x86 builds convert them (docs/gguf.md, "Activation quantization"):
void quantize_row_q8_0_x86(const float* x, block_q8_0* y, int64_t n);  // for Q4_0/Q5_0/Q8_0 dots
void quantize_row_q8_1_x86(const float* x, block_q8_1* y, int64_t n);  // for Q4_1/Q5_1 dots
void quantize_row_q8_K_ref(const float* x, block_q8_K* y, int64_t n);  // for K-quant dots (x86 runs the generic one)
// K-quant weights for files (n a multiple of 256): not llama.cpp's least-squares search, but
// every element within half a grid step of its sub-block (docs/gguf.md, "K-quant quantizers").
void quantize_row_q4_K(const float* x, block_q4_K* y, int64_t n);
void quantize_row_q5_K(const float* x, block_q5_K* y, int64_t n);
void quantize_row_q6_K(const float* x, block_q6_K* y, int64_t n);

// --- dot products: weight row (type) · activation row already converted to vec_dot_type(type) ---
// llama.cpp converts the f32 activation to the weight's vec_dot type first (docs/gguf.md,
// "Quantized matmul in llama.cpp's CPU backend").
GgmlType vec_dot_type(GgmlType weight_type);  // Q4_0/Q5_0/Q8_0 -> Q8_0, K-quants -> Q8_K, F16 -> F32, ...
// Bytes needed to hold n activation values converted to vec_dot_type(weight_type).
uint64_t activation_row_bytes(GgmlType weight_type, int64_t n);
// x[n] f32 -> dst in vec_dot_type(weight_type), rounded as llama.cpp's x86 builds round it.
Status convert_activation_row(GgmlType weight_type, const float* x, void* dst, int64_t n);
// Σ w[i]·a[i] over n elements, accumulated as llama.cpp's generic C path does, except that the
// Q4_0 and Q8_0 block step is fused as in its repacked and AMX kernels (docs/gguf.md, "Legacy
// block dots").
float vec_dot_ref(GgmlType weight_type, const void* w_row, const void* a_row, int64_t n);

// --- a quantized K/V cache's rows (the attention's, docs/attention.md "Quantized cache") ---
// A Q8_0 or Q4_0 row [n / 32 blocks] -> q [n] its integer values (Q4_0's minus 8), scale [n / 32].
void unpack_kv_blocks(GgmlType type, const void* row, int n, int8_t* q, float* scale);
// x [n] values with block scales x_scale [n / 32] (a row unpack_kv_blocks unpacked) · y [n / 32]
// Q8_0 blocks, as ggml_vec_dot_q8_0_q8_0 / _q4_0_q8_0 sum on llama.cpp's AVX2 and AVX-512
// builds: per block, lane l of 8 takes the integer sum of the products of values 4l .. 4l+3,
// and lane += d_x·d_y · that sum in one fused step; the lanes are then reduced as hsum_float_8
// (l + 4, l + 2, l + 1).
constexpr int kVecDotLanes = 8;
float vec_dot_q8_0_lanes(const int8_t* x, const float* x_scale, const block_q8_0* y, int64_t n);

}  // namespace lf
