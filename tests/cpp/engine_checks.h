// Small checks and builders the engine's tests share: a Status that must be ok, a session, a
// fixture that must be refused with a given message, and the per-row relative error of two
// hidden-state matrices.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fixture_model.h"
#include "model/session.h"

namespace lf::test {

inline void require_ok(const Status& s) {
  INFO(s.message());
  REQUIRE(s.ok());
}

inline Session session(const Model& m, int max_ctx = 32, int attn_chunk = 64) {
  Session s;
  require_ok(Session::create(m, KvCacheOptions{max_ctx, attn_chunk}, &s));
  return s;
}

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
