#include "model/kv_shipping.h"

#include <algorithm>

namespace lf {

std::vector<int> kv_layers_mirrored(const ModelConfig& c, int begin, int end) {
  std::vector<int> out;
  for (int il = begin; il < end; ++il) {
    const int source = c.layers[il].kv_layer;
    if (source < begin && std::find(out.begin(), out.end(), source) == out.end()) out.push_back(source);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> kv_layers_shipped(const ModelConfig& c, int begin, int end) {
  std::vector<int> out;
  for (int il = std::max(begin, end); il < c.n_layer; ++il) {
    const int source = c.layers[il].kv_layer;
    if (source >= begin && source < end && std::find(out.begin(), out.end(), source) == out.end()) out.push_back(source);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace lf
