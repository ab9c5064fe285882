// Early exit of a forward call's last row (approx.h): how far each layer moves it, and when the
// row stops.
#pragma once

#include "approx/approx.h"
#include "layout/weight_view.h"

namespace lf {

// x [n] into a layer, y [n] out of it -> |y - s·x| / |s·x| in f64, s the layer's
// layer_output_scale (else 1): 0 exactly when the layer's attention output and FFN add nothing.
float relative_update(const float* x, const float* y, int n, const WeightView& layer_output_scale);

// The row's update through layer il joins its last updates; it exits once the last
// exit_window of them sum below exit_threshold.
void advance_exit(const ApproxOptions& o, int il, float update, ExitState* e);

}  // namespace lf
