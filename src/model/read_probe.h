// The memory-read ceiling that decode is measured against (scripts/bench, docs/benchmarks.md):
// every byte of a node's layer weights read once on the model's own pool, as decode streams them.
#pragma once

#include <cstdint>
#include <functional>

#include "model/model.h"
#include "base/status.h"

namespace lf {

struct ReadProbe {
  uint64_t bytes = 0;     // every layer tensor of the model's range, whole
  uint32_t checksum = 0;  // the tensors' weight_checksum values (kernels/weight_checksum.h) added, modulo 2^16
  double ms = 0;          // from the job's start to its last worker's end
};

// Each worker reads a contiguous share of every tensor with 128-bit loads. done gets the result
// on the last worker's thread (before this returns in the wasm32-wasi build). Fails with
// failed_precondition, calling nothing, while a forward runs on the model.
Status read_probe_async(const Model& model, std::function<void(const ReadProbe&)> done);

// The same, waiting for the result.
Status read_probe(const Model& model, ReadProbe* result);

}  // namespace lf
