// Tiny gemma4 / gemma3 models built in memory with GgufWriter and seeded random weights, for
// the engine tests. Header-only because tests/tests.cmake compiles only tests/cpp/test_*.cpp.
//
// gemma4: n_embd 64, 3 layers [sliding, global, sliding], 3 query heads, head_count_kv
// {1, 1, 3}, head dim 32 (sliding) / 64 (global), window 4, the global layer without attn_v and
// with rope_freqs {1 x8, 1e30 x24} (proportional RoPE), layer_output_scale {0.7, 1.3, 0.9},
// tied LM head, soft-cap 30.
// gemma3: n_embd 64, 3 layers (pattern 2: [sliding, global, sliding]), 3 query heads, 1 KV
// head, head dim 32, window 4, linear rope scaling 8 on the global layer, separate output.weight.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "quant/quant.h"

namespace lf::test {

enum class WeightFormat {
  f32,    // every tensor F32
  mixed,  // Q8_0 attention/embedding/output, F16 attn_output, Q4_0 ffn_gate/up, Q8_0 ffn_down
};

struct FixtureOptions {
  Arch arch = Arch::gemma4;
  WeightFormat format = WeightFormat::f32;
  uint32_t seed = 1;
  std::vector<std::string> omit_keys;           // metadata keys left out (refusal tests)
  std::function<void(GgufWriter&)> edit;        // last changes before writing (refusal tests)
  std::vector<int> silent_layers;               // layers whose attn_output and ffn_down are all zero
};

constexpr int kFixtureEmbd = 64;
constexpr int kFixtureLayers = 3;
constexpr int kFixtureVocab = 48;
constexpr int kFixtureWindow = 4;

// Uniform values in [-1, 1), reproducible from the seed on every platform.
class FixtureRng {
 public:
  explicit FixtureRng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float uniform() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return static_cast<float>(static_cast<double>(state_ >> 11) / 4503599627370496.0 - 1.0);
  }

 private:
  uint64_t state_;
};

struct FixtureModel {
  std::vector<uint8_t> bytes;  // the whole GGUF file
  GgufFile file;

  TensorLocator locator() const {
    const uint8_t* base = bytes.data() + file.data_offset;
    return [base](const GgufTensorInfo& t) { return base + t.offset; };
  }
  Status load(LayerRange range, bool with_embedding, bool with_head, Model* out) const {
    return load_model(file, locator(), ModelLoadOptions{range, with_embedding, with_head}, out);
  }
  Status load_all(Model* out) const { return load({0, kFixtureLayers}, true, true, out); }
  // Every layer, with the tensors rewritten in place (ModelLoadOptions::relayout_in_place)
  Status load_all_relaid(Model* out) const {
    ModelLoadOptions options{{0, kFixtureLayers}, true, true};
    options.relayout_in_place = true;
    return load_model(file, locator(), options, out);
  }
};

namespace detail {

// values [rows · cols] -> tensor bytes of `type` (row-wise quantization as llama.cpp's quantizer).
inline GgufWriter::FillFn fill_with(GgmlType type, std::vector<float> values, int64_t cols) {
  auto shared = std::make_shared<std::vector<float>>(std::move(values));
  return [type, shared, cols](uint8_t* dst, uint64_t n_bytes) {
    const std::vector<float>& v = *shared;
    const int64_t rows = static_cast<int64_t>(v.size()) / cols;
    switch (type) {
      case GgmlType::F32: std::memcpy(dst, v.data(), v.size() * sizeof(float)); break;
      case GgmlType::F16:
        for (size_t i = 0; i < v.size(); ++i) {
          const uint16_t h = fp32_to_fp16(v[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
        break;
      case GgmlType::Q8_0:
        for (int64_t r = 0; r < rows; ++r) {
          quantize_row_q8_0_ref(v.data() + r * cols, reinterpret_cast<block_q8_0*>(dst) + r * (cols / QK8_0), cols);
        }
        break;
      case GgmlType::Q4_0:
        for (int64_t r = 0; r < rows; ++r) {
          quantize_row_q4_0_ref(v.data() + r * cols, reinterpret_cast<block_q4_0*>(dst) + r * (cols / QK4_0), cols);
        }
        break;
      case GgmlType::Q4_K:
        for (int64_t r = 0; r < rows; ++r) {
          quantize_row_q4_K(v.data() + r * cols, reinterpret_cast<block_q4_K*>(dst) + r * (cols / QK_K), cols);
        }
        break;
      case GgmlType::Q5_K:
        for (int64_t r = 0; r < rows; ++r) {
          quantize_row_q5_K(v.data() + r * cols, reinterpret_cast<block_q5_K*>(dst) + r * (cols / QK_K), cols);
        }
        break;
      case GgmlType::Q6_K:
        for (int64_t r = 0; r < rows; ++r) {
          quantize_row_q6_K(v.data() + r * cols, reinterpret_cast<block_q6_K*>(dst) + r * (cols / QK_K), cols);
        }
        break;
      default: std::memset(dst, 0, n_bytes); break;
    }
  };
}

class Builder {
 public:
  Builder(const FixtureOptions& o) : o_(o), rng_(o.seed), prefix_(o.arch == Arch::gemma4 ? "gemma4." : "gemma3.") {}

  bool keep(const std::string& key) const {
    for (const std::string& k : o_.omit_keys) {
      if (k == key) return false;
    }
    return true;
  }
  void u32(const std::string& key, uint32_t v) { if (keep(prefix_ + key)) w.set_u32(prefix_ + key, v); }
  void f32(const std::string& key, float v) { if (keep(prefix_ + key)) w.set_f32(prefix_ + key, v); }

  // W [n_out, n_in] with entries of variance ~ 1/n_in, or all zero.
  void matrix(const std::string& name, int64_t n_in, int64_t n_out, GgmlType type, bool zero = false) {
    const float a = zero ? 0.0f : std::sqrt(3.0f / static_cast<float>(n_in));
    std::vector<float> v(static_cast<size_t>(n_in * n_out));
    for (float& x : v) x = a * rng_.uniform();
    add(name, type, {n_in, n_out}, std::move(v));
  }
  // Norm weights near 1, like trained (gemma3: with the converter's +1 already in).
  void norm(const std::string& name, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = 1.0f + 0.2f * rng_.uniform();
    add(name, GgmlType::F32, {n}, std::move(v));
  }
  void add(const std::string& name, GgmlType type, std::vector<int64_t> ne, std::vector<float> v) {
    const Status s = w.add_tensor(name, type, ne, fill_with(type, std::move(v), ne[0]));
    if (!s.ok()) error = s;
  }

  // The file written out and parsed back: the fixture.
  Status finish(FixtureModel* out) {
    LF_RETURN_IF_ERROR(error);
    FixtureModel m;
    m.bytes = w.write_buffer();
    LF_RETURN_IF_ERROR(gguf_parse(m.bytes.data(), m.bytes.size(), m.bytes.size(), &m.file));
    *out = std::move(m);
    return Status();
  }

  GgufWriter w;
  Status error;

 private:
  const FixtureOptions& o_;
  FixtureRng rng_;
  std::string prefix_;
};

}  // namespace detail

inline Status build_fixture(const FixtureOptions& o, FixtureModel* out) {
  detail::Builder b(o);
  const bool g4 = o.arch == Arch::gemma4;
  const bool mixed = o.format == WeightFormat::mixed;
  const GgmlType t_attn = mixed ? GgmlType::Q8_0 : GgmlType::F32;
  const GgmlType t_attn_out = mixed ? GgmlType::F16 : GgmlType::F32;
  const GgmlType t_gate_up = mixed ? GgmlType::Q4_0 : GgmlType::F32;
  const GgmlType t_down = mixed ? GgmlType::Q8_0 : GgmlType::F32;
  const int n_embd = kFixtureEmbd, n_head = 3, n_ff = 128;
  const bool sliding[kFixtureLayers] = {true, false, true};
  const int n_kv_g4[kFixtureLayers] = {1, 1, 3};
  auto head_dim = [&](int il) { return g4 ? (sliding[il] ? 32 : 64) : 32; };
  auto n_kv = [&](int il) { return g4 ? n_kv_g4[il] : 1; };

  if (b.keep("general.architecture")) b.w.set_string("general.architecture", g4 ? "gemma4" : "gemma3");
  b.u32("context_length", 128);
  b.u32("embedding_length", n_embd);
  b.u32("block_count", kFixtureLayers);
  b.u32("feed_forward_length", n_ff);
  b.u32("attention.head_count", n_head);
  b.f32("attention.layer_norm_rms_epsilon", 1e-6f);
  b.u32("attention.sliding_window", kFixtureWindow);
  b.f32("rope.freq_base", 1e6f);
  if (g4) {
    if (b.keep("gemma4.attention.head_count_kv")) {
      b.w.set_array_i32("gemma4.attention.head_count_kv", {n_kv_g4[0], n_kv_g4[1], n_kv_g4[2]});
    }
    b.u32("attention.key_length", 64);
    b.u32("attention.value_length", 64);
    b.u32("attention.key_length_swa", 32);
    b.u32("attention.value_length_swa", 32);
    b.u32("rope.dimension_count", 64);
    b.u32("rope.dimension_count_swa", 32);
    b.f32("rope.freq_base_swa", 1e4f);
    if (b.keep("gemma4.attention.sliding_window_pattern")) {
      b.w.set_array_bool("gemma4.attention.sliding_window_pattern", {sliding[0], sliding[1], sliding[2]});
    }
    b.u32("embedding_length_per_layer_input", 0);
    b.f32("final_logit_softcapping", 30.0f);
  } else {
    b.u32("attention.head_count_kv", 1);
    b.u32("attention.key_length", 32);
    b.u32("attention.value_length", 32);
    b.u32("attention.sliding_window_pattern", 2);
    if (b.keep("gemma3.rope.scaling.type")) b.w.set_string("gemma3.rope.scaling.type", "linear");
    b.f32("rope.scaling.factor", 8.0f);
  }
  std::vector<std::string> tokens;
  for (int i = 0; i < kFixtureVocab; ++i) tokens.push_back("tok" + std::to_string(i));
  if (b.keep("tokenizer.ggml.tokens")) b.w.set_array_string("tokenizer.ggml.tokens", tokens);

  b.matrix("token_embd.weight", n_embd, kFixtureVocab, t_attn);
  b.norm("output_norm.weight", n_embd);
  if (!g4) b.matrix("output.weight", n_embd, kFixtureVocab, t_attn);
  if (g4) {
    std::vector<float> factors(32, 1e30f);
    for (int j = 0; j < 8; ++j) factors[j] = 1.0f;
    b.add("rope_freqs.weight", GgmlType::F32, {32}, factors);
  }
  const float output_scale[kFixtureLayers] = {0.7f, 1.3f, 0.9f};
  for (int il = 0; il < kFixtureLayers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const int D = head_dim(il), q_dim = D * n_head, kv_dim = D * n_kv(il);
    const bool silent = std::find(o.silent_layers.begin(), o.silent_layers.end(), il) != o.silent_layers.end();
    b.norm(p + "attn_norm.weight", n_embd);
    b.matrix(p + "attn_q.weight", n_embd, q_dim, t_attn);
    b.matrix(p + "attn_k.weight", n_embd, kv_dim, t_attn);
    if (!g4 || sliding[il]) b.matrix(p + "attn_v.weight", n_embd, kv_dim, t_attn);
    b.matrix(p + "attn_output.weight", q_dim, n_embd, t_attn_out, silent);
    b.norm(p + "attn_q_norm.weight", D);
    b.norm(p + "attn_k_norm.weight", D);
    b.norm(p + "post_attention_norm.weight", n_embd);
    b.norm(p + "ffn_norm.weight", n_embd);
    b.matrix(p + "ffn_gate.weight", n_embd, n_ff, t_gate_up);
    b.matrix(p + "ffn_up.weight", n_embd, n_ff, t_gate_up);
    b.matrix(p + "ffn_down.weight", n_ff, n_embd, t_down, silent);
    b.norm(p + "post_ffw_norm.weight", n_embd);
    if (g4) b.add(p + "layer_output_scale.weight", GgmlType::F32, {1}, {output_scale[il]});
  }
  if (o.edit) o.edit(b.w);
  return b.finish(out);
}

}  // namespace lf::test
