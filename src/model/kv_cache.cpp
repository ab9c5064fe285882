#include "model/kv_cache.h"

#include <algorithm>
#include <string>

#include "model/kv_shipping.h"
#include "quant/quant.h"

namespace lf {
namespace {

Status check_options(const ModelConfig& c, const KvCacheOptions& options, int* max_ctx) {
  *max_ctx = options.max_ctx > 0 ? options.max_ctx : c.n_ctx_train;
  if (*max_ctx <= 0) return Status(Code::invalid_argument, "max_ctx must be positive");
  if (options.attn_chunk <= 0) return Status(Code::invalid_argument, "attn_chunk must be positive");
  return Status();
}

// Whether a later layer of the model attends over layer il's cache.
bool read_by_shared_layer(const ModelConfig& c, int il) {
  for (const LayerConfig& l : c.layers) {
    if (l.shares_kv && l.kv_layer == il) return true;
  }
  return false;
}

// The lowest layer a node of `range` keeps a cache for.
int first_layer(const std::vector<int>& mirrored, LayerRange range) {
  return mirrored.empty() ? range.begin : std::min(range.begin, mirrored.front());
}

// In 64 bits: a window as wide as an int is a global layer in effect, never an overflow.
// A layer before the node's range holds nothing unless the node mirrors it; a mirror is sized
// as its source. A shared-KV layer holds nothing. A sliding layer whose cache a shared-KV layer
// reads keeps every position: that layer runs after the source has stored the whole call, which
// a ring of n_swa + attn_chunk - 1 slots no longer holds for calls longer than a chunk (and its
// node reads the call's rows back to hand them out).
int capacity(const ModelConfig& c, LayerRange range, const std::vector<int>& mirrored, int il, int max_ctx,
             int attn_chunk) {
  if (il < range.begin && std::find(mirrored.begin(), mirrored.end(), il) == mirrored.end()) return 0;
  if (c.layers[il].shares_kv) return 0;
  if (!c.layers[il].sliding || read_by_shared_layer(c, il)) return max_ctx;
  return static_cast<int>(std::min<int64_t>(max_ctx, int64_t{c.n_swa} + attn_chunk - 1));
}

// f16 values of one of K or V of layer il
Status layer_values(const ModelConfig& c, int il, int capacity, uint64_t* n) {
  *n = static_cast<uint64_t>(capacity) * static_cast<uint64_t>(c.layers[il].kv_dim());
  if (*n > SIZE_MAX / sizeof(uint16_t)) {
    return Status(Code::resource_exhausted, "KV cache of layer " + std::to_string(il) + " does not fit in memory");
  }
  return Status();
}

}  // namespace

Status KvCache::bytes_for(const ModelConfig& c, LayerRange range, const KvCacheOptions& options, uint64_t* bytes) {
  int max_ctx = 0;
  LF_RETURN_IF_ERROR(check_options(c, options, &max_ctx));
  *bytes = 0;
  const std::vector<int> mirrored = kv_layers_mirrored(c, range.begin, range.end);
  for (int il = first_layer(mirrored, range); il < range.end; ++il) {
    uint64_t n = 0;
    LF_RETURN_IF_ERROR(layer_values(c, il, capacity(c, range, mirrored, il, max_ctx, options.attn_chunk), &n));
    *bytes += 2 * n * sizeof(uint16_t);
  }
  return Status();
}

Status KvCache::create(const ModelConfig& c, LayerRange range, const KvCacheOptions& options, KvCache* out) {
  KvCache cache;
  LF_RETURN_IF_ERROR(check_options(c, options, &cache.max_ctx_));
  cache.range_ = range;
  cache.attn_chunk_ = options.attn_chunk;
  cache.n_swa_ = c.n_swa;
  cache.mirrored_ = kv_layers_mirrored(c, range.begin, range.end);
  cache.first_ = first_layer(cache.mirrored_, range);
  cache.layers_.resize(range.end - cache.first_);
  for (int il = cache.first_; il < range.end; ++il) {
    LayerKv& kv = cache.layer(il);
    kv.capacity = capacity(c, range, cache.mirrored_, il, cache.max_ctx_, options.attn_chunk);
    kv.n_head_kv = c.layers[il].n_head_kv;
    kv.head_dim = c.layers[il].head_dim;
    kv.sliding = c.layers[il].sliding;
    uint64_t n = 0;
    LF_RETURN_IF_ERROR(layer_values(c, il, kv.capacity, &n));
    kv.k.assign(static_cast<size_t>(n), 0);
    kv.v.assign(static_cast<size_t>(n), 0);
  }
  *out = std::move(cache);
  return Status();
}

int KvCache::shortest_cut(int n_past) const {
  int shortest = 0;
  for (const LayerKv& kv : layers_) {
    if (!kv.sliding || kv.capacity == 0 || n_past <= kv.capacity) continue;
    shortest = std::max(shortest, n_past - kv.capacity + n_swa_ - 1);
  }
  return shortest;
}

uint64_t KvCheckpoint::bytes() const {
  uint64_t total = 0;
  for (const KvRows& rows : rings) total += rows.values.size() * sizeof(uint16_t);
  return total;
}

void KvCache::save_checkpoint(int n_past, KvCheckpoint* out) const {
  out->pos = n_past;
  out->rings.clear();
  const int n = std::min(n_past, n_swa_ - 1);
  for (int il = range_.begin; il < range_.end; ++il) {
    const LayerKv& kv = layer(il);
    if (!kv.sliding || kv.capacity == 0 || kv.capacity >= max_ctx_ || n <= 0) continue;
    read_rows(il, n_past - n, n, &out->rings.emplace_back());
  }
}

void KvCache::restore_checkpoint(const KvCheckpoint& checkpoint) {
  for (const KvRows& rows : checkpoint.rings) store_rows(rows);
}

uint64_t KvCache::bytes() const {
  uint64_t total = 0;
  for (const LayerKv& kv : layers_) total += (kv.k.size() + kv.v.size()) * sizeof(uint16_t);
  return total;
}

uint64_t KvCache::digest() const {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto mix = [&h](const std::vector<uint16_t>& values) {
    for (const uint16_t value : values) {
      h = (h ^ (value & 0xffu)) * 0x100000001b3ull;
      h = (h ^ (value >> 8)) * 0x100000001b3ull;
    }
  };
  for (const LayerKv& kv : layers_) {
    mix(kv.k);
    mix(kv.v);
  }
  return h;
}

void KvCache::store(int il, int kv_head, int pos, const float* k, const float* v) {
  LayerKv& kv = layer(il);
  const size_t off = (static_cast<size_t>(kv_head) * kv.capacity + static_cast<size_t>(pos % kv.capacity)) * kv.head_dim;
  for (int i = 0; i < kv.head_dim; ++i) {
    kv.k[off + i] = fp32_to_fp16(k[i]);
    kv.v[off + i] = fp32_to_fp16(v[i]);
  }
}

// Shipped rows are per position [K heads, V heads]; the cache is per head [slots, head_dim].
void KvCache::store_rows(const KvRows& rows) {
  LayerKv& kv = layer(rows.layer);
  const size_t dim = static_cast<size_t>(kv.head_dim), kv_dim = dim * kv.n_head_kv;
  for (int t = 0; t < rows.n; ++t) {
    const uint16_t* k = rows.values.data() + 2 * kv_dim * t;
    const uint16_t* v = k + kv_dim;
    const size_t slot = static_cast<size_t>((rows.pos0 + t) % kv.capacity);
    for (size_t h = 0; h < static_cast<size_t>(kv.n_head_kv); ++h) {
      std::copy_n(k + h * dim, dim, kv.k.begin() + (h * kv.capacity + slot) * dim);
      std::copy_n(v + h * dim, dim, kv.v.begin() + (h * kv.capacity + slot) * dim);
    }
  }
}

void KvCache::read_rows(int il, int pos0, int n, KvRows* out) const {
  const LayerKv& kv = layer(il);
  const size_t dim = static_cast<size_t>(kv.head_dim), kv_dim = dim * kv.n_head_kv;
  out->layer = il;
  out->pos0 = pos0;
  out->n = n;
  out->values.resize(2 * kv_dim * n);
  for (int t = 0; t < n; ++t) {
    uint16_t* k = out->values.data() + 2 * kv_dim * t;
    uint16_t* v = k + kv_dim;
    const size_t slot = static_cast<size_t>((pos0 + t) % kv.capacity);
    for (size_t h = 0; h < static_cast<size_t>(kv.n_head_kv); ++h) {
      std::copy_n(kv.k.begin() + (h * kv.capacity + slot) * dim, dim, k + h * dim);
      std::copy_n(kv.v.begin() + (h * kv.capacity + slot) * dim, dim, v + h * dim);
    }
  }
}

bool KvCache::holds(int il, int n_head_kv, int head_dim) const {
  if (il < first_ || il >= range_.end) return false;
  const LayerKv& kv = layer(il);
  return kv.capacity > 0 && kv.n_head_kv == n_head_kv && kv.head_dim == head_dim;
}

KvView KvCache::view(int il, int kv_head, int end_pos) const {
  const LayerKv& kv = layer(il);
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

void KvCache::save_overwritten(int pos0, int n, KvUndo* undo) const {
  undo->pos0 = pos0;
  undo->n_slots = 0;
  undo->k.assign(layers_.size(), {});
  undo->v.assign(layers_.size(), {});
  for (size_t i = 0; i < layers_.size(); ++i) {
    const LayerKv& kv = layers_[i];
    // Nothing live in the slots ahead: a cache that never wraps (every global layer, a sliding
    // layer that keeps all positions) or holds nothing (a shared-KV layer).
    if (!kv.sliding || pos0 == 0 || kv.capacity == 0 || kv.capacity >= max_ctx_) continue;
    undo->n_slots = std::min(n, kv.capacity);
    const size_t values = static_cast<size_t>(kv.n_head_kv) * undo->n_slots * kv.head_dim;
    undo->k[i].resize(values);
    undo->v[i].resize(values);
    for_each_slot(kv, *undo, [&](size_t cache, size_t saved) {
      std::copy_n(kv.k.begin() + cache, kv.head_dim, undo->k[i].begin() + saved);
      std::copy_n(kv.v.begin() + cache, kv.head_dim, undo->v[i].begin() + saved);
    });
  }
}

void KvCache::restore(const KvUndo& undo) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerKv& kv = layers_[i];
    if (undo.k[i].empty()) continue;
    for_each_slot(kv, undo, [&](size_t cache, size_t saved) {
      std::copy_n(undo.k[i].begin() + saved, kv.head_dim, kv.k.begin() + cache);
      std::copy_n(undo.v[i].begin() + saved, kv.head_dim, kv.v.begin() + cache);
    });
  }
}

}  // namespace lf
