// A forward call between its validation and its end (forward.h): which entries run, where their
// rows go, and what puts a refused session back as it was.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "base/elapsed.h"
#include "base/status.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/scratch.h"

namespace lf {

struct ForwardCall {
  ForwardCall(const Model& model, std::span<float> out_rows) : m(model), out(out_rows), spare(model.spare_scratch) {}
  // The scratch goes back to the model's spare, which the call holds: the last worker may drop
  // the call after the model itself is gone.
  ~ForwardCall() {
    if (scratch && spare) spare->give_back(std::move(scratch));
  }
  ForwardCall(const ForwardCall&) = delete;
  ForwardCall& operator=(const ForwardCall&) = delete;

  const Model& m;
  std::span<float> out;             // every entry's out rows, in entry order
  Clock::time_point t_call = Clock::now();
  std::vector<Status> statuses;     // [entries] each entry's outcome so far
  std::vector<BatchEntry> runs;     // the entries that passed validation, in entry order
  std::vector<size_t> entry_of;     // [runs] the run's index among the entries
  std::vector<size_t> out_at;       // [runs] the first of its rows in out
  std::vector<KvUndo> undo;         // [runs] the sliding-ring slots its rows overwrite
  bool top_k = false;               // some run asks for the top-K gate FFN
  std::unique_ptr<Scratch> scratch; // the runs' rows and buffers; none when nothing runs
  std::shared_ptr<ScratchSpare> spare;
};

// Validates the call as a whole (an error here refuses it) and each entry on its own (into
// call->statuses), then readies the entries that passed: their rows of `in` copied into the
// scratch, their mirrored caches given the shipped K/V rows, the ring slots they overwrite saved.
Status prepare_forward(std::span<const BatchEntry> entries, std::span<const float> in, ForwardCall* call);

// Once run_layers has run the call's rows on every worker (or at once when nothing runs):
// commits each run whose output is finite and refuses the others, returning every entry's status.
std::vector<Status> finish_forward(ForwardCall& call);

}  // namespace lf
