// The K-quant weight quantizers (quant/quantize_k.cpp), read back through dequantize_row, whose
// unpacking the hand-made blocks of test_quant.cpp check: every element within its grid's half
// step (docs/gguf.md, "K-quant quantizers"), and an RMS error near that of uniform rounding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "quant/quant.h"
#include "support/quant_test_data.h"

namespace {

using lf::GgmlType;
using lf::QK_K;

// One f16 step at v, and the f16 subnormal step: how far fp16_not_below may move a scale up.
double f16_ceiling(double v) { return std::max(v * (1.0 + 1.0 / 1024), v + 6.0e-8); }

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(static_cast<size_t>(n / QK_K) * 210);
  switch (type) {
    case GgmlType::Q4_K: lf::quantize_row_q4_K(x.data(), reinterpret_cast<lf::block_q4_K*>(q.data()), n); break;
    case GgmlType::Q5_K: lf::quantize_row_q5_K(x.data(), reinterpret_cast<lf::block_q5_K*>(q.data()), n); break;
    default: lf::quantize_row_q6_K(x.data(), reinterpret_cast<lf::block_q6_K*>(q.data()), n); break;
  }
  std::vector<float> y(x.size());
  REQUIRE(lf::dequantize_row(type, q.data(), y.data(), n).ok());
  return y;
}

// The bound on |x − y| of each element, from x alone. Q4_K / Q5_K (nmax 15 / 31), sub-blocks of
// 32 with lo = min(min, 0), A the super-block's largest −lo and R its largest range:
//   dmin <= f16_ceiling(A / 63)            the min offset dmin·m_j overshoots −lo by < dmin
//   d    <= f16_ceiling((R + dmin) / (63·nmax))
//   step_j = d·sc_j < (max_j − lo_j + dmin) / nmax + d, and the error is at most step_j / 2.
// Q6_K, sub-blocks of 16 with s_j = amax_j / 32 and S the largest s_j: d <= f16_ceiling(S / 127),
// step_j < s_j + d, and the error is at most step_j (x / step_j in [−32, 32] rounds to at most 31).
// Plus f32 rounding of the dequantizer's products.
std::vector<double> error_bounds(GgmlType type, const std::vector<float>& x) {
  std::vector<double> bound(x.size());
  for (size_t b0 = 0; b0 < x.size(); b0 += QK_K) {
    double amax = 0.0;
    for (size_t i = b0; i < b0 + QK_K; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
    const double slack = 1e-6 * amax;
    if (type == GgmlType::Q6_K) {
      double s_max = 0.0;
      std::vector<double> s(16);
      for (int j = 0; j < 16; ++j) {
        for (int l = 0; l < 16; ++l) s[j] = std::max(s[j], std::fabs(static_cast<double>(x[b0 + 16 * j + l])) / 32);
        s_max = std::max(s_max, s[j]);
      }
      const double d = f16_ceiling(s_max / 127);
      for (int j = 0; j < 16; ++j) {
        for (int l = 0; l < 16; ++l) bound[b0 + 16 * j + l] = s[j] + d + slack;
      }
      continue;
    }
    const double nmax = type == GgmlType::Q4_K ? 15 : 31;
    double lo[8], hi[8], a = 0.0, r = 0.0;
    for (int j = 0; j < 8; ++j) {
      lo[j] = 0.0;
      hi[j] = x[b0 + 32 * j];
      for (int l = 0; l < 32; ++l) {
        lo[j] = std::min(lo[j], static_cast<double>(x[b0 + 32 * j + l]));
        hi[j] = std::max(hi[j], static_cast<double>(x[b0 + 32 * j + l]));
      }
      a = std::max(a, -lo[j]);
      r = std::max(r, hi[j] - lo[j]);
    }
    const double dmin = f16_ceiling(a / 63);
    const double d = f16_ceiling((r + dmin) / (63 * nmax));
    for (int j = 0; j < 8; ++j) {
      const double step = (hi[j] - lo[j] + dmin) / nmax + d;
      for (int l = 0; l < 32; ++l) bound[b0 + 32 * j + l] = step / 2 + slack;
    }
  }
  return bound;
}

void check_within_bounds(GgmlType type, const std::vector<float>& x, const char* what) {
  const std::vector<float> y = round_trip(type, x);
  const std::vector<double> bound = error_bounds(type, x);
  int outside = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(std::fabs(static_cast<double>(x[i]) - y[i]) <= bound[i])) ++outside;
  }
  INFO(what << " in type " << static_cast<int>(type));
  CHECK(outside == 0);
}

const GgmlType kTypes[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

}  // namespace

TEST_CASE("K-quant quantizers: every element within its grid step", "[quant]") {
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 4 * QK_K;
  // Blocks of 32 at 1e-6, 1 and 1e4 side by side: the 6-bit sub-block scales meet their extremes.
  const std::vector<float> scales_mixed = lf_test::random_row(rng, n);
  std::vector<float> gaussian(n), all_negative(n), all_positive(n), constant(n, 0.37f), zeros(n, 0.0f), spike(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    gaussian[i] = normal(rng);
    all_negative[i] = -std::fabs(normal(rng)) - 0.5f;
    all_positive[i] = std::fabs(normal(rng)) + 0.5f;
  }
  spike[300] = -5.0f;  // one value per super-block decides every scale
  spike[700] = 5.0f;
  for (GgmlType type : kTypes) {
    check_within_bounds(type, scales_mixed, "mixed magnitudes");
    check_within_bounds(type, gaussian, "gaussian");
    check_within_bounds(type, all_negative, "all negative");
    check_within_bounds(type, all_positive, "all positive");
    check_within_bounds(type, constant, "constant");
    check_within_bounds(type, spike, "spikes");
    const std::vector<float> y = round_trip(type, zeros);
    CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == 0.0f; }));
  }
}

TEST_CASE("K-quant quantizers: RMS error near uniform rounding's on gaussian weights", "[quant]") {
  // Rounding to a grid of step Δ leaves an RMS error of Δ/√12. For N(0, 1) the range of 32 values
  // is about 4.1 (twice the expected maximum, 2.07) and the largest |x| of 16 about 2.07 too (the
  // largest of 32 values ±x), so the expected steps are 4.1/15, 4.1/31 and 2.07/32: RMS 0.080,
  // 0.039 and 0.019 (measured 0.079, 0.039, 0.019). The bounds add 25% for sampling.
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(64 * QK_K);
  for (float& v : x) v = normal(rng);
  const struct { GgmlType type; double bound; } cases[] = {
      {GgmlType::Q4_K, 0.099}, {GgmlType::Q5_K, 0.048}, {GgmlType::Q6_K, 0.023}};
  for (const auto& c : cases) {
    const std::vector<float> y = round_trip(c.type, x);
    double sum = 0.0;
    for (size_t i = 0; i < x.size(); ++i) sum += (static_cast<double>(x[i]) - y[i]) * (x[i] - y[i]);
    const double rms = std::sqrt(sum / static_cast<double>(x.size()));
    INFO("type " << static_cast<int>(c.type) << ": RMS error " << rms);
    CHECK(rms <= c.bound);
    CHECK(rms > c.bound / 4);  // a grid, not a copy
  }
}
