#include "vision/image_preprocess.h"

#include <algorithm>
#include <cmath>

namespace lf {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's fixed point: 8-bit pixels, 2 bits of headroom
constexpr int kMaxSide = 46000;             // llama.cpp's bound on an image side

double bicubic(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// One axis of in_size pixels resampled to out_size: for output pixel i, the first input pixel
// bounds[2i], their count bounds[2i+1], and their weights at weights[i·ksize ..] in fixed point.
int axis_weights(int in_size, int out_size, std::vector<int>* bounds, std::vector<int32_t>* weights) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);  // a downscale widens the filter
  const double support = 2.0 * filterscale;
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  std::vector<double> w(static_cast<size_t>(out_size) * ksize, 0.0);
  bounds->assign(static_cast<size_t>(out_size) * 2, 0);
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    const int xmin = std::max(static_cast<int>(center - support + 0.5), 0);
    const int xmax = std::min(static_cast<int>(center + support + 0.5), in_size) - xmin;
    double sum = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[i * ksize + x] = bicubic((x + xmin - center + 0.5) / filterscale);
      sum += w[i * ksize + x];
    }
    for (int x = 0; x < xmax && sum != 0.0; ++x) w[i * ksize + x] /= sum;
    (*bounds)[2 * i] = xmin;
    (*bounds)[2 * i + 1] = xmax;
  }
  weights->resize(w.size());
  const double unit = std::ldexp(1.0, kPrecisionBits);
  // Pillow adds ±0.5 and truncates: rounding half away from zero, once.
  for (size_t i = 0; i < w.size(); ++i) (*weights)[i] = static_cast<int32_t>(w[i] * unit + (w[i] < 0 ? -0.5 : 0.5));
  return ksize;
}

uint8_t clip8(int32_t v) { return static_cast<uint8_t>(std::clamp(v >> kPrecisionBits, 0, 255)); }

// Along x when `horizontal`, else along y: src (w × h) -> dst, the other axis kept.
void resample(const uint8_t* src, int w, int h, int out, bool horizontal, std::vector<uint8_t>* dst) {
  std::vector<int> bounds;
  std::vector<int32_t> weights;
  const int ksize = axis_weights(horizontal ? w : h, out, &bounds, &weights);
  const int dw = horizontal ? out : w, dh = horizontal ? h : out;
  dst->assign(static_cast<size_t>(dw) * dh * 3, 0);
  for (int y = 0; y < dh; ++y) {
    for (int x = 0; x < dw; ++x) {
      const int i = horizontal ? x : y;
      const int first = bounds[2 * i], count = bounds[2 * i + 1];
      const int32_t* k = &weights[static_cast<size_t>(i) * ksize];
      for (int c = 0; c < 3; ++c) {
        int32_t acc = 1 << (kPrecisionBits - 1);
        for (int j = 0; j < count; ++j) {
          const int sx = horizontal ? first + j : x, sy = horizontal ? y : first + j;
          acc += src[(static_cast<size_t>(sy) * w + sx) * 3 + c] * k[j];
        }
        (*dst)[(static_cast<size_t>(y) * dw + x) * 3 + c] = clip8(acc);
      }
    }
  }
}

}  // namespace

int VisionInput::n_patches_x() const { return width / patch_size; }
int VisionInput::n_patches_y() const { return height / patch_size; }

void vision_input_size(const VisionConfig& c, int width, int height, int* out_width, int* out_height) {
  const int align = c.patch_size * c.n_merge;
  const int min_pixels = c.min_tokens * align * align;
  const int max_pixels = c.max_tokens * align * align;
  const auto round_to = [align](float x) { return static_cast<int>(std::round(x / static_cast<float>(align))) * align; };
  const auto ceil_to = [align](float x) { return static_cast<int>(std::ceil(x / static_cast<float>(align))) * align; };
  const auto floor_to = [align](float x) { return static_cast<int>(std::floor(x / static_cast<float>(align))) * align; };
  int w = std::max(align, round_to(static_cast<float>(width)));
  int h = std::max(align, round_to(static_cast<float>(height)));
  if (h * w > max_pixels) {
    const float beta = std::sqrt(static_cast<float>(height) * width / max_pixels);
    h = std::max(align, floor_to(height / beta));
    w = std::max(align, floor_to(width / beta));
  } else if (h * w < min_pixels) {
    const float beta = std::sqrt(static_cast<float>(min_pixels) / (static_cast<float>(height) * width));
    h = ceil_to(height * beta);
    w = ceil_to(width * beta);
  }
  *out_width = w;
  *out_height = h;
}

void resize_bicubic(const uint8_t* src, int w, int h, int out_w, int out_h, std::vector<uint8_t>* dst) {
  if (out_w == w && out_h == h) {
    dst->assign(src, src + static_cast<size_t>(w) * h * 3);
    return;
  }
  if (out_w == w) return resample(src, w, h, out_h, false, dst);
  if (out_h == h) return resample(src, w, h, out_w, true, dst);
  std::vector<uint8_t> wide;
  resample(src, w, h, out_w, true, &wide);
  resample(wide.data(), out_w, h, out_h, false, dst);
}

Status checked_vision_input_size(const VisionConfig& c, int width, int height, int* out_width, int* out_height) {
  if (width <= 0 || height <= 0 || width > kMaxSide || height > kMaxSide) {
    return Status(Code::invalid_argument, "the image is " + std::to_string(width) + " x " + std::to_string(height) +
                                              "; each side must be 1 to " + std::to_string(kMaxSide) + " pixels");
  }
  int tw = 0, th = 0;
  vision_input_size(c, width, height, &tw, &th);
  if (tw / c.patch_size > c.pos_size || th / c.patch_size > c.pos_size) {
    return Status(Code::invalid_argument, "the image's patch grid " + std::to_string(tw / c.patch_size) + " x " +
                                              std::to_string(th / c.patch_size) + " is wider than the position tables (" +
                                              std::to_string(c.pos_size) + ")");
  }
  *out_width = tw;
  *out_height = th;
  return Status();
}

Status image_to_vision_input(const VisionConfig& c, const RgbImage& image, VisionInput* out) {
  if (!image.rgb) return Status(Code::invalid_argument, "the image has no pixels");
  int tw = 0, th = 0;
  LF_RETURN_IF_ERROR(checked_vision_input_size(c, image.width, image.height, &tw, &th));
  // Resized to fit inside the target with its aspect ratio, then centered on black (PAD_CEIL).
  std::vector<uint8_t> canvas(static_cast<size_t>(tw) * th * 3, 0);
  if (tw == image.width && th == image.height) {
    canvas.assign(image.rgb, image.rgb + canvas.size());
  } else {
    const float scale = std::min(static_cast<float>(tw) / image.width, static_cast<float>(th) / image.height);
    const int nw = std::min(static_cast<int>(std::ceil(image.width * scale)), tw);
    const int nh = std::min(static_cast<int>(std::ceil(image.height * scale)), th);
    std::vector<uint8_t> resized;
    resize_bicubic(image.rgb, image.width, image.height, nw, nh, &resized);
    const int ox = (tw - nw) / 2, oy = (th - nh) / 2;
    for (int y = 0; y < nh; ++y) {
      std::copy_n(&resized[static_cast<size_t>(y) * nw * 3], static_cast<size_t>(nw) * 3,
                  &canvas[(static_cast<size_t>(y + oy) * tw + ox) * 3]);
    }
  }
  VisionInput in;
  in.width = tw;
  in.height = th;
  in.patch_size = c.patch_size;
  in.pixels.resize(canvas.size());
  for (size_t i = 0; i < canvas.size(); ++i) {
    const int ch = static_cast<int>(i % 3);
    in.pixels[i] = (static_cast<float>(canvas[i]) / 255.0f - c.image_mean[ch]) / c.image_std[ch];
  }
  *out = std::move(in);
  return Status();
}

}  // namespace lf
