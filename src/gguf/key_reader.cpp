#include "gguf/key_reader.h"

#include <cmath>
#include <cstdint>

namespace lf {
namespace {

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64:
    case GgufType::BOOL:
      return true;
    default:
      return false;
  }
}

bool is_signed(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 || t == GgufType::INT64;
}

}  // namespace

Status KeyReader::lookup(const std::string& name, bool* found, const GgufValue** v) const {
  *v = file_.find(name);
  if (found) *found = *v != nullptr;
  if (*v || found) return Status();
  return Status(Code::unsupported, "missing required key '" + name + "'");
}

Status KeyReader::get_int(std::string_view key, int* out, bool* found) const {
  const std::string name = full(key);
  const GgufValue* v = nullptr;
  LF_RETURN_IF_ERROR(lookup(name, found, &v));
  if (!v) return Status();
  if (!is_integer(v->type)) {
    return Status(Code::malformed, "key '" + name + "' has type " + gguf_type_name(v->type) + ", expected an integer");
  }
  const int64_t x = is_signed(v->type) ? v->i64 : static_cast<int64_t>(v->u64);
  if (x < 0 || x > 0x7fffffff) {
    return Status(Code::malformed, "key '" + name + "' = " + std::to_string(x) + " is out of range");
  }
  *out = static_cast<int>(x);
  return Status();
}

Status KeyReader::get_float(std::string_view key, float* out, bool* found) const {
  const std::string name = full(key);
  const GgufValue* v = nullptr;
  LF_RETURN_IF_ERROR(lookup(name, found, &v));
  if (!v) return Status();
  if (v->type != GgufType::FLOAT32 && v->type != GgufType::FLOAT64) {
    return Status(Code::malformed, "key '" + name + "' has type " + gguf_type_name(v->type) + ", expected FLOAT32");
  }
  // No hyper-parameter is meaningful as NaN or infinity, and one would make every output NaN.
  const float x = static_cast<float>(v->f64);
  if (!std::isfinite(x)) return Status(Code::malformed, "key '" + name + "' is not a finite float32");
  *out = x;
  return Status();
}

Status KeyReader::get_per_layer(std::string_view key, int n_layer, bool required, int fallback,
                                std::vector<int>* out) const {
  const std::string name = full(key);
  const GgufValue* v = file_.find(name);
  out->assign(n_layer, fallback);
  if (!v) {
    if (required) return Status(Code::unsupported, "missing required key '" + name + "'");
    return Status();
  }
  if (v->type != GgufType::ARRAY) {
    int x = 0;
    LF_RETURN_IF_ERROR(get_int(key, &x));
    out->assign(n_layer, x);
    return Status();
  }
  if (!is_integer(v->elem_type) || v->ints.size() != v->count) {
    return Status(Code::malformed, "key '" + name + "' must be an array of integers or bools");
  }
  if (v->count != static_cast<uint64_t>(n_layer)) {
    return Status(Code::malformed, "key '" + name + "' has " + std::to_string(v->count) +
                                       " elements, expected block_count = " + std::to_string(n_layer));
  }
  for (int il = 0; il < n_layer; ++il) {
    const int64_t x = v->ints[il];
    if (x < 0 || x > 0x7fffffff) {
      return Status(Code::malformed, "key '" + name + "' element " + std::to_string(il) + " is out of range");
    }
    (*out)[il] = static_cast<int>(x);
  }
  return Status();
}
}  // namespace lf
