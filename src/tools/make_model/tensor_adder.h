// The deterministic tensor contents of a synthetic model and the helper that adds tensors of
// them to a GgufWriter (weights.cpp and moe_weights.cpp use it).
//
// Every element is a pure function of (seed, tensor name, element index), so tensors can be
// produced in any order, by any number of threads, and the same arguments give the same bytes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gguf/gguf_writer.h"
#include "quant/quant.h"
#include "settings.h"
#include "tensor_types.h"

namespace lf::make_model {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t mix64(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

// Counter-based generator: element i of a tensor is mix64(key + (i+1)·golden), as splitmix64
// would produce at step i, so no state is carried between elements, rows or threads.
class Stream {
 public:
  Stream(uint64_t seed, const std::string& tensor_name) : key_(mix64(seed ^ mix64(fnv1a(tensor_name)))) {}

  uint64_t bits(uint64_t i) const { return mix64(key_ + (i + 1) * kGolden); }

  // Sum of four 16-bit uniforms (Irwin-Hall, variance 4/12) rescaled to unit variance: no libm
  // call, so a 600 MB model is generated in seconds and the bytes do not depend on the libm.
  float normal(uint64_t i) const {
    const uint64_t b = bits(i);
    const uint32_t sum = (b & 0xFFFF) + ((b >> 16) & 0xFFFF) + ((b >> 32) & 0xFFFF) + (b >> 48);
    constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3) / 2^16
    return (static_cast<float>(sum) + 2.0f - 2.0f * 65536.0f) * kScale;
  }

  float uniform(uint64_t i) const { return static_cast<float>(bits(i) >> 40) * (1.0f / 16777216.0f); }

 private:
  uint64_t key_;
};

// Rows [0, n_rows) split over the machine's two cores when the tensor is large enough to pay
// for a thread.
inline void for_rows(int64_t n_rows, int64_t row_elems, void (*body)(const void*, int64_t, int64_t), const void* ctx) {
  if (n_rows < 2 || n_rows * row_elems < (int64_t{1} << 20)) {
    body(ctx, 0, n_rows);
    return;
  }
  const int64_t mid = n_rows / 2;
  std::thread first(body, ctx, int64_t{0}, mid);
  body(ctx, mid, n_rows);
  first.join();
}

// x [n] f32 -> dst, one row in `type` (n a multiple of the block size).
inline void convert_row(GgmlType type, const float* x, uint8_t* dst, int64_t n) {
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = type == GgmlType::F16 ? fp32_to_fp16(x[i]) : fp32_to_bf16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::Q4_0:
      quantize_row_q4_0_ref(x, reinterpret_cast<block_q4_0*>(dst), n);
      return;
    case GgmlType::Q8_0:
      quantize_row_q8_0_ref(x, reinterpret_cast<block_q8_0*>(dst), n);
      return;
    case GgmlType::Q4_K:
      quantize_row_q4_K(x, reinterpret_cast<block_q4_K*>(dst), n);
      return;
    case GgmlType::Q5_K:
      quantize_row_q5_K(x, reinterpret_cast<block_q5_K*>(dst), n);
      return;
    case GgmlType::Q6_K:
      quantize_row_q6_K(x, reinterpret_cast<block_q6_K*>(dst), n);
      return;
    default:
      return;  // the CLI admits only the types above
  }
}

struct MatrixJob {
  Stream stream;
  GgmlType type;
  int64_t n_in;
  float stddev;
  uint64_t row_bytes;
  uint8_t* dst;
};

inline void fill_matrix_rows(const void* ctx, int64_t begin, int64_t end) {
  const auto& job = *static_cast<const MatrixJob*>(ctx);
  std::vector<float> row(static_cast<size_t>(job.n_in));
  for (int64_t r = begin; r < end; ++r) {
    const uint64_t base = static_cast<uint64_t>(r) * static_cast<uint64_t>(job.n_in);
    for (int64_t c = 0; c < job.n_in; ++c) row[c] = job.stddev * job.stream.normal(base + c);
    convert_row(job.type, row.data(), job.dst + static_cast<uint64_t>(r) * job.row_bytes, job.n_in);
  }
}

class TensorAdder {
 public:
  TensorAdder(const MakeSettings& settings, GgufWriter& w)
      : settings_(settings), w_(w), rule_uses_(settings.tensor_types.size(), 0) {}

  // W [n_in, n_out] (ne order), elements N(0, stddev²), generated and quantized row by row.
  Status matrix(const std::string& name, int64_t n_in, int64_t n_out, float stddev) {
    return matrices(name, n_in, n_out, 1, stddev);
  }

  // n_mat matrices [n_in, n_out] stacked as one [n_in, n_out, n_mat] tensor (n_mat 1: 2-D), in
  // the type --type and --tensor-type give it.
  Status matrices(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_mat, float stddev) {
    return matrices_of_type(name, n_in, n_out, n_mat, stddev, matrix_type(settings_, name, &rule_uses_));
  }

  // As matrices(), in a fixed type no rule changes.
  Status matrices_of_type(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_mat, float stddev,
                          GgmlType type) {
    TypeTraits traits;
    type_traits(static_cast<uint32_t>(type), &traits);
    if (n_in % traits.block_elems != 0) {
      return Status(Code::invalid_argument, name + ": " + traits.name + " needs rows of a multiple of " +
                                                std::to_string(traits.block_elems) + " elements, its rows have " +
                                                std::to_string(n_in) + " (choose another with --type or --tensor-type)");
    }
    const Stream stream(settings_.seed, name);
    std::vector<int64_t> ne = {n_in, n_out};
    if (n_mat != 1) ne.push_back(n_mat);
    const uint64_t bytes_per_row = row_bytes(traits, static_cast<uint64_t>(n_in));
    return w_.add_tensor(name, type, ne, [=](uint8_t* dst, uint64_t) {
      const MatrixJob job{stream, type, n_in, stddev, bytes_per_row, dst};
      for_rows(n_out * n_mat, n_in, fill_matrix_rows, &job);
    });
  }

  // A --tensor-type rule that decided no tensor is a typo or a wrong layer number.
  Status check_rules_used() const {
    for (size_t i = 0; i < rule_uses_.size(); ++i) {
      const TensorTypeRule& rule = settings_.tensor_types[i];
      if (rule_uses_[i] == 0 && rule.must_match) {
        TypeTraits traits;
        type_traits(static_cast<uint32_t>(rule.type), &traits);
        return Status(Code::invalid_argument,
                      "--tensor-type " + rule.pattern + "=" + traits.name + " matches no matrix of this model");
      }
    }
    return Status();
  }

  // Linear layer y = W x with x [n_in]: std 1/sqrt(n_in) keeps |y| close to |x|.
  Status linear(const std::string& name, int64_t n_in, int64_t n_out) {
    return matrix(name, n_in, n_out, 1.0f / std::sqrt(static_cast<float>(n_in)));
  }

  // v [n] F32, element i = value(stream, i).
  template <typename ValueFn>
  Status vector_f32(const std::string& name, int64_t n, ValueFn value) {
    const Stream stream(settings_.seed, name);
    return w_.add_tensor(name, GgmlType::F32, {n}, [=](uint8_t* dst, uint64_t) {
      for (int64_t i = 0; i < n; ++i) {
        const float v = value(stream, static_cast<uint64_t>(i));
        std::memcpy(dst + 4 * i, &v, 4);
      }
    });
  }

  // A clipped linear's four bounds (`stem`.input_min, .input_max, .output_min, .output_max), as
  // Gemma 4's projectors carry them: ±2.5 and ±2 give or take a fifth, cutting the tails of what
  // the linear sees and gives (about 1 value in 100).
  Status clip_bounds(const std::string& stem) {
    const char* const names[] = {"input_min", "input_max", "output_min", "output_max"};
    for (int b = 0; b < 4; ++b) {
      const float sign = b % 2 == 0 ? -1.0f : 1.0f;
      const float base = b < 2 ? 2.5f : 2.0f;
      LF_RETURN_IF_ERROR(vector_f32(stem + "." + names[b], 1,
                                    [=](const Stream& st, uint64_t) { return sign * base * (1.0f + 0.2f * st.uniform(0)); }));
    }
    return Status();
  }

  // Norm weights near `center`; stored as-is (Gemma 3's "+1" is already in a stored value).
  Status norm(const std::string& name, int64_t n, float center = 1.0f) {
    return vector_f32(name, n, [center](const Stream& s, uint64_t i) { return center * (1.0f + 0.1f * s.normal(i)); });
  }

 private:
  const MakeSettings& settings_;
  GgufWriter& w_;
  std::vector<int> rule_uses_;  // [settings_.tensor_types.size()]
};

}  // namespace lf::make_model
