#include "model/run_layers.h"

#include "approx/early_exit.h"
#include "base/elapsed.h"
#include "model/batch_rows.h"
#include "model/layer.h"

namespace lf {
namespace {

// Where each run's rows lie in the layer about to run, and the early exit of each run's last
// row. Every worker keeps its own copy and makes the same decisions from the same bytes, so no
// barrier is spent sharing them.
struct LayerRows {
  std::span<const BatchEntry> runs;
  BatchRows rows;
  std::vector<ExitState> exits;  // [runs]

  explicit LayerRows(std::span<const BatchEntry> r) : runs(r) {
    for (const BatchEntry& e : runs) {
      exits.push_back(e.session->exit_in);
      rows.segments.push_back(Segment{e.session, e.start_pos, e.n});
      rows.segments.back().span = e.session->span_in;
    }
  }

  // The final layer carries only a last_only run's last row past attention, as llama.cpp does
  // for its output rows.
  void lay_out(bool final_layer) {
    for (size_t k = 0; k < runs.size(); ++k) {
      rows.segments[k].row0 = runs[k].last_only && final_layer ? runs[k].n - 1 : 0;
      rows.segments[k].exited = exits[k].exited();
    }
    rows.lay_out();
  }

  // How far layer il moved each run's last row decides its early exit; worker 0 reports that
  // and the layer's time in each session's ForwardReport.
  void after_layer(const LayerCall& call, double ms) {
    const int E = call.E();
    const int slot = call.il - call.m.range.begin;
    for (size_t k = 0; k < runs.size(); ++k) {
      const Segment& g = rows.segments[k];
      Session& s = *g.s;
      if (!g.exited) {
        const float update = relative_update(call.x.data() + static_cast<size_t>(g.x0 + g.n - 1) * E,
                                             call.x_next.data() + static_cast<size_t>(g.o0 + g.n_q() - 1) * E, E,
                                             call.w().layer_output_scale);
        advance_exit(s.approx, call.il, update, &exits[k]);
        if (call.worker == 0) s.last.row_updates[slot] = update;
      }
      if (call.worker == 0) s.last.layer_ms[slot] = ms;
    }
  }
};

// The approximate modes choose the FFN per call; a MoE layer always routes.
FfnVariant ffn_variant(const Model& m, int il, bool top_k) {
  return m.config.layers[il].moe ? moe_ffn : top_k ? top_k_ffn : dense_ffn;
}

}  // namespace

std::vector<float>& residual(Scratch& scratch, int i) { return i % 2 == 0 ? scratch.x : scratch.x_next; }

void run_layers(const Model& m, std::span<const BatchEntry> runs, bool top_k, Scratch& b, int worker) {
  const Clock::time_point t_job = Clock::now();
  const int n_layers = m.range.end - m.range.begin;
  // Only once the job runs: a call refused as busy leaves the sessions' reports untouched.
  if (worker == 0) {
    for (const BatchEntry& e : runs) {
      e.session->last.layer_ms.assign(n_layers, 0.0);
      e.session->last.row_updates.assign(n_layers, -1.0f);
    }
  }
  LayerRows rows(runs);
  for (int il = m.range.begin; il < m.range.end; ++il) {
    const Clock::time_point t0 = Clock::now();
    rows.lay_out(il == m.range.end - 1);
    const int i = il - m.range.begin;
    const LayerCall call{m, b, *m.pool, residual(b, i), residual(b, i + 1), worker, il, rows.rows};
    run_layer(call, ffn_variant(m, il, top_k));  // ends on a barrier
    rows.after_layer(call, ms_since(t0));
  }
  if (worker == 0) {
    b.exit = std::move(rows.exits);
    b.layers_ms = ms_since(t_job);
  }
}

}  // namespace lf
