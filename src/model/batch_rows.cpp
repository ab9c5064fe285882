#include "model/batch_rows.h"

namespace lf {

void BatchRows::lay_out() {
  n = n_act = n_out = 0;
  act_segment.clear();
  for (size_t i = 0; i < segments.size(); ++i) {
    Segment& g = segments[i];
    g.x0 = n;
    g.a0 = n_act;
    g.o0 = n_out;
    n += g.n;
    n_act += g.n_act();
    n_out += g.n_q();
    act_segment.insert(act_segment.end(), static_cast<size_t>(g.n_act()), static_cast<int>(i));
  }
}

}  // namespace lf
