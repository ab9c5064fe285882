// The checks the engine's tests share: a fixture that must be refused with a given message, the
// same bytes, and the per-row relative error of two hidden-state matrices.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine_setup.h"

namespace lf::test {

// Builds and loads the fixture o describes, whole.
inline Status load_status(const FixtureOptions& o) {
  FixtureModel f;
  LF_RETURN_IF_ERROR(build_fixture(o, &f));
  Model m;
  return f.load_all(&m);
}

inline void require_refused(const FixtureOptions& o, const std::string& needle) {
  const Status s = load_status(o);
  INFO(s.message());
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find(needle) != std::string::npos);
}

inline bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// max over rows of |e - r| / |r| (Euclidean norms per row of `width` values).
inline double max_row_rel_error(const std::vector<float>& e, const std::vector<float>& r, int width) {
  double worst = 0;
  for (size_t row = 0; row < r.size() / width; ++row) {
    double d2 = 0, r2 = 0;
    for (int i = 0; i < width; ++i) {
      const double d = e[row * width + i] - r[row * width + i];
      d2 += d * d;
      r2 += static_cast<double>(r[row * width + i]) * r[row * width + i];
    }
    worst = std::max(worst, std::sqrt(d2 / r2));
  }
  return worst;
}

}  // namespace lf::test
