#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "model/kv_shipping.h"
#include "quant/quant.h"

namespace lf {
namespace {

// A quantized row is whole 32-value blocks, as in llama.cpp, which refuses such a cache too.
Status check_type(const ModelConfig& c, LayerRange range, GgmlType type, const char* which) {
  if (!kv_type_supported(type)) {
    return Status(Code::invalid_argument, std::string("unsupported ") + which + " cache type id " +
                                              std::to_string(static_cast<uint32_t>(type)) + " (f16, q8_0 or q4_0)");
  }
  if (type == GgmlType::F16) return Status();
  // Mirrored source layers before the range share the head dim of the layers reading them.
  for (int il = range.begin; il < range.end; ++il) {
    if (c.layers[il].head_dim % 32 != 0) {
      return Status(Code::invalid_argument, std::string("a ") + kv_type_name(type) + " " + which +
                                                " cache needs head dims that are multiples of 32; layer " +
                                                std::to_string(il) + "'s is " + std::to_string(c.layers[il].head_dim));
    }
  }
  return Status();
}

Status check_options(const ModelConfig& c, LayerRange range, const KvCacheOptions& options, int* max_ctx) {
  *max_ctx = options.max_ctx > 0 ? options.max_ctx : c.n_ctx_train;
  if (*max_ctx <= 0) return Status(Code::invalid_argument, "max_ctx must be positive");
  if (options.attn_chunk <= 0) return Status(Code::invalid_argument, "attn_chunk must be positive");
  LF_RETURN_IF_ERROR(check_type(c, range, options.k_type, "K"));
  LF_RETURN_IF_ERROR(check_type(c, range, options.v_type, "V"));
  for (int il = range.begin; il < range.end; ++il) {
    KvRotation rotation;
    LF_RETURN_IF_ERROR(kv_rotation(c, il, options.k_type, options.v_type, &rotation));
  }
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

// Bytes of one of K or V (type) of layer il
Status layer_bytes(const ModelConfig& c, int il, int capacity, GgmlType type, uint64_t* n) {
  const uint64_t rows = static_cast<uint64_t>(capacity) * static_cast<uint64_t>(c.layers[il].n_head_kv);
  const uint64_t row = kv_row_bytes(type, c.layers[il].head_dim);
  if (row != 0 && rows > SIZE_MAX / row) {
    return Status(Code::resource_exhausted, "KV cache of layer " + std::to_string(il) + " does not fit in memory");
  }
  *n = rows * row;
  return Status();
}

// The largest power of two dividing D
int largest_power_of_two_dividing(int D) { return D & -D; }

}  // namespace

Status parse_kv_type(const std::string& name, const char* which, GgmlType* out) {
  for (const GgmlType t : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0}) {
    if (name == kv_type_name(t)) {
      *out = t;
      return Status();
    }
  }
  return Status(Code::invalid_argument, std::string("unsupported ") + which + " cache type '" + name +
                                            "' (supported: f16, q8_0, q4_0)");
}

const char* kv_type_name(GgmlType type) {
  return type == GgmlType::F16 ? "f16" : type == GgmlType::Q8_0 ? "q8_0" : type == GgmlType::Q4_0 ? "q4_0" : "?";
}

Status kv_rotation(const ModelConfig& c, int il, GgmlType k_type, GgmlType v_type, KvRotation* out) {
  *out = KvRotation();
  const LayerConfig& l = c.layers[il];
  for (const LayerConfig& other : c.layers) {
    if (other.sliding == l.sliding && !other.shares_kv && other.head_dim != l.head_dim) return Status();
  }
  if (c.layers[0].head_dim % 64 != 0) return Status();
  const int D = l.head_dim;
  if ((k_type != GgmlType::F16 || v_type != GgmlType::F16) && D % 64 != 0) {
    return Status(Code::unsupported, "a quantized KV cache of layer " + std::to_string(il) + " (head dim " + std::to_string(D) +
                                         "): llama.cpp would rotate it in blocks of 64 across its heads, which is not supported");
  }
  if (k_type != GgmlType::F16) out->k = largest_power_of_two_dividing(D);
  if (v_type != GgmlType::F16) out->v = 64;
  return Status();
}

Status attn_chunk_for(int max_span, int* attn_chunk) {
  constexpr int kMaxSpan = 8192;
  if (max_span < 0 || max_span > kMaxSpan) {
    return Status(Code::invalid_argument, "max span must be 0 to " + std::to_string(kMaxSpan) + " rows, got " + std::to_string(max_span));
  }
  *attn_chunk = max_span > kAttnChunk ? max_span : kAttnChunk;
  return Status();
}

Status KvCache::bytes_for(const ModelConfig& c, LayerRange range, const KvCacheOptions& options, uint64_t* bytes) {
  int max_ctx = 0;
  LF_RETURN_IF_ERROR(check_options(c, range, options, &max_ctx));
  *bytes = 0;
  const std::vector<int> mirrored = kv_layers_mirrored(c, range.begin, range.end);
  for (int il = first_layer(mirrored, range); il < range.end; ++il) {
    const int slots = capacity(c, range, mirrored, il, max_ctx, options.attn_chunk);
    uint64_t k = 0, v = 0;
    LF_RETURN_IF_ERROR(layer_bytes(c, il, slots, options.k_type, &k));
    LF_RETURN_IF_ERROR(layer_bytes(c, il, slots, options.v_type, &v));
    *bytes += k + v;
  }
  return Status();
}

Status KvCache::create(const ModelConfig& c, LayerRange range, const KvCacheOptions& options, KvCache* out) {
  KvCache cache;
  LF_RETURN_IF_ERROR(check_options(c, range, options, &cache.max_ctx_));
  cache.range_ = range;
  cache.attn_chunk_ = options.attn_chunk;
  cache.n_swa_ = c.n_swa;
  cache.k_type_ = options.k_type;
  cache.v_type_ = options.v_type;
  cache.mirrored_ = kv_layers_mirrored(c, range.begin, range.end);
  cache.first_ = first_layer(cache.mirrored_, range);
  cache.layers_.resize(range.end - cache.first_);
  for (int il = cache.first_; il < range.end; ++il) {
    LayerKv& kv = cache.layer(il);
    kv.capacity = capacity(c, range, cache.mirrored_, il, cache.max_ctx_, options.attn_chunk);
    kv.n_head_kv = c.layers[il].n_head_kv;
    kv.head_dim = c.layers[il].head_dim;
    kv.sliding = c.layers[il].sliding;
    LF_RETURN_IF_ERROR(kv_rotation(c, il, options.k_type, options.v_type, &kv.rotation));
    kv.k_row = kv_row_bytes(options.k_type, kv.head_dim);
    kv.v_row = kv_row_bytes(options.v_type, kv.head_dim);
    uint64_t k = 0, v = 0;
    LF_RETURN_IF_ERROR(layer_bytes(c, il, kv.capacity, options.k_type, &k));
    LF_RETURN_IF_ERROR(layer_bytes(c, il, kv.capacity, options.v_type, &v));
    kv.k.assign(static_cast<size_t>(k), 0);
    kv.v.assign(static_cast<size_t>(v), 0);
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
  for (const KvRows& rows : rings) total += rows.bytes.size();
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
  for (const LayerKv& kv : layers_) total += kv.k.size() + kv.v.size();
  return total;
}

uint64_t KvCache::digest() const {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto mix = [&h](const std::vector<uint8_t>& bytes) {
    for (const uint8_t byte : bytes) h = (h ^ byte) * 0x100000001b3ull;
  };
  for (const LayerKv& kv : layers_) {
    mix(kv.k);
    mix(kv.v);
  }
  return h;
}

uint64_t KvCache::row_bytes(int il) const {
  const LayerKv& kv = layer(il);
  return static_cast<uint64_t>(kv.n_head_kv) * (kv.k_row + kv.v_row);
}

namespace {

// x [D] -> one row of type t at out
void store_row(GgmlType t, const float* x, int D, uint8_t* out) {
  if (t == GgmlType::F16) {
    for (int i = 0; i < D; ++i) {
      const uint16_t h = fp32_to_fp16(x[i]);
      std::memcpy(out + 2 * static_cast<size_t>(i), &h, sizeof h);
    }
  } else if (t == GgmlType::Q8_0) {
    quantize_row_q8_0_x86(x, reinterpret_cast<block_q8_0*>(out), D);
  } else {
    quantize_row_q4_0_ref(x, reinterpret_cast<block_q4_0*>(out), D);
  }
}

}  // namespace

void KvCache::store(int il, int kv_head, int pos, const float* k, const float* v) {
  LayerKv& kv = layer(il);
  const size_t row = static_cast<size_t>(kv_head) * kv.capacity + static_cast<size_t>(pos % kv.capacity);
  store_row(k_type_, k, kv.head_dim, kv.k.data() + row * kv.k_row);
  store_row(v_type_, v, kv.head_dim, kv.v.data() + row * kv.v_row);
}

// Shipped rows are per position [K heads, V heads]; the cache is per head [slots] rows.
void KvCache::store_rows(const KvRows& rows) {
  LayerKv& kv = layer(rows.layer);
  const size_t heads = static_cast<size_t>(kv.n_head_kv);
  for (int t = 0; t < rows.n; ++t) {
    const uint8_t* k = rows.bytes.data() + row_bytes(rows.layer) * t;
    const uint8_t* v = k + heads * kv.k_row;
    const size_t slot = static_cast<size_t>((rows.pos0 + t) % kv.capacity);
    for (size_t h = 0; h < heads; ++h) {
      std::copy_n(k + h * kv.k_row, kv.k_row, kv.k.begin() + (h * kv.capacity + slot) * kv.k_row);
      std::copy_n(v + h * kv.v_row, kv.v_row, kv.v.begin() + (h * kv.capacity + slot) * kv.v_row);
    }
  }
}

namespace {

// Whether every f16 of a row of D values of type t is finite: its values (F16) or its block
// scales (the first two bytes of each block).
bool row_finite(GgmlType t, const uint8_t* row, int D) {
  const size_t step = t == GgmlType::F16 ? 2 : kv_row_bytes(t, 32);
  const size_t end = kv_row_bytes(t, D);
  for (size_t at = 0; at < end; at += step) {
    uint16_t h;
    std::memcpy(&h, row + at, sizeof h);
    if ((h & 0x7c00) == 0x7c00) return false;
  }
  return true;
}

}  // namespace

int KvCache::first_non_finite(const KvRows& rows) const {
  const LayerKv& kv = layer(rows.layer);
  for (int t = 0; t < rows.n; ++t) {
    const uint8_t* k = rows.bytes.data() + row_bytes(rows.layer) * t;
    const uint8_t* v = k + static_cast<size_t>(kv.n_head_kv) * kv.k_row;
    for (int h = 0; h < kv.n_head_kv; ++h) {
      if (!row_finite(k_type_, k + h * kv.k_row, kv.head_dim) || !row_finite(v_type_, v + h * kv.v_row, kv.head_dim)) {
        return t;
      }
    }
  }
  return -1;
}

void KvCache::read_rows(int il, int pos0, int n, KvRows* out) const {
  const LayerKv& kv = layer(il);
  const size_t heads = static_cast<size_t>(kv.n_head_kv);
  out->layer = il;
  out->pos0 = pos0;
  out->n = n;
  out->bytes.resize(row_bytes(il) * n);
  for (int t = 0; t < n; ++t) {
    uint8_t* k = out->bytes.data() + row_bytes(il) * t;
    uint8_t* v = k + heads * kv.k_row;
    const size_t slot = static_cast<size_t>((pos0 + t) % kv.capacity);
    for (size_t h = 0; h < heads; ++h) {
      std::copy_n(kv.k.begin() + (h * kv.capacity + slot) * kv.k_row, kv.k_row, k + h * kv.k_row);
      std::copy_n(kv.v.begin() + (h * kv.capacity + slot) * kv.v_row, kv.v_row, v + h * kv.v_row);
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
  const size_t first_row = static_cast<size_t>(kv_head) * kv.capacity;
  KvView view;
  view.k = kv.k.data() + first_row * kv.k_row;
  view.v = kv.v.data() + first_row * kv.v_row;
  view.k_type = k_type_;
  view.v_type = v_type_;
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
    const size_t rows = static_cast<size_t>(kv.n_head_kv) * undo->n_slots;
    undo->k[i].resize(rows * kv.k_row);
    undo->v[i].resize(rows * kv.v_row);
    for_each_slot(kv, *undo, [&](size_t cache, size_t saved) {
      std::copy_n(kv.k.begin() + cache * kv.k_row, kv.k_row, undo->k[i].begin() + saved * kv.k_row);
      std::copy_n(kv.v.begin() + cache * kv.v_row, kv.v_row, undo->v[i].begin() + saved * kv.v_row);
    });
  }
}

void KvCache::restore(const KvUndo& undo) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerKv& kv = layers_[i];
    if (undo.k[i].empty()) continue;
    for_each_slot(kv, undo, [&](size_t cache, size_t saved) {
      std::copy_n(undo.k[i].begin() + saved * kv.k_row, kv.k_row, kv.k.begin() + cache * kv.k_row);
      std::copy_n(undo.v[i].begin() + saved * kv.v_row, kv.v_row, kv.v.begin() + cache * kv.v_row);
    });
  }
}

}  // namespace lf
