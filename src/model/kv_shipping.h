// Which source layers' K/V rows cross a node's boundary when shared-KV layers and their sources
// sit on different nodes.
#pragma once

#include <vector>

#include "model/model_config.h"

namespace lf {

// The K/V rows a node of layers [begin, end) ships (docs/forward-pass.md, "Shared KV across
// nodes"): the source layers before begin whose cache a shared-KV layer of the node reads (the
// node mirrors them from rows it is given), and the source layers of the node whose cache a
// shared-KV layer after end reads (the node hands out their new rows), both in layer order.
std::vector<int> kv_layers_mirrored(const ModelConfig& config, int begin, int end);
std::vector<int> kv_layers_shipped(const ModelConfig& config, int begin, int end);

}  // namespace lf
