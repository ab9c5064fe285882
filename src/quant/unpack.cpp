#include "quant/unpack.h"

namespace lf {
namespace {

// qs [16] -> q [32]: element j is the low nibble of qs[j], element j+16 the high nibble.
void unpack_nibbles_32(const uint8_t qs[QK4_0 / 2], int8_t q[QK4_0]) {
  for (int j = 0; j < QK4_0 / 2; ++j) {
    q[j] = static_cast<int8_t>(qs[j] & 0x0F);
    q[j + QK4_0 / 2] = static_cast<int8_t>(qs[j] >> 4);
  }
}

// Bit i of qh (read as a little-endian uint32) is the 5th bit of element i.
void add_fifth_bits_32(const uint8_t qh[4], int8_t q[QK4_0]) {
  const uint32_t bits = qh[0] | (uint32_t{qh[1]} << 8) | (uint32_t{qh[2]} << 16) | (uint32_t{qh[3]} << 24);
  for (int i = 0; i < QK4_0; ++i) q[i] = static_cast<int8_t>(q[i] | (((bits >> i) & 1) << 4));
}

void add_offset(int8_t* q, int n, int offset) {
  for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(q[i] + offset);
}

// qs [128] -> q [256]: chunk c (64 elements) reads qs[32c..32c+31], low nibbles first.
void unpack_k_nibbles(const uint8_t qs[QK_K / 2], int8_t q[QK_K]) {
  for (int c = 0; c < QK_K / 64; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = static_cast<int8_t>(qs[32 * c + l] & 0x0F);
      q[64 * c + 32 + l] = static_cast<int8_t>(qs[32 * c + l] >> 4);
    }
  }
}

}  // namespace

void unpack_q4_0(const block_q4_0& b, int8_t q[QK4_0]) {
  unpack_nibbles_32(b.qs, q);
  add_offset(q, QK4_0, -8);
}

void unpack_q4_1(const block_q4_1& b, int8_t q[QK4_0]) { unpack_nibbles_32(b.qs, q); }

void unpack_q5_0(const block_q5_0& b, int8_t q[QK4_0]) {
  unpack_nibbles_32(b.qs, q);
  add_fifth_bits_32(b.qh, q);
  add_offset(q, QK4_0, -16);
}

void unpack_q5_1(const block_q5_1& b, int8_t q[QK4_0]) {
  unpack_nibbles_32(b.qs, q);
  add_fifth_bits_32(b.qh, q);
}

void unpack_q4_K(const block_q4_K& b, int8_t q[QK_K]) { unpack_k_nibbles(b.qs, q); }

void unpack_q5_K(const block_q5_K& b, int8_t q[QK_K]) {
  unpack_k_nibbles(b.qs, q);
  // The 32 qh bytes serve all eight sub-blocks: sub-block s (32 elements) takes bit s.
  for (int s = 0; s < QK_K / 32; ++s) {
    for (int l = 0; l < 32; ++l) q[32 * s + l] = static_cast<int8_t>(q[32 * s + l] | (((b.qh[l] >> s) & 1) << 4));
  }
}

void unpack_q6_K(const block_q6_K& b, int8_t q[QK_K]) {
  // Two halves of 128; in each, ql [64] gives the low 4 bits and qh [32] two high bits per
  // element, four elements 32 apart sharing one qh byte.
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    int8_t* out = q + 128 * n;
    for (int l = 0; l < 32; ++l) {
      out[l + 0] = static_cast<int8_t>(((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32);
      out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32);
      out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

ScaleMin scale_min_k4(const uint8_t scales[12], int j) {
  // Sub-blocks 0..3 own the low 6 bits of bytes 0..7; 4..7 are split between a nibble of
  // bytes 8..11 and the top two bits of bytes 0..7.
  if (j < 4) return {scales[j] & 63, scales[j + 4] & 63};
  return {(scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4), (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4)};
}

}  // namespace lf
