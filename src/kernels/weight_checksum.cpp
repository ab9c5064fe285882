#include "kernels/weight_checksum.h"

#include <cstring>

#include "kernels/simd.h"

namespace lf {

uint32_t weight_checksum(const uint8_t* p, uint64_t n) {
  uint32_t sum = 0;
  for (uint64_t i = 0; i < n; i += 2) sum += static_cast<uint32_t>(p[i] | (i + 1 < n ? p[i + 1] << 8 : 0));
  return sum & 0xFFFFu;
}

// Two cache lines per step into independent sums so that the loads, not the adds, set the pace:
// one wrapping i16 add per vector, no constant (V8 would build one anew inside the loop)
uint32_t weight_checksum_vectors(const uint8_t* p, uint64_t n) {
  const auto at = [p](uint64_t i) { return simd::load_i16x8(p + i); };
  simd::I16x8 s[4] = {simd::splat_i16(0), simd::splat_i16(0), simd::splat_i16(0), simd::splat_i16(0)};
  uint64_t i = 0;
  for (; i + 128 <= n; i += 128) {
    for (int k = 0; k < 8; ++k) s[k % 4] = simd::add(s[k % 4], at(i + 16 * k));
  }
  for (; i < n; i += 16) s[0] = simd::add(s[0], at(i));
  const simd::I16x8 total = simd::add(simd::add(s[0], s[1]), simd::add(s[2], s[3]));
  uint16_t lanes[8];
  std::memcpy(lanes, &total.v, sizeof lanes);
  uint32_t sum = 0;
  for (const uint16_t lane : lanes) sum += lane;
  return sum;
}

}  // namespace lf
