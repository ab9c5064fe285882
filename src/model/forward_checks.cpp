#include "model/forward_checks.h"

#include <algorithm>
#include <string>
#include <vector>

#include "model/per_layer_embd.h"
#include "quant/finite_check.h"

namespace lf {
namespace {

// The session's per-layer inputs for this call (per_layer_embd.h): exactly the node's layers'
// for n tokens when the model has them, none otherwise.
Status check_per_layer_inputs(const Model& m, const Session& s, int n) {
  const uint64_t needed = per_layer_input_floats(m.config, m.range.begin, m.range.end, n);
  if (s.per_layer_in.size() != needed) {
    return Status(Code::invalid_argument,
                  "the session holds " + std::to_string(s.per_layer_in.size()) +
                      " per-layer input floats, expected layers x n x n_embd_per_layer = " + std::to_string(needed) +
                      (needed > 0 ? " (set them before each forward of a model with per-layer embeddings)" : ""));
  }
  return check_finite_rows(s.per_layer_in, std::max(1, m.config.n_embd_per_layer), "per-layer input");
}

// The session's shipped K/V rows for this call: one KvRows per layer its cache mirrors, each of
// positions [start_pos, start_pos + n), of the source's size, finite.
Status check_kv_rows(const Model& m, const Session& s, int start_pos, int n) {
  const std::vector<int>& mirrored = s.kv.mirrored();
  const std::string node = "layers [" + std::to_string(m.range.begin) + ", " + std::to_string(m.range.end) + ")";
  if (mirrored.empty() && !s.kv_rows_in.empty()) {
    return Status(Code::invalid_argument, "K/V rows of layer " + std::to_string(s.kv_rows_in.front().layer) +
                                              " were given, but " + node + " read no other node's KV cache");
  }
  for (const KvRows& rows : s.kv_rows_in) {
    if (std::find(mirrored.begin(), mirrored.end(), rows.layer) == mirrored.end()) {
      return Status(Code::invalid_argument, "K/V rows of layer " + std::to_string(rows.layer) + " were given, but " + node +
                                                " read no cache of that layer from another node");
    }
  }
  for (int il : mirrored) {
    const std::string which = "layer " + std::to_string(il) + "'s K/V rows";
    const auto rows = std::find_if(s.kv_rows_in.begin(), s.kv_rows_in.end(), [il](const KvRows& r) { return r.layer == il; });
    if (rows == s.kv_rows_in.end()) {
      return Status(Code::invalid_argument, which + " are missing: shared-KV layers of " + node +
                                                " attend over its cache, which the node of layer " + std::to_string(il) +
                                                " hands out with each forward");
    }
    if (rows->pos0 != start_pos || rows->n != n) {
      return Status(Code::failed_precondition,
                    which + " are for positions [" + std::to_string(rows->pos0) + ", " + std::to_string(rows->pos0 + rows->n) +
                        "), but the call runs positions [" + std::to_string(start_pos) + ", " + std::to_string(start_pos + n) + ")");
    }
    const uint64_t expected = static_cast<uint64_t>(n) * s.kv.row_bytes(il);
    if (rows->bytes.size() != expected) {
      return Status(Code::invalid_argument, which + " hold " + std::to_string(rows->bytes.size()) +
                                                " bytes, expected n x n_head_kv x (K row + V row) = " + std::to_string(expected) +
                                                " (K " + kv_type_name(s.kv.k_type()) + ", V " + kv_type_name(s.kv.v_type()) + ")");
    }
    const int bad = s.kv.first_non_finite(*rows);
    if (bad >= 0) {
      return Status(Code::invalid_argument, which + " hold a non-finite value at position " + std::to_string(rows->pos0 + bad));
    }
  }
  return Status();
}

}  // namespace

Status validate_entry(const Model& m, const BatchEntry& e, std::span<const float> in) {
  const Session& s = *e.session;
  if (s.range().begin != m.range.begin || s.range().end != m.range.end) {
    return Status(Code::invalid_argument, "session was created for another layer range");
  }
  if (s.approx.truncated_attention && (s.kv.k_type() != GgmlType::F16 || s.kv.v_type() != GgmlType::F16)) {
    return Status(Code::invalid_argument, "truncated attention runs over an f16 KV cache only; this session's is K " +
                                              std::string(kv_type_name(s.kv.k_type())) + ", V " + kv_type_name(s.kv.v_type()));
  }
  if (e.start_pos != s.n_past()) {
    return Status(Code::failed_precondition, "start_pos " + std::to_string(e.start_pos) +
                                                 " does not match the session's n_past " + std::to_string(s.n_past()));
  }
  if (static_cast<int64_t>(e.start_pos) + e.n > s.max_ctx()) {
    return Status(Code::resource_exhausted, "context overflow: " + std::to_string(e.start_pos) + " + " +
                                                std::to_string(e.n) + " positions exceed max_ctx " + std::to_string(s.max_ctx()));
  }
  if (s.approx.top_k_ffn_on()) {
    for (int il = m.range.begin; il < m.range.end; ++il) {
      if (m.config.layers[il].moe) {
        return Status(Code::unsupported, "the top-K gate FFN is not supported on mixture-of-experts layers (layer " +
                                             std::to_string(il) + " routes to experts)");
      }
    }
  }
  if (s.span_in && e.n > s.kv.attn_chunk()) {
    return Status(Code::invalid_argument, "a media span of " + std::to_string(e.n) + " rows is longer than the " +
                                              std::to_string(s.kv.attn_chunk()) +
                                              " this node's sessions hold at once: open the node with a larger max span");
  }
  LF_RETURN_IF_ERROR(check_norm_input_rows(in, m.config.n_embd, "input"));
  LF_RETURN_IF_ERROR(check_kv_rows(m, s, e.start_pos, e.n));
  return check_per_layer_inputs(m, s, e.n);
}

Status validate_batch(const Model& m, std::span<const BatchEntry> entries, std::span<const float> in,
                      std::span<float> out) {
  if (entries.empty()) return Status(Code::invalid_argument, "a forward needs at least one session");
  uint64_t rows_in = 0, rows_out = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const BatchEntry& e = entries[i];
    const std::string which = entries.size() > 1 ? "entry " + std::to_string(i) + ": " : "";
    if (!e.session) return Status(Code::invalid_argument, which + "no session");
    if (e.n <= 0) return Status(Code::invalid_argument, which + "n must be positive, got " + std::to_string(e.n));
    for (size_t j = 0; j < i; ++j) {
      if (entries[j].session == e.session) {
        return Status(Code::invalid_argument, which + "the session of entry " + std::to_string(j) +
                                                  " again: a session runs once per forward call");
      }
    }
    rows_in += static_cast<uint64_t>(e.n);
    rows_out += static_cast<uint64_t>(out_rows(e));
  }
  const uint64_t n_embd = static_cast<uint64_t>(m.config.n_embd);
  if (in.size() != rows_in * n_embd) {
    return Status(Code::invalid_argument, "input has " + std::to_string(in.size()) + " floats, expected n * n_embd = " +
                                              std::to_string(rows_in * n_embd));
  }
  if (out.size() != rows_out * n_embd) {
    return Status(Code::invalid_argument, "output has room for " + std::to_string(out.size()) + " floats, expected " +
                                              std::to_string(rows_out * n_embd));
  }
  return Status();
}

}  // namespace lf
