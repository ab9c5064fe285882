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
  uint32_t checksum = 0;  // the tensors' weight_checksum values added, modulo 2^16
  double ms = 0;          // from the job's start to its last worker's end
};

// Sum of the little-endian 16-bit halfwords of p [n] modulo 2^16 (an odd last byte is one
// halfword, zero-padded). The probe sums what it reads so that the reads cannot be optimised
// away, and so that a test can tell that every byte was read. Addition is exact in any order:
// any split of the bytes between workers gives the same sum, and so does any layout that moves
// whole halfwords (unit-major, row strips), so the sum is the file's whatever the layout. 16-bit
// lanes make it one add per vector with no constant: the probe stays bound by memory, not by
// the adds.
uint32_t weight_checksum(const uint8_t* p, uint64_t n);

// Each worker reads a contiguous share of every tensor with 128-bit loads. done gets the result
// on the last worker's thread (before this returns in the wasm32-wasi build). Fails with
// failed_precondition, calling nothing, while a forward runs on the model.
Status read_probe_async(const Model& model, std::function<void(const ReadProbe&)> done);

// The same, waiting for the result.
Status read_probe(const Model& model, ReadProbe* result);

}  // namespace lf
