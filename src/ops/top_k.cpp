#include <algorithm>
#include <cmath>
#include <functional>

#include "ops/ops.h"
#include "quant/quant.h"

namespace lf {

double select_top_k(const float* a, int n, int k, std::vector<uint64_t>* keys, uint8_t* keep) {
  // The bits of a non-negative float order as the floats do (NaN's above +inf): key = |a|'s bits,
  // then the complement of the index, so one integer order ranks magnitude and breaks ties.
  auto key = [a](int i) {
    return uint64_t{f32_bits(a[i]) & 0x7FFFFFFFu} << 32 | (0xFFFFFFFFu - static_cast<uint32_t>(i));
  };
  keys->resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) (*keys)[static_cast<size_t>(i)] = key(i);
  k = std::clamp(k, 0, n);
  uint64_t cut = ~uint64_t{0};  // above every key: k = 0 keeps nothing
  if (k > 0) {
    std::nth_element(keys->begin(), keys->begin() + (k - 1), keys->end(), std::greater<>());
    cut = (*keys)[static_cast<size_t>(k - 1)];
  }
  double total = 0, dropped = 0;
  for (int i = 0; i < n; ++i) {
    keep[i] = key(i) >= cut;
    const double m = std::fabs(static_cast<double>(a[i]));
    total += m;
    if (!keep[i]) dropped += m;
  }
  return total == 0 ? 0.0 : dropped / total;  // NaN when an |a| is
}

}  // namespace lf
