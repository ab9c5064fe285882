// libFuzzer target for what a GGUF header makes the engine size: the model configuration
// (load_model_config) and a node's plan (node_needs: its tensors, KV cache, scratch), for the
// whole model and for single-layer nodes. The input is a GGUF header (metadata and tensor infos);
// the file it describes is claimed to be 1 TiB, so tensors of any plausible size pass the
// reader and the values that drive allocations (block_count, head counts, widths, per-layer
// arrays, tensor shapes) reach the configuration. Any input must give a Status: never a crash, a
// hang or an allocation sized by a number from the file.
//
// The custom mutator is structure-aware: most of the time it parses the header and changes one
// of those values (to 0, 1, a power of two, INT32_MAX, a NaN, ...), resizes a per-layer array,
// changes a tensor's shape or type, or adds a layer's tensor, then writes the header again;
// otherwise it mutates the bytes.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/node_needs.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

constexpr uint64_t kClaimedFileSize = uint64_t{1} << 40;

void check(bool ok) {
  if (!ok) std::abort();
}

bool parse(const uint8_t* data, size_t size, lf::GgufFile* file) {
  return lf::gguf_parse(data, size, kClaimedFileSize, file).ok();
}

const int64_t kInteresting[] = {0, 1, 2, 3, 4, 7, 8, 31, 32, 64, 255, 256, 4096, 65536, 1 << 20, (1 << 20) + 1,
                                1 << 27, 0x7fffffff, int64_t{1} << 31, 0xffffffffLL, int64_t{1} << 40, -1};

int64_t interesting(std::mt19937_64& rng) {
  if (rng() % 4 == 0) return static_cast<int64_t>(rng() % 100000);
  return kInteresting[rng() % (sizeof kInteresting / sizeof kInteresting[0])];
}

bool is_int(lf::GgufType t) {
  return t != lf::GgufType::FLOAT32 && t != lf::GgufType::FLOAT64 && t != lf::GgufType::STRING &&
         t != lf::GgufType::ARRAY;
}

// One change to the parsed header, of the kinds that drive allocations and shapes.
void mutate(lf::GgufFile* f, std::mt19937_64& rng) {
  const uint64_t what = rng() % 6;
  if (what <= 2 && !f->kv.empty()) {
    lf::GgufValue& v = f->kv[rng() % f->kv.size()].second;
    if (v.type == lf::GgufType::ARRAY && is_int(v.elem_type)) {
      if (what == 0 || v.ints.empty()) {  // another length
        const uint64_t n = rng() % 3 == 0 ? rng() % 4096 : (v.ints.size() + rng() % 3) - 1;
        v.ints.resize(std::min<uint64_t>(n, 4096), v.ints.empty() ? 1 : v.ints.back());
        v.count = v.ints.size();
      } else {
        v.ints[rng() % v.ints.size()] = v.elem_type == lf::GgufType::BOOL ? rng() % 2 : interesting(rng);
      }
    } else if (is_int(v.type)) {
      const int64_t x = interesting(rng);
      v.u64 = static_cast<uint64_t>(x);
      v.i64 = x;
      v.type = x < 0 ? lf::GgufType::INT32 : x > 0xffffffffLL ? lf::GgufType::UINT64 : lf::GgufType::UINT32;
    } else if (v.type == lf::GgufType::FLOAT32) {
      const double floats[] = {NAN, INFINITY, -INFINITY, 0.0, -1.0, 1e-30, 1e38, 3.4e38, 1e300};
      v.f64 = floats[rng() % (sizeof floats / sizeof floats[0])];
    }
  } else if (what <= 4 && !f->tensors.empty()) {
    lf::GgufTensorInfo& t = f->tensors[rng() % f->tensors.size()];
    if (what == 3) {
      t.ne[rng() % 2] = std::max<int64_t>(1, interesting(rng) / 32 * 32);
    } else {
      const lf::GgmlType types[] = {lf::GgmlType::F32, lf::GgmlType::F16, lf::GgmlType::Q4_0, lf::GgmlType::Q8_0,
                                    lf::GgmlType::Q4_K, lf::GgmlType::Q6_K, lf::GgmlType::BF16};
      t.type = types[rng() % (sizeof types / sizeof types[0])];
    }
  } else if (!f->tensors.empty()) {  // a copy of a tensor for another (or a far) layer
    lf::GgufTensorInfo t = f->tensors[rng() % f->tensors.size()];
    const size_t dot = t.name.find('.', 4);
    if (t.name.rfind("blk.", 0) == 0 && dot != std::string::npos) {
      t.name = "blk." + std::to_string(rng() % 2 ? rng() % 8 : static_cast<uint64_t>(interesting(rng))) + t.name.substr(dot);
      if (t.name.size() < lf::kGgufMaxTensorName) f->tensors.push_back(t);
    }
  }
}

// The header as GgufWriter writes it; false when the writer refuses a tensor (then the bytes
// are mutated instead).
bool serialize(const lf::GgufFile& f, std::vector<uint8_t>* out) {
  lf::GgufWriter w(f.alignment);
  for (const auto& [key, value] : f.kv) w.set_value(key, value);
  for (const lf::GgufTensorInfo& t : f.tensors) {
    std::vector<int64_t> ne(t.ne, t.ne + std::max<uint32_t>(1, std::min<uint32_t>(t.n_dims, 4)));
    if (!w.add_tensor(t.name, t.type, ne, nullptr).ok()) return false;
  }
  *out = w.header_buffer();
  return true;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  std::mt19937_64 rng(seed);
  lf::GgufFile f;
  if (rng() % 4 != 0 && parse(data, size, &f)) {
    mutate(&f, rng);
    std::vector<uint8_t> bytes;
    if (serialize(f, &bytes) && bytes.size() <= max_size) {
      std::memcpy(data, bytes.data(), bytes.size());
      return bytes.size();
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lf::GgufFile file;
  if (!parse(data, size, &file)) return 0;
  lf::ModelConfig c;
  if (!lf::load_model_config(file, &c).ok()) return 0;
  check(c.n_layer > 0 && static_cast<size_t>(c.n_layer) == c.layers.size());
  for (const lf::LayerConfig& l : c.layers) check(l.n_head % l.n_head_kv == 0 && l.n_rot <= l.head_dim);

  const lf::LayerRange ranges[] = {{0, c.n_layer}, {0, 1}, {c.n_layer - 1, c.n_layer}};
  for (const lf::LayerRange& range : ranges) {
    lf::NodeShape shape;
    shape.range = range;
    shape.with_embedding = range.begin == 0;
    shape.with_head = range.end == c.n_layer;
    shape.max_ctx = 64;
    shape.max_tokens = 8;
    lf::NodeNeeds needs;
    const lf::Status s = lf::node_needs(file, shape, &needs);
    if (!s.ok()) {
      check(!s.message().empty());
      continue;
    }
    check(!needs.tensors.empty() && needs.tensor_bytes <= kClaimedFileSize);
    uint64_t kv_at_train = 0;
    (void)lf::KvCache::bytes_for(c, range, lf::KvCacheOptions{}, &kv_at_train);  // sized, never allocated
  }
  return 0;
}
