#include "layerfold/kv_cache.h"

#include <algorithm>
#include <string>

#include "layerfold/quant.h"

namespace lf {

Status Session::create(const Model& model, const SessionOptions& options, Session* out) {
  const ModelConfig& c = model.config;
  const int max_ctx = options.max_ctx > 0 ? options.max_ctx : c.n_ctx_train;
  if (max_ctx <= 0) return Status(Code::invalid_argument, "max_ctx must be positive");
  if (options.attn_chunk <= 0) return Status(Code::invalid_argument, "attn_chunk must be positive");
  Session s;
  s.range_ = model.range;
  s.max_ctx_ = max_ctx;
  s.attn_chunk_ = options.attn_chunk;
  s.layers_.resize(model.range.end - model.range.begin);
  for (int il = model.range.begin; il < model.range.end; ++il) {
    const LayerConfig& l = c.layers[il];
    LayerKv& kv = s.layers_[il - model.range.begin];
    kv.capacity = l.sliding ? std::min(max_ctx, c.n_swa + options.attn_chunk - 1) : max_ctx;
    kv.n_head_kv = l.n_head_kv;
    kv.head_dim = l.head_dim;
    const uint64_t n = static_cast<uint64_t>(kv.capacity) * static_cast<uint64_t>(l.kv_dim());
    if (n > SIZE_MAX / sizeof(uint16_t)) {
      return Status(Code::resource_exhausted, "KV cache of layer " + std::to_string(il) + " does not fit in memory");
    }
    kv.k.assign(static_cast<size_t>(n), 0);
    kv.v.assign(static_cast<size_t>(n), 0);
    kv.approx.resize(static_cast<size_t>(l.n_head_kv));
  }
  *out = std::move(s);
  return Status();
}

uint64_t Session::bytes() const {
  uint64_t total = 0;
  for (const LayerKv& kv : layers_) total += (kv.k.size() + kv.v.size()) * sizeof(uint16_t);
  return total;
}

ApproxStats Session::approx_stats() const {
  ApproxStats total = ffn_approx;
  for (const LayerKv& kv : layers_) {
    for (const ApproxStats& head : kv.approx) total.merge(head);
  }
  return total;
}

// k, v [head_dim] -> slot pos % capacity of head kv_head
void Session::store(int il, int kv_head, int pos, const float* k, const float* v) {
  LayerKv& kv = layers_[il - range_.begin];
  const size_t off = (static_cast<size_t>(kv_head) * kv.capacity + static_cast<size_t>(pos % kv.capacity)) * kv.head_dim;
  for (int i = 0; i < kv.head_dim; ++i) {
    kv.k[off + i] = fp32_to_fp16(k[i]);
    kv.v[off + i] = fp32_to_fp16(v[i]);
  }
}

KvView Session::view(int il, int kv_head, int end_pos) const {
  const LayerKv& kv = layers_[il - range_.begin];
  const size_t off = static_cast<size_t>(kv_head) * kv.capacity * kv.head_dim;
  KvView view;
  view.k = kv.k.data() + off;
  view.v = kv.v.data() + off;
  view.capacity = kv.capacity;
  view.n_head_kv = 1;
  view.head_dim = kv.head_dim;
  view.first_pos = std::max(0, end_pos - kv.capacity);
  return view;
}

}  // namespace lf
