#include "model/session.h"

#include <algorithm>
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

uint64_t Session::bytes() const {
  uint64_t total = kv.bytes();
  for (const KvCheckpoint& checkpoint : checkpoints_) total += checkpoint.bytes();
  return total;
}

Status Session::checkpoint(int max_count) {
  if (max_count < 1) {
    return Status(Code::invalid_argument, "a checkpoint needs room for at least 1, not " + std::to_string(max_count));
  }
  if (!checkpoints_.empty() && checkpoints_.back().pos == n_past_) return Status();
  while (static_cast<int>(checkpoints_.size()) >= max_count) checkpoints_.erase(checkpoints_.begin());
  kv.save_checkpoint(n_past_, &checkpoints_.emplace_back());
  return Status();
}

Status Session::truncate(int n_past, int* reached) {
  if (n_past < 0 || n_past > n_past_) {
    return Status(Code::invalid_argument, "cannot cut a session of " + std::to_string(n_past_) + " positions to " +
                                              std::to_string(n_past) + ": the length must be in [0, " +
                                              std::to_string(n_past_) + "]");
  }
  int to = n_past;
  const int shortest = kv.shortest_cut(n_past_);
  if (n_past < shortest) {
    const auto after = std::upper_bound(checkpoints_.begin(), checkpoints_.end(), n_past,
                                        [](int pos, const KvCheckpoint& c) { return pos < c.pos; });
    if (reached == nullptr || after == checkpoints_.begin()) {
      return Status(Code::failed_precondition,
                    "cannot cut a session of " + std::to_string(n_past_) + " positions to " + std::to_string(n_past) +
                        ": a sliding layer's ring no longer holds the keys a continuation from there reads "
                        "(the shortest cut is to " + std::to_string(shortest) + "; once a ring has wrapped, at most "
                        "attn_chunk = " + std::to_string(kv.attn_chunk()) + " positions can be cut)" +
                        (reached == nullptr ? "" : ", and no checkpoint is at or before " + std::to_string(n_past)));
    }
    kv.restore_checkpoint(*(after - 1));
    to = (after - 1)->pos;
  }
  checkpoints_.erase(std::upper_bound(checkpoints_.begin(), checkpoints_.end(), to,
                                      [](int pos, const KvCheckpoint& c) { return pos < c.pos; }),
                     checkpoints_.end());
  n_past_ = to;
  if (reached != nullptr) *reached = to;
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
