#include "model/session.h"

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

ApproxStats ForwardReport::approx_stats() const {
  ApproxStats total = ffn_approx;
  for (const std::vector<ApproxStats>& layer : attention_approx) {
    for (const ApproxStats& head : layer) total.merge(head);
  }
  return total;
}

}  // namespace lf
