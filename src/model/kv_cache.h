// One session's K and V rows for every layer of a node, each in its cache type: f16 (llama.cpp's
// default, docs/forward-pass.md, "Numerics"), q8_0 or q4_0, stored as llama.cpp stores them
// (docs/attention.md, "Quantized cache").
//
// Global layers keep every position up to max_ctx. Sliding layers keep a ring of
// n_swa + attn_chunk - 1 slots: the engine writes at most attn_chunk new positions before it
// runs their queries, so the oldest key any of those queries needs is still in the ring. A
// sliding layer whose cache a shared-KV layer reads keeps every position (that layer runs after
// the whole call is stored), and shared-KV layers hold nothing (docs/forward-pass.md, "The KV
// cache"). A node holding shared-KV layers without their source layer also holds a mirror of
// the source's cache, which it fills from rows the source's node hands out (KvRows;
// docs/forward-pass.md, "Shared KV across nodes").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model.h"
#include "ops/ops.h"

namespace lf {

// Queries attended per step unless a node takes media spans: then its longest span, whose rows
// are all stored before any of them attends (Session::span_in).
constexpr int kAttnChunk = 64;
// The attn_chunk of sessions taking spans of up to max_span rows (0 to 8192, above Gemma 4's 1120
// soft tokens of an image), or an error naming a value out of range.
Status attn_chunk_for(int max_span, int* attn_chunk);

struct KvCacheOptions {
  int max_ctx = 0;      // positions a session may hold; 0: the model's n_ctx_train
  int attn_chunk = kAttnChunk;  // queries attended per step (sizes the sliding rings)
  GgmlType k_type = GgmlType::F16;  // F16, Q8_0 or Q4_0 (kv_type_supported)
  GgmlType v_type = GgmlType::F16;
};

// A cache type by llama.cpp's name ("f16", "q8_0", "q4_0"); any other name is refused naming it
// and the supported ones. `which` ("K" or "V") goes into the message.
Status parse_kv_type(const std::string& name, const char* which, GgmlType* out);
const char* kv_type_name(GgmlType type);  // "f16", "q8_0" or "q4_0"

// llama.cpp's Hadamard rotation with a quantized cache (llama_kv_cache: attn_rot_k, attn_rot_v):
// the blocks a layer's Q and K (k), and its V and attention output (v), are rotated in; 0: none.
struct KvRotation {
  int k = 0, v = 0;
};
// On for a quantized K (V) type when the layers of il's kind holding a cache (sliding or global:
// llama.cpp keeps one cache for each) share one head dim D, and layer 0's head dim is a multiple
// of 64 (llama_hparams::n_embd_head_k() without a layer is layer 0's). K's block is the largest
// power of two dividing D, V's 64. Where layer 0's head dim is a multiple of 64 and D is not,
// llama.cpp's blocks would straddle heads: refused naming the layer.
Status kv_rotation(const ModelConfig& c, int il, GgmlType k_type, GgmlType v_type, KvRotation* out);

// One source layer's K and V rows of positions [pos0, pos0 + n) exactly as its cache holds them
// (after the norms, RoPE and any rotation, in the cache's types): per position K [n_head_kv] rows,
// then V [n_head_kv] rows.
struct KvRows {
  int layer = 0;
  int pos0 = 0;
  int n = 0;
  std::vector<uint8_t> bytes;  // [n, n_head_kv · (kv_row_bytes(k_type, D) + kv_row_bytes(v_type, D))]
};

// The ring slots a forward call overwrites while they may still hold live keys, kept so that a
// call refused after it ran (a non-finite output) leaves the cache as it was. Only sliding
// layers need it: a global layer's slots past n_past hold nothing yet.
struct KvUndo {
  int pos0 = 0, n_slots = 0;
  std::vector<std::vector<uint8_t>> k, v;  // [layer of the range][n_head_kv, n_slots] rows
};

// The sliding rings' rows a continuation from position pos reads (the last n_swa - 1 positions
// before it, in each ring layer), copied: putting them back returns a session that has moved on
// to pos, whatever its rings hold since (llama.cpp's context checkpoints).
struct KvCheckpoint {
  int pos = 0;
  std::vector<KvRows> rings;

  uint64_t bytes() const;
};

class KvCache {
 public:
  // Allocates the whole cache up front (bytes() tells how much).
  static Status create(const ModelConfig& config, LayerRange range, const KvCacheOptions& options, KvCache* out);
  // What create() allocates, without allocating it: the host's memory estimate.
  static Status bytes_for(const ModelConfig& config, LayerRange range, const KvCacheOptions& options, uint64_t* bytes);

  int max_ctx() const { return max_ctx_; }
  int attn_chunk() const { return attn_chunk_; }
  LayerRange range() const { return range_; }
  GgmlType k_type() const { return k_type_; }
  GgmlType v_type() const { return v_type_; }
  // The rotation of the queries and keys attending over layer il's cache (one it holds).
  KvRotation rotation(int il) const { return layer(il).rotation; }
  uint64_t bytes() const;
  // FNV-1a 64-bit over every byte of K and V held, in layer order (lf_session_kv_digest).
  uint64_t digest() const;
  // Bytes of one position's K and V rows of layer il (KvRows).
  uint64_t row_bytes(int il) const;

  // k, v [head_dim] of KV head kv_head of layer il at position pos -> slot pos % capacity, in the
  // cache's types (quantized as ggml's CPU set_rows does: quantize_row_q8_0_x86, quantize_row_q4_0_ref).
  // Each head has its own slots, so workers owning different heads never share a cache line.
  void store(int il, int kv_head, int pos, const float* k, const float* v);
  // KV head kv_head of layer il as the attention op reads it, once positions < end_pos are stored.
  KvView view(int il, int kv_head, int end_pos) const;
  // Whether the cache holds layer il's K/V rows of that shape (a session of another model, or a
  // node without the layer, does not).
  bool holds(int il, int n_head_kv, int head_dim) const;

  // The source layers before range().begin this cache mirrors (kv_layers_mirrored).
  const std::vector<int>& mirrored() const { return mirrored_; }
  // Positions [rows.pos0, rows.pos0 + rows.n) of layer rows.layer (one the cache holds) from
  // shipped rows, and the other way round; the sizes were checked by the caller.
  void store_rows(const KvRows& rows);
  // The first position (from 0) of rows of the right size with a non-finite f16 value or block
  // scale, -1 when there is none.
  int first_non_finite(const KvRows& rows) const;
  void read_rows(int il, int pos0, int n, KvRows* out) const;

  // The shortest length a session of n_past positions can be cut back to (Session::truncate)
  // with every key its next queries read still cached: a sliding ring of C slots holds positions
  // [n_past - C, n_past) once it has wrapped, and a query at position p reads keys from
  // p - n_swa + 1 on. 0 where no ring has wrapped.
  int shortest_cut(int n_past) const;

  // The checkpoint of a session of n_past positions, and back to it (the caller sets n_past).
  void save_checkpoint(int n_past, KvCheckpoint* out) const;
  void restore_checkpoint(const KvCheckpoint& checkpoint);

  // What storing positions [pos0, pos0 + n) will overwrite, to put back with restore().
  void save_overwritten(int pos0, int n, KvUndo* undo) const;
  void restore(const KvUndo& undo);

 private:
  struct LayerKv {
    int capacity = 0;
    int n_head_kv = 0, head_dim = 0;
    bool sliding = false;
    size_t k_row = 0, v_row = 0;  // bytes of one head's row
    KvRotation rotation;
    std::vector<uint8_t> k, v;    // [n_head_kv, capacity] rows
  };
  // Calls copy(row index in the layer's k/v, row index in the undo's) for undo slot j of every
  // KV head: ring slot (pos0 + j) % capacity.
  template <typename Copy>
  static void for_each_slot(const LayerKv& kv, const KvUndo& undo, Copy copy) {
    for (size_t h = 0; h < static_cast<size_t>(kv.n_head_kv); ++h) {
      for (int j = 0; j < undo.n_slots; ++j) {
        const size_t slot = static_cast<size_t>((undo.pos0 + j) % kv.capacity);
        copy(h * kv.capacity + slot, h * undo.n_slots + j);
      }
    }
  }

  const LayerKv& layer(int il) const { return layers_[il - first_]; }
  LayerKv& layer(int il) { return layers_[il - first_]; }

  LayerRange range_;
  int first_ = 0;  // the lowest layer held: range_.begin, or the first mirrored layer
  std::vector<int> mirrored_;
  int max_ctx_ = 0;
  int attn_chunk_ = 0;
  int n_swa_ = 0;
  GgmlType k_type_ = GgmlType::F16, v_type_ = GgmlType::F16;
  std::vector<LayerKv> layers_;  // [range.end - first_]: layers before range.begin not mirrored hold nothing
};

}  // namespace lf
