#include "model/session.h"

#include <string>

namespace lf {

Status Session::create(const Model& model, const KvCacheOptions& options, Session* out) {
  Session s;
  LF_RETURN_IF_ERROR(KvCache::create(model.config, model.range, options, &s.kv));
  // Sized once: each forward's workers reset and fill their own heads' statistics in place.
  for (int il = model.range.begin; il < model.range.end; ++il) {
    s.last.attention_approx.emplace_back(static_cast<size_t>(model.config.layers[il].n_head_kv));
  }
  *out = std::move(s);
  return Status();
}

Status Session::truncate(int n_past) {
  if (n_past < 0 || n_past > n_past_) {
    return Status(Code::invalid_argument, "cannot cut a session of " + std::to_string(n_past_) + " positions to " +
                                              std::to_string(n_past) + ": the length must be in [0, " +
                                              std::to_string(n_past_) + "]");
  }
  const int shortest = kv.shortest_cut(n_past_);
  if (n_past < shortest) {
    return Status(Code::failed_precondition,
                  "cannot cut a session of " + std::to_string(n_past_) + " positions to " + std::to_string(n_past) +
                      ": a sliding layer's ring no longer holds the keys a continuation from there reads "
                      "(the shortest cut is to " + std::to_string(shortest) + "; once a ring has wrapped, at most "
                      "attn_chunk = " + std::to_string(kv.attn_chunk()) + " positions can be cut)");
  }
  n_past_ = n_past;
  return Status();
}

ApproxStats ForwardReport::approx_stats() const {
  ApproxStats total = ffn_approx;
  for (const std::vector<ApproxStats>& layer : attention_approx) {
    for (const ApproxStats& head : layer) total.merge(head);
  }
  return total;
}

}  // namespace lf
