#include "weights.h"

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "quant/quant.h"

namespace lf::make_model {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

uint64_t mix64(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
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
void for_rows(int64_t n_rows, int64_t row_elems, void (*body)(const void*, int64_t, int64_t), const void* ctx) {
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
void convert_row(GgmlType type, const float* x, uint8_t* dst, int64_t n) {
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

void fill_matrix_rows(const void* ctx, int64_t begin, int64_t end) {
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
  TensorAdder(const ModelConfig& cfg, GgufWriter& w) : cfg_(cfg), w_(w) {}

  // W [n_in, n_out] (ne order), elements N(0, stddev²), generated and quantized row by row.
  Status matrix(const std::string& name, int64_t n_in, int64_t n_out, float stddev) {
    const Stream stream(cfg_.seed, name);
    const GgmlType type = cfg_.type;
    return w_.add_tensor(name, type, {n_in, n_out}, [=](uint8_t* dst, uint64_t) {
      TypeTraits traits;
      type_traits(static_cast<uint32_t>(type), &traits);
      const MatrixJob job{stream, type, n_in, stddev, row_bytes(traits, static_cast<uint64_t>(n_in)), dst};
      for_rows(n_out, n_in, fill_matrix_rows, &job);
    });
  }

  // Linear layer y = W x with x [n_in]: std 1/sqrt(n_in) keeps |y| close to |x|.
  Status linear(const std::string& name, int64_t n_in, int64_t n_out) {
    return matrix(name, n_in, n_out, 1.0f / std::sqrt(static_cast<float>(n_in)));
  }

  // v [n] F32, element i = value(stream, i).
  template <typename ValueFn>
  Status vector_f32(const std::string& name, int64_t n, ValueFn value) {
    const Stream stream(cfg_.seed, name);
    return w_.add_tensor(name, GgmlType::F32, {n}, [=](uint8_t* dst, uint64_t) {
      for (int64_t i = 0; i < n; ++i) {
        const float v = value(stream, static_cast<uint64_t>(i));
        std::memcpy(dst + 4 * i, &v, 4);
      }
    });
  }

  // Norm weights near `center`; stored as-is (Gemma 3's "+1" is already in a stored value).
  Status norm(const std::string& name, int64_t n, float center = 1.0f) {
    return vector_f32(name, n, [center](const Stream& s, uint64_t i) { return center * (1.0f + 0.1f * s.normal(i)); });
  }

 private:
  const ModelConfig& cfg_;
  GgufWriter& w_;
};

// The model-level tensors of per-layer embeddings (docs/gemma-architecture.md, "E2B and E4B"):
// per_layer_token_embd [n_pl·n_layer, n_vocab] is scaled by sqrt(n_pl) when read, so rows of std
// 1/sqrt(n_pl) give unit-RMS inputs like token_embd's; per_layer_model_proj [n_embd, n_pl·n_layer]
// is a linear map of the scaled token embedding; per_layer_proj_norm [n_pl] its RMSNorm weight.
Status add_per_layer_input_tensors(const ModelConfig& c, uint32_t n_vocab, TensorAdder& t) {
  const int64_t n_pl = c.n_embd_per_layer;
  const int64_t width = n_pl * c.n_layer;
  LF_RETURN_IF_ERROR(t.matrix("per_layer_token_embd.weight", width, n_vocab, 1.0f / std::sqrt(static_cast<float>(n_pl))));
  LF_RETURN_IF_ERROR(t.linear("per_layer_model_proj.weight", c.n_embd, width));
  return t.norm("per_layer_proj_norm.weight", n_pl);
}

}  // namespace

// With a tied embedding E (rows of norm ~1) the logit of token t is E_t · (x̂ ⊙ g), where x̂ has
// norm sqrt(n_embd). An unrelated token then scores ~N(0, g²), while the last prompt token, whose
// embedding still dominates the residual stream, scores ~g·sqrt(n_embd)·cos. With g near 1 that is
// ~sqrt(n_embd) standard deviations and the distribution collapses onto the last token
// (docs/gguf.md, "Synthetic files in llama.cpp"). g = 4/sqrt(n_embd) caps that advantage at a few
// nats for every n_embd, leaving a flat but informative distribution whose ranking still depends on
// every layer.
float default_output_norm_gain(const ModelConfig& cfg) { return 4.0f / std::sqrt(static_cast<float>(cfg.n_embd)); }

Status add_weight_tensors(const ModelConfig& c, uint32_t n_vocab, GgufWriter& w) {
  TensorAdder t(c, w);
  const int64_t n_embd = c.n_embd;
  const float gain = c.output_norm_gain > 0 ? c.output_norm_gain : default_output_norm_gain(c);

  // token_embd [n_embd, n_vocab]: Gemma multiplies the row by sqrt(n_embd), giving unit-RMS input.
  LF_RETURN_IF_ERROR(t.matrix("token_embd.weight", n_embd, n_vocab, 1.0f / std::sqrt(static_cast<float>(n_embd))));
  if (c.arch == Arch::gemma4 && c.has_global_layer()) {
    // rope_freqs [head_dim_global/2]: pairs past the rotated fraction get an angle divisor of
    // 1e30, i.e. no rotation (docs/gemma-architecture.md, "Proportional RoPE").
    const int64_t n_pairs = c.head_dim_global / 2;
    const int64_t rotated = static_cast<int64_t>(static_cast<float>(c.head_dim_global) * c.partial_rotary / 2);
    LF_RETURN_IF_ERROR(t.vector_f32("rope_freqs.weight", n_pairs,
                                    [rotated](const Stream&, uint64_t i) {
                                      return static_cast<int64_t>(i) < rotated ? 1.0f : 1e30f;
                                    }));
  }
  LF_RETURN_IF_ERROR(t.norm("output_norm.weight", n_embd, gain));
  if (c.untied_output) LF_RETURN_IF_ERROR(t.linear("output.weight", n_embd, n_vocab));

  if (c.n_embd_per_layer > 0) LF_RETURN_IF_ERROR(add_per_layer_input_tensors(c, n_vocab, t));

  for (uint32_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t d = c.head_dim(il);
    const int64_t q_width = d * c.n_head;
    const int64_t kv_width = d * c.n_head_kv(il);
    const bool has_v = c.arch == Arch::gemma3 || c.is_swa(il) || c.global_v;
    LF_RETURN_IF_ERROR(t.norm(p + "attn_norm.weight", n_embd));
    LF_RETURN_IF_ERROR(t.linear(p + "attn_q.weight", n_embd, q_width));
    // Shared-KV layers read an earlier layer's cache: no K, V or K norm of their own.
    if (c.has_kv(il)) LF_RETURN_IF_ERROR(t.linear(p + "attn_k.weight", n_embd, kv_width));
    if (c.has_kv(il) && has_v) LF_RETURN_IF_ERROR(t.linear(p + "attn_v.weight", n_embd, kv_width));
    LF_RETURN_IF_ERROR(t.linear(p + "attn_output.weight", q_width, n_embd));
    // Gemma 4 has no 1/sqrt(D) attention scale: with q and k norm gains near 1 the scores of
    // random weights would be ~N(0, D), a softmax so sharp that rounding noise flips which key
    // wins. Gains of D^-1/4 on each side give scores of order 1, as in a trained model.
    const float qk_gain = c.arch == Arch::gemma4 ? 1.0f / std::pow(static_cast<float>(d), 0.25f) : 1.0f;
    LF_RETURN_IF_ERROR(t.norm(p + "attn_q_norm.weight", d, qk_gain));
    if (c.has_kv(il)) LF_RETURN_IF_ERROR(t.norm(p + "attn_k_norm.weight", d, qk_gain));
    LF_RETURN_IF_ERROR(t.norm(p + "post_attention_norm.weight", n_embd));
    LF_RETURN_IF_ERROR(t.norm(p + "ffn_norm.weight", n_embd));
    const int64_t n_ff = c.ffn_length(il);
    LF_RETURN_IF_ERROR(t.linear(p + "ffn_gate.weight", n_embd, n_ff));
    LF_RETURN_IF_ERROR(t.linear(p + "ffn_up.weight", n_embd, n_ff));
    LF_RETURN_IF_ERROR(t.linear(p + "ffn_down.weight", n_ff, n_embd));
    LF_RETURN_IF_ERROR(t.norm(p + "post_ffw_norm.weight", n_embd));
    if (c.n_embd_per_layer > 0) {
      // The gated per-layer branch: inp_gate [n_embd, n_pl], proj [n_pl, n_embd], post_norm.
      LF_RETURN_IF_ERROR(t.linear(p + "inp_gate.weight", n_embd, c.n_embd_per_layer));
      LF_RETURN_IF_ERROR(t.linear(p + "proj.weight", c.n_embd_per_layer, n_embd));
      LF_RETURN_IF_ERROR(t.norm(p + "post_norm.weight", n_embd));
    }
    if (c.arch == Arch::gemma4 && c.layer_output_scale) {
      // Values away from 1.0 so an engine that ignores the scale is caught (docs/gguf.md,
      // "Synthetic files in llama.cpp").
      LF_RETURN_IF_ERROR(t.vector_f32(p + "layer_output_scale.weight", 1,
                                      [](const Stream& s, uint64_t i) { return 0.5f + s.uniform(i); }));
    }
  }
  return Status();
}

}  // namespace lf::make_model
