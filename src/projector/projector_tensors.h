// What the towers of one projector file ("mmproj": Gemma 4's vision tower, and on E2B/E4B its
// audio encoder beside it) share: tensor specs with clamp bounds, typed views onto the file's
// bytes (never copied), and the clipped linear layer both towers are made of.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_reader.h"
#include "layout/weight_view.h"
#include "model/tensor_table.h"

namespace lf {

// Gemma4ClippableLinear: x clamped to [in_min, in_max] before W·x, the product to
// [out_min, out_max] after; a bound absent from the file is ±FLT_MAX (llama.cpp's default).
struct ClampedLinear {
  WeightView w;  // [n_out, n_in]
  float in_min, in_max, out_min, out_max;
};

// The specs of a tower, built up tensor by tensor.
struct ProjectorSpecs {
  std::vector<TensorSpec> list;
  void add(std::string name, int64_t ne0, int64_t ne1, TensorRole role, bool required = true);
  // W [n_out, n_in] (`stem`.weight) and its four optional clamp bounds ([1] each).
  void linear(const std::string& stem, int64_t n_in, int64_t n_out, bool required = true);
};

// Views onto the tensors of a parsed projector whose data blob is `size` bytes at `data`. An
// absent tensor gives a null view; one outside the blob or misaligned is refused by name.
class ProjectorViews {
 public:
  ProjectorViews(const GgufFile& file, const uint8_t* data, uint64_t size) : file_(file), data_(data), size_(size) {}

  Status floats(const std::string& name, const float** out) const;
  // A matrix of n_out rows of n_in values (a 3-D or 4-D kernel seen as its flattened rows).
  Status matrix(const std::string& name, int64_t n_in, int64_t n_out, WeightView* out) const;
  // `stem`.weight and its clamp bounds.
  Status clamped(const std::string& stem, int64_t n_in, int64_t n_out, ClampedLinear* out) const;

 private:
  Status bytes(const std::string& name, const GgufTensorInfo** info, const uint8_t** p) const;

  const GgufFile& file_;
  const uint8_t* data_;
  uint64_t size_;
};

}  // namespace lf
