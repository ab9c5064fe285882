// GGUF metadata and tensor table as JSON for the JS host, so JS never parses GGUF itself.
// JSON_NOEXCEPTION is defined project-wide: nothing here may depend on an exception, so
// invalid UTF-8 is replaced at dump time instead of throwing.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "gguf/gguf_reader.h"

namespace lf {

namespace {

using Json = nlohmann::ordered_json;  // keeps metadata in file order

constexpr uint64_t kMaxInlineArray = 64;

Json float_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// A FLOAT32 as the shortest decimal that reads back as the same float: 1e-06 rather than
// 9.999999974752427e-07, which is the same f32 but not what the converter wrote.
Json float32_json(double v) {
  if (!std::isfinite(v)) return float_json(v);
  const float f = static_cast<float>(v);
  char buf[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

Json elem_json(GgufType t, int64_t v) {
  if (t == GgufType::BOOL) return v != 0;
  if (t == GgufType::UINT64) return static_cast<uint64_t>(v);
  return v;
}

Json value_json(const GgufValue& v, bool include_large_arrays) {
  switch (v.type) {
    case GgufType::BOOL: return v.u64 != 0;
    case GgufType::UINT8: case GgufType::UINT16: case GgufType::UINT32: case GgufType::UINT64: return v.u64;
    case GgufType::INT8: case GgufType::INT16: case GgufType::INT32: case GgufType::INT64: return v.i64;
    case GgufType::FLOAT32: return float32_json(v.f64);
    case GgufType::FLOAT64: return float_json(v.f64);
    case GgufType::STRING: return v.str;
    case GgufType::ARRAY: break;
  }
  if (v.count > kMaxInlineArray && !include_large_arrays) {
    return Json{{"type", "array"}, {"elem_type", gguf_type_name(v.elem_type)}, {"count", v.count}};
  }
  Json out = Json::array();
  switch (v.elem_type) {
    case GgufType::STRING:
      for (const std::string& s : v.strings) out.push_back(s);
      break;
    case GgufType::ARRAY:
      for (const GgufValue& a : v.arrays) out.push_back(value_json(a, include_large_arrays));
      break;
    case GgufType::FLOAT32:
      for (double f : v.floats) out.push_back(float32_json(f));
      break;
    case GgufType::FLOAT64:
      for (double f : v.floats) out.push_back(float_json(f));
      break;
    default:
      for (int64_t i : v.ints) out.push_back(elem_json(v.elem_type, i));
      break;
  }
  return out;
}

Json tensor_json(const GgufTensorInfo& t, uint64_t data_offset) {
  TypeTraits tt{"unknown", 1, 0};
  type_traits(static_cast<uint32_t>(t.type), &tt);
  Json ne = Json::array();
  for (uint32_t d = 0; d < t.n_dims; ++d) ne.push_back(t.ne[d]);
  return Json{{"name", t.name},
              {"type", tt.name},
              {"type_id", static_cast<uint32_t>(t.type)},
              {"ne", std::move(ne)},
              {"offset", data_offset + t.offset},
              {"n_bytes", t.n_bytes}};
}

}  // namespace

std::string gguf_to_json(const GgufFile& file, bool include_large_arrays) {
  Json metadata = Json::object();
  for (const auto& [key, value] : file.kv) metadata[key] = value_json(value, include_large_arrays);
  Json tensors = Json::array();
  for (const GgufTensorInfo& t : file.tensors) tensors.push_back(tensor_json(t, file.data_offset));
  Json out{{"version", file.version},
           {"alignment", file.alignment},
           {"data_offset", file.data_offset},
           {"file_size", file.file_size},
           {"metadata", std::move(metadata)},
           {"tensors", std::move(tensors)}};
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace lf
