// Where each session's rows lie in one layer of a batched forward call (docs/batching.md).
// A call runs several sessions' rows laid end to end; a layer sees them in three row spaces:
//   x    every input row (all of them store K and V in their session's cache),
//   act  the rows that run the attention output and the FFN: a session's rows from row0 on,
//        without an exited last row,
//   out  the rows of the layer output x_next: a session's rows from row0 on.
// Row t of a space belongs to one session; every per-row step computes it from that row alone,
// which is what keeps a session's bytes independent of the rest of the batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lf {

class Session;

// One session's rows in one layer.
struct Segment {
  Session* s = nullptr;
  int pos0 = 0;         // the position of its first row
  int n = 0;            // its x rows [x0, x0 + n)
  int x0 = 0;
  int row0 = 0;         // its rows before row0 only feed the KV cache (a last_only entry's final layer)
  bool exited = false;  // its last row has exited (early exit, approx.h)
  bool span = false;    // its rows are one media span (Session::span_in)
  int a0 = 0;           // act rows [a0, a0 + n_act()) are its x rows from x0 + row0
  int o0 = 0;           // out rows [o0, o0 + n_q())

  int n_q() const { return n - row0; }
  int n_act() const { return n_q() - (exited ? 1 : 0); }
};

struct BatchRows {
  std::vector<Segment> segments;
  std::vector<int> act_segment;  // [n_act] the segment of each act row
  int n = 0, n_act = 0, n_out = 0;

  // Sets every segment's x0, a0, o0, the totals and act_segment from their n, row0 and exited.
  void lay_out();

  const Segment& of_act(int64_t t) const { return segments[static_cast<size_t>(act_segment[static_cast<size_t>(t)])]; }
  // Act row t's index among its session's rows of this call, its x row, its out row, its position.
  int64_t local(int64_t t) const {
    const Segment& g = of_act(t);
    return g.row0 + (t - g.a0);
  }
  int64_t act_x(int64_t t) const { return of_act(t).x0 + local(t); }
  int64_t act_out(int64_t t) const { return of_act(t).o0 + (t - of_act(t).a0); }
  int act_pos(int64_t t) const { return of_act(t).pos0 + static_cast<int>(local(t)); }
};

}  // namespace lf
