#include "projector/projector_keys.h"

namespace lf {

Status check_projector_tower(const GgufFile& file, const std::string& tower, const std::string& type) {
  const auto refuse = [](const std::string& what) { return Status(Code::unsupported, what); };
  std::string arch;
  if (!file.get_string("general.architecture", &arch) || arch != "clip") {
    return refuse("not a projector file: general.architecture is '" + arch + "', expected 'clip'");
  }
  bool has = false;
  const std::string has_key = "clip.has_" + tower + "_encoder";
  if (!file.get_bool(has_key, &has) || !has) return refuse("the projector has no " + tower + " encoder (" + has_key + ")");
  std::string projector;
  if (!file.get_string("clip." + tower + ".projector_type", &projector)) file.get_string("clip.projector_type", &projector);
  if (projector != type) {
    return refuse(tower + " projector type '" + projector + "' is not supported; only Gemma 4's '" + type + "' is");
  }
  return Status();
}

Status positive_key(const KeyReader& keys, std::string_view key, int max, int* out) {
  LF_RETURN_IF_ERROR(keys.get_int(key, out));
  if (*out <= 0 || *out > max) {
    return Status(Code::unsupported, "key '" + keys.full(key) + "' is " + std::to_string(*out) + ", outside [1, " +
                                         std::to_string(max) + "]");
  }
  return Status();
}

}  // namespace lf
