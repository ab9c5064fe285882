#include "approx/early_exit.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace lf {

float relative_update(const float* x, const float* y, int n, const WeightView& layer_output_scale) {
  const float scale = layer_output_scale.present() ? layer_output_scale.f32()[0] : 1.0f;
  double change = 0, size = 0;
  for (int j = 0; j < n; ++j) {
    const float scaled = layer_output_scale.present() ? x[j] * scale : x[j];
    const double d = static_cast<double>(y[j]) - scaled;
    change += d * d;
    size += static_cast<double>(scaled) * scaled;
  }
  if (change == 0) return 0.0f;
  // A zero input row has an unbounded update: FLT_MAX keeps it a number in JSON.
  return static_cast<float>(std::min(std::sqrt(change / size), static_cast<double>(FLT_MAX)));
}

void advance_exit(const ApproxOptions& o, int il, float update, ExitState* e) {
  std::vector<float>& recent = e->recent_updates;
  recent.push_back(update);
  const size_t window = static_cast<size_t>(std::clamp(o.exit_window, 1, kMaxExitWindow));
  if (recent.size() > window) recent.erase(recent.begin(), recent.end() - static_cast<std::ptrdiff_t>(window));
  if (!o.early_exit || recent.size() < window) return;
  double sum = 0;
  for (float r : recent) sum += r;
  if (sum < o.exit_threshold) e->exit_layer = il;
}

}  // namespace lf
