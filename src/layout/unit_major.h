// The unit-major layout (docs/threads.md): a weight's input columns cut into units, each unit's
// columns of every row stored contiguously, so a unit's partial product streams one region.
#pragma once

#include <cstdint>

#include "layout/weight_view.h"

namespace lf {

// Units of `width` consecutive input columns of a projection, the last one possibly narrower.
struct ColumnUnits {
  int n_units = 0;
  int width = 0;
  int n_in = 0;  // columns in all

  int64_t begin(int u) const { return static_cast<int64_t>(u) * width; }
  int64_t end(int u) const { return u + 1 == n_units ? n_in : static_cast<int64_t>(u + 1) * width; }
};

// A column-sliced weight (attn_output, ffn_down) between the file's layout and unit-major: unit
// by unit, that unit's columns of every row, [n_out, unit columns]. Both directions are byte
// permutations (lossless) between two buffers of W's n_out · row_bytes bytes that must not
// overlap. W is in the file's layout (WeightLayout::rows) and says the type and shape; its data
// is not read.
void to_unit_major(const WeightView& W, const ColumnUnits& units, const uint8_t* src, uint8_t* dst);
void from_unit_major(const WeightView& W, const ColumnUnits& units, const uint8_t* src, uint8_t* dst);

}  // namespace lf
