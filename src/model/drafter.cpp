// Loading a drafter beside its target, and one draft step: the input projection, the drafter's
// layers (model/drafter_layer.cpp), the norm and the projection to the next hidden state on the
// drafter's pool, then its LM head (model/head.cpp).
#include "model/drafter.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "layout/row_strips.h"
#include "model/batch_rows.h"
#include "model/drafter_layer.h"
#include "model/forward.h"
#include "model/kv_shipping.h"
#include "model/run_layers.h"
#include "model/scratch.h"
#include "ops/ops.h"
#include "quant/finite_check.h"
#include "quant/quant.h"

namespace lf {
namespace {

std::string describe(const LayerConfig& l) {
  return std::string(l.sliding ? "sliding" : "global") + ", head dim " + std::to_string(l.head_dim) + ", " +
         std::to_string(l.n_head_kv) + " KV heads";
}

// llama.cpp's sharing rule: a sliding drafter layer reads the target's layer n_layer - 2, a
// global one layer n_layer - 1, through the target's own shared-KV mapping. That layer must be
// of the drafter layer's kind and K/V shape, and its cache on this node.
Status assign_target_layers(const Model& target, ModelConfig* c) {
  const ModelConfig& t = target.config;
  const std::vector<int> mirrored = kv_layers_mirrored(t, target.range.begin, target.range.end);
  for (int il = 0; il < c->n_layer; ++il) {
    LayerConfig& l = c->layers[il];
    const int read = t.n_layer - (l.sliding ? 2 : 1);
    const std::string where = "drafter layer " + std::to_string(il) + " (" + describe(l) + ") reads target layer " +
                              std::to_string(read);
    if (read < 0) return Status(Code::unsupported, where + ", which the " + std::to_string(t.n_layer) + "-layer target lacks");
    const LayerConfig& src = t.layers[read];
    if (src.sliding != l.sliding || src.head_dim != l.head_dim || src.n_head_kv != l.n_head_kv) {
      return Status(Code::invalid_argument, where + " (" + describe(src) + "): the drafter is for another target");
    }
    l.kv_layer = src.kv_layer;
    const bool held = (l.kv_layer >= target.range.begin && l.kv_layer < target.range.end) ||
                      std::find(mirrored.begin(), mirrored.end(), l.kv_layer) != mirrored.end();
    if (!held) {
      return Status(Code::failed_precondition, where + ", whose cache (layer " + std::to_string(l.kv_layer) +
                                                   ") this node does not hold");
    }
  }
  return Status();
}

Status check_target(const ModelConfig& c, int n_embd_backbone, const Model& target) {
  const ModelConfig& t = target.config;
  if (t.arch != Arch::gemma4) return Status(Code::invalid_argument, "a gemma4-assistant drafter needs a gemma4 target");
  if (n_embd_backbone != t.n_embd) {
    return Status(Code::invalid_argument, "the drafter is for a target of width " + std::to_string(n_embd_backbone) +
                                              " (embedding_length_out), the target's is " + std::to_string(t.n_embd));
  }
  if (c.n_vocab != t.n_vocab) {
    return Status(Code::invalid_argument, "the drafter's vocabulary has " + std::to_string(c.n_vocab) +
                                              " tokens, the target's " + std::to_string(t.n_vocab));
  }
  if (c.n_swa != t.n_swa) {
    return Status(Code::invalid_argument, "the drafter's sliding window is " + std::to_string(c.n_swa) +
                                              ", the target's " + std::to_string(t.n_swa));
  }
  if (!target.has_head || !t.tied_output) {
    return Status(Code::failed_precondition,
                  "the drafter embeds with the target's token embedding: load it beside the node holding the "
                  "target's head tied to token_embd");
  }
  return Status();
}

// The buffers and shapes of one step, shared by the pool's workers.
struct DraftCall {
  const Drafter& d;
  const KvCache& target_kv;
  int pos;
  std::vector<uint8_t> xc_in;  // [target embedding; h] converted for the pre-projection
  Session rows_owner;          // the step's one row's segment owner: no cache, no debug hook
  BatchRows rows;
  Scratch scratch;
  std::vector<float> normed;   // [n_embd] the output-normed last residual
  std::vector<uint8_t> xc_out; // normed, converted for the post-projection
  float* h_next;

  DraftCall(const Drafter& drafter, const KvCache& kv, int n_past, float* out)
      : d(drafter), target_kv(kv), pos(n_past), scratch(scratch_shape(drafter.model, 1, false), drafter.model.pool->size()),
        normed(drafter.model.config.n_embd), h_next(out) {
    rows.segments.push_back(Segment{&rows_owner, n_past, 1});
    rows.lay_out();
  }
};

// Rows [0, n_out) of W · Xc shared out by rows (each a whole dot product, so the bytes do not
// depend on the thread count); ends on a barrier.
void shared_rows(ThreadPool& pool, int worker, const WeightView& W, const uint8_t* Xc, float* y) {
  const Share rows = share(W.n_out, worker, pool.size());
  if (rows.begin < rows.end) matmul_rows(W, Xc, 1, y, rows.begin, rows.end);
  pool.barrier();
}

void run_draft(DraftCall& call, int worker) {
  const Model& m = call.d.model;
  Scratch& b = call.scratch;
  ThreadPool& pool = *m.pool;
  shared_rows(pool, worker, call.d.pre_projection, call.xc_in.data(), b.x.data());
  for (int il = 0; il < m.config.n_layer; ++il) {
    const LayerCall layer{m, b, pool, residual(b, il), residual(b, il + 1), worker, il, call.rows};
    run_drafter_layer(layer, call.target_kv, call.pos);  // ends on a barrier
  }
  if (worker == 0) {
    const ModelConfig& c = m.config;
    rmsnorm(residual(b, c.n_layer).data(), m.output_norm.f32(), c.n_embd, c.norm_eps, call.normed.data());
    b.errors[0] = convert_activations(call.d.post_projection, call.normed.data(), 1, &call.xc_out);
  }
  pool.barrier();
  if (b.errors[0].ok()) shared_rows(pool, worker, call.d.post_projection, call.xc_out.data(), call.h_next);
}

}  // namespace

Status load_drafter(const GgufFile& file, const TensorLocator& locate, const Model& target, int n_threads, Drafter* out,
                    bool relayout_in_place) {
  ModelConfig c;
  int n_embd_backbone = 0;
  LF_RETURN_IF_ERROR(load_assistant_config(file, &c, &n_embd_backbone));
  LF_RETURN_IF_ERROR(check_target(c, n_embd_backbone, target));
  LF_RETURN_IF_ERROR(assign_target_layers(target, &c));
  Drafter d;
  LF_RETURN_IF_ERROR(locate_tensor(file, locate, "nextn.pre_projection.weight", &d.pre_projection));
  LF_RETURN_IF_ERROR(locate_tensor(file, locate, "nextn.post_projection.weight", &d.post_projection));
  ModelLoadOptions options;
  options.range = {0, c.n_layer};
  options.with_head = true;
  options.n_threads = n_threads;
  options.relayout_in_place = relayout_in_place;
  // Last, once nothing can fail: a refused load leaves the host's bytes as they were.
  LF_RETURN_IF_ERROR(load_model_with_config(file, locate, std::move(c), options, &d.model));
  if (relayout_in_place) {
    relayout_for_kernel(&d.pre_projection);
    relayout_for_kernel(&d.post_projection);
  }
  d.n_embd_backbone = n_embd_backbone;
  d.target_embd = target.output;
  d.target_norm = target.output_norm;
  d.target_norm_eps = target.config.norm_eps;
  *out = std::move(d);
  return Status();
}

namespace {

// One draft step at pos (draft_step's, at any position draft_greedy allows).
Status step_at(const Drafter& d, const Session& target_session, int pos, int32_t token, const float* h, float* logits,
               float* h_next) {
  const ModelConfig& c = d.model.config;
  const int B = d.n_embd_backbone;
  if (!h || !logits || !h_next) return Status(Code::invalid_argument, "draft_step needs h, logits and h_next buffers");
  if (token < 0 || token >= c.n_vocab) {
    return Status(Code::invalid_argument, "draft token id " + std::to_string(token) + " is outside [0, " +
                                              std::to_string(c.n_vocab) + ")");
  }
  LF_RETURN_IF_ERROR(check_finite_rows({h, static_cast<size_t>(B)}, B, "the drafter's input hidden state"));
  if (pos < 1) return Status(Code::failed_precondition, "the target session holds no position to draft after");
  const KvCache& kv = target_session.kv;
  for (const LayerConfig& l : c.layers) {
    if (!kv.holds(l.kv_layer, l.n_head_kv, l.head_dim)) {
      return Status(Code::failed_precondition, "the session does not hold the target's layer " + std::to_string(l.kv_layer) +
                                                   " cache the drafter reads (" + describe(l) + "): not a session of its target");
    }
  }

  // [target token_embd[token] · sqrt(B); h], converted once for the pre-projection.
  std::vector<float> xh(2 * static_cast<size_t>(B));
  LF_RETURN_IF_ERROR(dequantize_weight_row(d.target_embd, token, xh.data()));
  const float scale = sqrtf(static_cast<float>(B));
  for (int j = 0; j < B; ++j) xh[j] *= scale;
  std::copy(h, h + B, xh.begin() + B);
  DraftCall call(d, kv, pos, h_next);
  LF_RETURN_IF_ERROR(convert_activations(d.pre_projection, xh.data(), 1, &call.xc_in));

  if (!d.model.pool->run([&call](int worker) { run_draft(call, worker); })) {
    return Status(Code::failed_precondition, kPoolBusy);
  }
  for (const Status& s : call.scratch.errors) LF_RETURN_IF_ERROR(s);
  const std::vector<float>& last = residual(call.scratch, c.n_layer);
  LF_RETURN_IF_ERROR(check_norm_input_rows({last.data(), static_cast<size_t>(c.n_embd)}, c.n_embd,
                                           "the drafter's last hidden state"));
  LF_RETURN_IF_ERROR(check_finite_rows({h_next, static_cast<size_t>(B)}, B, "the drafter's next hidden state"));
  return head(d.model, last.data(), 1, logits);
}

}  // namespace

Status draft_step(const Drafter& d, const Session& target_session, int32_t token, const float* h, float* logits,
                  float* h_next) {
  return step_at(d, target_session, target_session.n_past(), token, h, logits, h_next);
}

Status draft_greedy(const Drafter& d, const Session& target_session, int pos, int32_t token, const float* hidden,
                    int n_draft, int32_t* ids) {
  const int B = d.n_embd_backbone;
  if (!hidden || (n_draft > 0 && !ids)) return Status(Code::invalid_argument, "draft_greedy needs hidden and ids buffers");
  if (n_draft < 0) return Status(Code::invalid_argument, "draft count " + std::to_string(n_draft) + " is negative");
  const int n_past = target_session.n_past();
  const int shortest = target_session.kv.shortest_cut(n_past);
  if (pos > n_past || pos < shortest) {
    return Status(Code::invalid_argument, "draft position " + std::to_string(pos) + " is outside [" + std::to_string(shortest) +
                                              ", " + std::to_string(n_past) + "], the positions the session's cache can draft at");
  }
  LF_RETURN_IF_ERROR(check_norm_input_rows({hidden, static_cast<size_t>(B)}, B, "the target's hidden state"));
  std::vector<float> h(B), logits(d.model.config.n_vocab), h_next(B);
  rmsnorm(hidden, d.target_norm.f32(), B, d.target_norm_eps, h.data());
  for (int i = 0; i < n_draft; ++i) {
    LF_RETURN_IF_ERROR(step_at(d, target_session, pos, token, h.data(), logits.data(), h_next.data()));
    token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    ids[i] = token;
    h.swap(h_next);
  }
  return Status();
}

}  // namespace lf
