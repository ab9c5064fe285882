// Wall-clock milliseconds for the timings a call reports (ForwardReport); never used to decide
// anything, so a clock step only skews a report.
#pragma once

#include <chrono>

namespace lf {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace lf
