#include "vision/vision_weights.h"

#include <cfloat>
#include <cstring>

namespace lf {
namespace {

using R = TensorRole;

const char* const kClampBounds[] = {"input_min", "input_max", "output_min", "output_max"};
const char* const kClampedLinears[] = {"attn_q", "attn_k", "attn_v", "attn_out", "ffn_gate", "ffn_up", "ffn_down"};

std::string blk(int il, const std::string& name, const char* suffix = "weight") {
  return "v.blk." + std::to_string(il) + "." + name + "." + suffix;
}

struct Specs {
  std::vector<TensorSpec> list;
  void add(std::string name, int64_t ne0, int64_t ne1, R role, bool required = true) {
    TensorSpec s;
    s.name = std::move(name);
    s.ne0 = ne0;
    s.ne1 = ne1;
    s.role = role;
    s.required = required;
    list.push_back(std::move(s));
  }
  // W [n_out, n_in] and its four optional clamp bounds ([1] each).
  void linear(const std::string& stem, int64_t n_in, int64_t n_out) {
    add(stem + ".weight", n_in, n_out, R::matmul);
    for (const char* b : kClampBounds) add(stem + "." + b, 1, 1, R::f32_vector, false);
  }
};

class Views {
 public:
  Views(const GgufFile& file, const uint8_t* data, uint64_t size) : file_(file), data_(data), size_(size) {}

  Status bytes(const std::string& name, const GgufTensorInfo** info, const uint8_t** p) const {
    *info = file_.tensor(name);
    *p = nullptr;
    if (!*info) return Status();
    if ((*info)->offset > size_ || (*info)->n_bytes > size_ - (*info)->offset) {
      return Status(Code::malformed, "tensor '" + name + "' lies past the end of the file's data");
    }
    *p = data_ + (*info)->offset;
    if (reinterpret_cast<uintptr_t>(*p) % 4 != 0) {
      return Status(Code::malformed, "tensor '" + name + "' is not 4-byte aligned");
    }
    return Status();
  }

  Status floats(const std::string& name, const float** out) const {
    const GgufTensorInfo* info;
    const uint8_t* p;
    LF_RETURN_IF_ERROR(bytes(name, &info, &p));
    *out = reinterpret_cast<const float*>(p);
    return Status();
  }

  // A matrix of n_out rows of n_in values (a 4-D kernel seen as its flattened rows).
  Status matrix(const std::string& name, int64_t n_in, int64_t n_out, WeightView* out) const {
    const GgufTensorInfo* info;
    const uint8_t* p;
    LF_RETURN_IF_ERROR(bytes(name, &info, &p));
    TypeTraits traits{};
    type_traits(static_cast<uint32_t>(info->type), &traits);
    out->type = info->type;
    out->n_in = n_in;
    out->n_out = n_out;
    out->data = p;
    out->row_bytes = row_bytes(traits, static_cast<uint64_t>(n_in));
    return Status();
  }

  Status clamped(const std::string& stem, int64_t n_in, int64_t n_out, ClampedLinear* out) const {
    LF_RETURN_IF_ERROR(matrix(stem + ".weight", n_in, n_out, &out->w));
    float* bounds[] = {&out->in_min, &out->in_max, &out->out_min, &out->out_max};
    const float fallback[] = {-FLT_MAX, FLT_MAX, -FLT_MAX, FLT_MAX};
    for (int i = 0; i < 4; ++i) {
      const float* v = nullptr;
      LF_RETURN_IF_ERROR(floats(stem + "." + kClampBounds[i], &v));
      *bounds[i] = v ? *v : fallback[i];
    }
    if (!(out->in_min <= out->in_max) || !(out->out_min <= out->out_max)) {
      return Status(Code::malformed, "the clamp bounds of '" + stem + ".weight' are empty or not numbers");
    }
    return Status();
  }

 private:
  const GgufFile& file_;
  const uint8_t* data_;
  uint64_t size_;
};

}  // namespace

std::vector<TensorSpec> vision_tensors(const VisionConfig& c) {
  Specs s;
  s.add("v.patch_embd.weight", c.patch_size, c.patch_size, R::matmul);
  s.list.back().ne2 = 3;
  s.list.back().ne3 = c.n_embd;
  s.add("v.position_embd.weight", c.n_embd, c.pos_size, R::f32_vector);
  s.list.back().ne2 = 2;
  for (int il = 0; il < c.n_layer; ++il) {
    s.add(blk(il, "ln1"), c.n_embd, 1, R::f32_vector);
    s.linear("v.blk." + std::to_string(il) + ".attn_q", c.n_embd, c.q_dim());
    s.linear("v.blk." + std::to_string(il) + ".attn_k", c.n_embd, c.q_dim());
    s.linear("v.blk." + std::to_string(il) + ".attn_v", c.n_embd, c.q_dim());
    s.add(blk(il, "attn_q_norm"), c.head_dim, 1, R::f32_vector);
    s.add(blk(il, "attn_k_norm"), c.head_dim, 1, R::f32_vector);
    s.linear("v.blk." + std::to_string(il) + ".attn_out", c.q_dim(), c.n_embd);
    s.add(blk(il, "attn_post_norm"), c.n_embd, 1, R::f32_vector);
    s.add(blk(il, "ln2"), c.n_embd, 1, R::f32_vector);
    s.linear("v.blk." + std::to_string(il) + ".ffn_gate", c.n_embd, c.n_ff);
    s.linear("v.blk." + std::to_string(il) + ".ffn_up", c.n_embd, c.n_ff);
    s.linear("v.blk." + std::to_string(il) + ".ffn_down", c.n_ff, c.n_embd);
    s.add(blk(il, "ffn_post_norm"), c.n_embd, 1, R::f32_vector);
    s.add(blk(il, "out_scale"), 1, 1, R::f32_vector, false);
  }
  s.add("v.std_bias", c.n_embd, 1, R::f32_vector, false);
  s.add("v.std_scale", c.n_embd, 1, R::f32_vector, false);
  s.linear("mm.input_projection", c.n_embd, c.n_embd_text);
  return s.list;
}

Status vision_weights(const GgufFile& file, const VisionConfig& c, const uint8_t* data, uint64_t size,
                      VisionWeights* out) {
  LF_RETURN_IF_ERROR(check_tensor_specs(file, vision_tensors(c), kVisionArch));
  if ((file.tensor("v.std_bias") != nullptr) != (file.tensor("v.std_scale") != nullptr)) {
    return Status(Code::unsupported, "the projector has only one of 'v.std_bias' and 'v.std_scale'");
  }
  const Views v(file, data, size);
  VisionWeights w;
  LF_RETURN_IF_ERROR(v.matrix("v.patch_embd.weight", c.patch_dim(), c.n_embd, &w.patch_embd));
  LF_RETURN_IF_ERROR(v.floats("v.position_embd.weight", &w.position_embd));
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int il = 0; il < c.n_layer; ++il) {
    VisionLayerWeights& l = w.layers[static_cast<size_t>(il)];
    const std::string p = "v.blk." + std::to_string(il) + ".";
    LF_RETURN_IF_ERROR(v.floats(blk(il, "ln1"), &l.ln1));
    LF_RETURN_IF_ERROR(v.clamped(p + "attn_q", c.n_embd, c.q_dim(), &l.attn_q));
    LF_RETURN_IF_ERROR(v.clamped(p + "attn_k", c.n_embd, c.q_dim(), &l.attn_k));
    LF_RETURN_IF_ERROR(v.clamped(p + "attn_v", c.n_embd, c.q_dim(), &l.attn_v));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "attn_q_norm"), &l.attn_q_norm));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "attn_k_norm"), &l.attn_k_norm));
    LF_RETURN_IF_ERROR(v.clamped(p + "attn_out", c.q_dim(), c.n_embd, &l.attn_out));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "attn_post_norm"), &l.attn_post_norm));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "ln2"), &l.ln2));
    LF_RETURN_IF_ERROR(v.clamped(p + "ffn_gate", c.n_embd, c.n_ff, &l.ffn_gate));
    LF_RETURN_IF_ERROR(v.clamped(p + "ffn_up", c.n_embd, c.n_ff, &l.ffn_up));
    LF_RETURN_IF_ERROR(v.clamped(p + "ffn_down", c.n_ff, c.n_embd, &l.ffn_down));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "ffn_post_norm"), &l.ffn_post_norm));
    LF_RETURN_IF_ERROR(v.floats(blk(il, "out_scale"), &l.out_scale));
  }
  LF_RETURN_IF_ERROR(v.floats("v.std_bias", &w.std_bias));
  LF_RETURN_IF_ERROR(v.floats("v.std_scale", &w.std_scale));
  LF_RETURN_IF_ERROR(v.clamped("mm.input_projection", c.n_embd, c.n_embd_text, &w.input_projection));
  *out = std::move(w);
  return Status();
}

}  // namespace lf
