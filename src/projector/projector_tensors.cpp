#include "projector/projector_tensors.h"

#include <cfloat>

namespace lf {
namespace {

const char* const kClampBounds[] = {"input_min", "input_max", "output_min", "output_max"};

}  // namespace

void ProjectorSpecs::add(std::string name, int64_t ne0, int64_t ne1, TensorRole role, bool required) {
  TensorSpec s;
  s.name = std::move(name);
  s.ne0 = ne0;
  s.ne1 = ne1;
  s.role = role;
  s.required = required;
  list.push_back(std::move(s));
}

void ProjectorSpecs::linear(const std::string& stem, int64_t n_in, int64_t n_out, bool required) {
  add(stem + ".weight", n_in, n_out, TensorRole::matmul, required);
  for (const char* b : kClampBounds) add(stem + "." + b, 1, 1, TensorRole::f32_vector, false);
}

Status ProjectorViews::bytes(const std::string& name, const GgufTensorInfo** info, const uint8_t** p) const {
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

Status ProjectorViews::floats(const std::string& name, const float** out) const {
  const GgufTensorInfo* info;
  const uint8_t* p;
  LF_RETURN_IF_ERROR(bytes(name, &info, &p));
  *out = reinterpret_cast<const float*>(p);
  return Status();
}

Status ProjectorViews::matrix(const std::string& name, int64_t n_in, int64_t n_out, WeightView* out) const {
  const GgufTensorInfo* info;
  const uint8_t* p;
  LF_RETURN_IF_ERROR(bytes(name, &info, &p));
  *out = WeightView{};
  if (!info) return Status();
  TypeTraits traits{};
  type_traits(static_cast<uint32_t>(info->type), &traits);
  out->type = info->type;
  out->n_in = n_in;
  out->n_out = n_out;
  out->data = p;
  out->row_bytes = row_bytes(traits, static_cast<uint64_t>(n_in));
  return Status();
}

Status ProjectorViews::clamped(const std::string& stem, int64_t n_in, int64_t n_out, ClampedLinear* out) const {
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

}  // namespace lf
