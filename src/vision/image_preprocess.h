// An RGB image made into what the vision tower reads, as llama.cpp's mtmd does for Gemma 4
// (docs/vision.md, "Preprocessing"): a size that keeps the aspect ratio within the soft-token
// budget, a Pillow-exact bicubic resize with black padding, and each value (x/255 - mean) / std.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "vision/vision_config.h"

namespace lf {

// Interleaved RGB, 8 bits a channel: pixel (x, y) at rgb[3·(y·width + x)].
struct RgbImage {
  int width = 0, height = 0;
  const uint8_t* rgb = nullptr;
};

// The tower's input: width and height multiples of patch_size · n_merge.
struct VisionInput {
  int width = 0, height = 0;
  std::vector<float> pixels;  // [height, width, 3] normalized values
  int n_patches_x() const;    // of patch_size, set by image_to_vision_input
  int n_patches_y() const;
  int patch_size = 0;
};

// The size llama.cpp resizes a width × height image to (calc_size_preserved_ratio): each side a
// multiple of patch_size · n_merge, the area within the budget's pixels.
void vision_input_size(const VisionConfig& c, int width, int height, int* out_width, int* out_height);
// vision_input_size, refusing by what is wrong a side of 0 or over 46000 pixels and a patch grid the
// position tables cannot index.
Status checked_vision_input_size(const VisionConfig& c, int width, int height, int* out_width, int* out_height);

// image -> *out, refused as checked_vision_input_size refuses its size.
Status image_to_vision_input(const VisionConfig& c, const RgbImage& image, VisionInput* out);

// src (w × h RGB) -> dst (out_w × out_h RGB): Pillow's bicubic resampling (a = -0.5) in its
// fixed-point arithmetic, which llama.cpp's resize_pillow reproduces.
void resize_bicubic(const uint8_t* src, int w, int h, int out_w, int out_h, std::vector<uint8_t>* dst);

}  // namespace lf
