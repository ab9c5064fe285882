#include "tensor_types.h"

namespace lf::make_model {
namespace {

// '*' matches any run of characters, everything else itself.
bool glob_matches(const char* pattern, const char* text) {
  if (*pattern == '\0') return *text == '\0';
  if (*pattern == '*') {
    for (const char* t = text;; ++t) {
      if (glob_matches(pattern + 1, t)) return true;
      if (*t == '\0') return false;
    }
  }
  return *text != '\0' && *pattern == *text && glob_matches(pattern + 1, text + 1);
}

}  // namespace

bool tensor_pattern_matches(const std::string& pattern, const std::string& tensor_name) {
  const std::string kSuffix = ".weight";
  std::string base = tensor_name;
  if (base.size() > kSuffix.size() && base.compare(base.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0) {
    base.resize(base.size() - kSuffix.size());
  }
  if (glob_matches(pattern.c_str(), base.c_str())) return true;
  for (size_t dot = base.find('.'); dot != std::string::npos; dot = base.find('.', dot + 1)) {
    if (glob_matches(pattern.c_str(), base.c_str() + dot + 1)) return true;
  }
  return false;
}

GgmlType matrix_type(const MakeSettings& settings, const std::string& tensor_name, std::vector<int>* uses) {
  for (size_t i = settings.tensor_types.size(); i-- > 0;) {
    if (tensor_pattern_matches(settings.tensor_types[i].pattern, tensor_name)) {
      ++(*uses)[i];
      return settings.tensor_types[i].type;
    }
  }
  return settings.type;
}

}  // namespace lf::make_model
