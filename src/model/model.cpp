#include "model/model.h"

#include <cstdint>
#include <string>
#include <vector>

#include "layout/feature_major.h"
#include "kernels/gemm.h"
#include "layout/row_strips.h"
#include "quant/finite_check.h"
#include "model/scratch.h"
#include "model/tensor_table.h"

namespace lf {
namespace {

class Binder {
 public:
  Binder(const GgufFile& file, const TensorLocator& locate) : file_(file), locate_(locate) {}

  // Optional tensors that are absent leave the view empty; shapes and types were checked by
  // load_model_config.
  Status bind(const std::string& name, bool required, WeightView* out) const {
    const GgufTensorInfo* info = file_.tensor(name);
    if (!info) {
      if (required) return Status(Code::not_found, "missing required tensor '" + name + "'");
      return Status();
    }
    const uint8_t* data = locate_(*info);
    if (!data) return Status(Code::not_found, "tensor '" + name + "' is needed by this node but not loaded");
    WeightView view;
    LF_RETURN_IF_ERROR(describe(*info, &view));
    if (info->type == GgmlType::F32 && reinterpret_cast<uintptr_t>(data) % alignof(float) != 0) {
      return Status(Code::invalid_argument, "F32 tensor '" + name + "' is not 4-byte aligned in memory");
    }
    // Non-finite numbers would make every output NaN: refused here, by name, not served.
    LF_RETURN_IF_ERROR(check_finite_tensor(name, info->type, data, view.n_in, view.n_out));
    view.data = data;
    *out = view;
    return Status();
  }

  // A required tensor's type and shape without its bytes, which the host never places (they
  // come by rows, per call): a view with data nullptr.
  Status bind_shape(const std::string& name, WeightView* out) const {
    const GgufTensorInfo* info = file_.tensor(name);
    if (!info) return Status(Code::not_found, "missing required tensor '" + name + "'");
    return describe(*info, out);
  }

 private:
  // A 3-D expert tensor is its ne[1]·ne[2] rows.
  static Status describe(const GgufTensorInfo& info, WeightView* out) {
    TypeTraits traits;
    if (!type_traits(static_cast<uint32_t>(info.type), &traits)) {
      return Status(Code::unsupported, "tensor '" + info.name + "' has an unknown type");
    }
    out->type = info.type;
    out->n_in = info.ne[0];
    out->n_out = info.ne[1] * info.ne[2];
    out->row_bytes = lf::row_bytes(traits, static_cast<uint64_t>(info.ne[0]));
    return Status();
  }

  const GgufFile& file_;
  const TensorLocator& locate_;
};

Status bind_moe(const Binder& b, const ModelConfig& c, int il, LayerWeights* w) {
  auto name = [il](const char* n, const char* suffix = "weight") { return layer_tensor_name(il, n, suffix); };
  LF_RETURN_IF_ERROR(b.bind(name("ffn_gate_inp"), true, &w->ffn_gate_inp));
  LF_RETURN_IF_ERROR(b.bind(name("ffn_gate_inp", "scale"), true, &w->ffn_gate_inp_scale));
  LF_RETURN_IF_ERROR(b.bind(name("pre_ffw_norm_2"), true, &w->pre_ffw_norm_2));
  LF_RETURN_IF_ERROR(b.bind(name("post_ffw_norm_1"), true, &w->post_ffw_norm_1));
  LF_RETURN_IF_ERROR(b.bind(name("post_ffw_norm_2"), true, &w->post_ffw_norm_2));
  LF_RETURN_IF_ERROR(b.bind(name("ffn_gate_up_exps"), c.fused_gate_up, &w->ffn_gate_up_exps));
  LF_RETURN_IF_ERROR(b.bind(name("ffn_gate_exps"), !c.fused_gate_up, &w->ffn_gate_exps));
  LF_RETURN_IF_ERROR(b.bind(name("ffn_up_exps"), !c.fused_gate_up, &w->ffn_up_exps));
  LF_RETURN_IF_ERROR(b.bind(name("ffn_down_exps"), true, &w->ffn_down_exps));
  return b.bind(name("ffn_down_exps", "scale"), false, &w->ffn_down_exps_scale);
}

Status bind_layer(const Binder& b, const ModelConfig& c, int il, LayerWeights* w) {
  auto name = [il](const char* n) { return layer_tensor_name(il, n); };
  LF_RETURN_IF_ERROR(b.bind(name("attn_norm"), true, &w->attn_norm));
  LF_RETURN_IF_ERROR(b.bind(name("attn_q"), true, &w->attn_q));
  // A shared-KV layer's own K/V weights, if the file has them, are never read.
  const bool own_kv = !c.layers[il].shares_kv;
  if (own_kv) LF_RETURN_IF_ERROR(b.bind(name("attn_k"), true, &w->attn_k));
  if (own_kv) LF_RETURN_IF_ERROR(b.bind(name("attn_v"), c.layers[il].has_v, &w->attn_v));
  LF_RETURN_IF_ERROR(b.bind(name("attn_output"), true, &w->attn_output));
  LF_RETURN_IF_ERROR(b.bind(name("attn_q_norm"), true, &w->attn_q_norm));
  if (own_kv) LF_RETURN_IF_ERROR(b.bind(name("attn_k_norm"), true, &w->attn_k_norm));
  LF_RETURN_IF_ERROR(b.bind(name("post_attention_norm"), true, &w->post_attention_norm));
  LF_RETURN_IF_ERROR(b.bind(name("ffn_norm"), true, &w->ffn_norm));
  LF_RETURN_IF_ERROR(b.bind(name("ffn_gate"), true, &w->ffn_gate));
  LF_RETURN_IF_ERROR(b.bind(name("ffn_up"), true, &w->ffn_up));
  LF_RETURN_IF_ERROR(b.bind(name("ffn_down"), true, &w->ffn_down));
  LF_RETURN_IF_ERROR(b.bind(name("post_ffw_norm"), true, &w->post_ffw_norm));
  LF_RETURN_IF_ERROR(b.bind(name("layer_output_scale"), c.layers[il].has_output_scale, &w->layer_output_scale));
  if (c.n_embd_per_layer > 0) {
    LF_RETURN_IF_ERROR(b.bind(name("inp_gate"), true, &w->inp_gate));
    LF_RETURN_IF_ERROR(b.bind(name("proj"), true, &w->proj));
    LF_RETURN_IF_ERROR(b.bind(name("post_norm"), true, &w->post_norm));
  }
  if (c.layers[il].moe) LF_RETURN_IF_ERROR(bind_moe(b, c, il, w));
  return Status();
}

// W's bytes rewritten in place by permute(src, dst), through scratch (W's bytes, reused from
// one call to the next)
template <typename Permute>
void relayout(const WeightView& W, std::vector<uint8_t>* scratch, Permute permute) {
  const uint64_t bytes = static_cast<uint64_t>(W.n_out) * W.row_bytes;
  scratch->assign(W.data, W.data + bytes);
  // The host promised writable bytes that belong to this model (ModelLoadOptions).
  permute(scratch->data(), const_cast<uint8_t*>(W.data));
}

// W [n_out, n_in] in the file's layout -> feature-major
void relayout_features(WeightView* W, std::vector<uint8_t>* scratch) {
  relayout(*W, scratch, [&](const uint8_t* src, uint8_t* dst) { to_feature_major(*W, src, dst); });
  W->layout = WeightLayout::feature_major;
}

// W (passing can_row_strips) in the file's layout -> row strips. A strip is a permutation of its
// own 4 rows' bytes, so W is rewritten strip by strip through a scratch of one strip.
void relayout_in_strips(const WeightView& W, std::vector<uint8_t>* scratch) {
  WeightView strip = W;
  strip.n_out = kStripRows;
  for (int64_t s = 0; s < W.n_out / kStripRows; ++s) {
    strip.data = W.data + static_cast<uint64_t>(s) * kStripRows * W.row_bytes;
    relayout(strip, scratch, [&](const uint8_t* src, uint8_t* dst) { to_row_strips(strip, src, dst); });
  }
}

// W in the file's layout -> row strips, where this build's kernel reads its type so
void relayout_strips(WeightView* W, std::vector<uint8_t>* scratch) {
  if (!gemm_uses_row_strips(W->type) || !can_row_strips(*W)) return;
  relayout_in_strips(*W, scratch);
  W->layout = WeightLayout::row_strips;
}

// A stacked expert tensor of n_expert matrices -> each matrix in row strips, where this build's
// kernel reads its type so and every expert's matrix can be (else all stay in the file's layout).
void relayout_expert_strips(int n_expert, WeightView* W, std::vector<uint8_t>* scratch) {
  if (!W->present() || !gemm_uses_row_strips(W->type)) return;
  const int64_t rows = W->n_out / n_expert;
  for (int e = 0; e < n_expert; ++e) {
    if (!can_row_strips(expert_rows(*W, e, rows))) return;
  }
  for (int e = 0; e < n_expert; ++e) relayout_in_strips(expert_rows(*W, e, rows), scratch);
  W->layout = WeightLayout::row_strips;
}

}  // namespace

Status load_model(const GgufFile& file, const TensorLocator& locate, const ModelLoadOptions& options, Model* out) {
  ModelConfig config;
  LF_RETURN_IF_ERROR(load_model_config(file, &config));
  return load_model_with_config(file, locate, std::move(config), options, out);
}

Status locate_tensor(const GgufFile& file, const TensorLocator& locate, const std::string& name, WeightView* out) {
  return Binder(file, locate).bind(name, true, out);
}

void relayout_for_kernel(WeightView* W) {
  std::vector<uint8_t> scratch;
  relayout_strips(W, &scratch);
}

Status load_model_with_config(const GgufFile& file, const TensorLocator& locate, ModelConfig config,
                              const ModelLoadOptions& options, Model* out) {
  Model m;
  m.config = std::move(config);
  const ModelConfig& c = m.config;
  const LayerRange r = options.range;
  if (r.begin < 0 || r.end > c.n_layer || r.begin > r.end) {
    return Status(Code::invalid_argument, "layer range [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                                              ") is not within [0, " + std::to_string(c.n_layer) + ")");
  }
  m.range = r;
  m.has_embedding = options.with_embedding;
  m.has_head = options.with_head;
  m.vocab_begin = options.vocab_begin;
  m.vocab_end = options.vocab_end < 0 ? c.n_vocab : options.vocab_end;

  const Binder b(file, locate);
  if (options.with_embedding) LF_RETURN_IF_ERROR(b.bind("token_embd.weight", true, &m.token_embd));
  if (options.with_embedding && c.n_embd_per_layer > 0) {
    m.per_layer_rows_from_host = options.per_layer_rows_from_host;
    LF_RETURN_IF_ERROR(options.per_layer_rows_from_host
                           ? b.bind_shape("per_layer_token_embd.weight", &m.per_layer_token_embd)
                           : b.bind("per_layer_token_embd.weight", true, &m.per_layer_token_embd));
    LF_RETURN_IF_ERROR(b.bind("per_layer_model_proj.weight", true, &m.per_layer_model_proj));
    LF_RETURN_IF_ERROR(b.bind("per_layer_proj_norm.weight", true, &m.per_layer_proj_norm));
  }
  if (options.with_head) {
    LF_RETURN_IF_ERROR(b.bind("output_norm.weight", true, &m.output_norm));
    LF_RETURN_IF_ERROR(b.bind(c.tied_output ? "token_embd.weight" : "output.weight", true, &m.output));
  }
  bool needs_freq_factors = false;
  for (int il = r.begin; il < r.end; ++il) needs_freq_factors = needs_freq_factors || c.layers[il].use_freq_factors;
  if (needs_freq_factors) LF_RETURN_IF_ERROR(b.bind("rope_freqs.weight", true, &m.rope_freqs));

  m.layers.resize(r.end - r.begin);
  for (int il = r.begin; il < r.end; ++il) LF_RETURN_IF_ERROR(bind_layer(b, c, il, &m.layers[il - r.begin]));
  m.shards.resize(m.layers.size());
  for (int il = r.begin; il < r.end; ++il) {
    const LayerWeights& w = m.layer(il);
    LF_RETURN_IF_ERROR(plan_layer_shards(c.layers[il], w.attn_output.type, w.ffn_down.type, &m.shards[il - r.begin]));
  }
  LF_RETURN_IF_ERROR(set_threads(&m, options.n_threads));
  // Last, once nothing can fail: a refused load leaves the host's bytes as they were.
  if (options.relayout_in_place) {
    std::vector<uint8_t> scratch;
    for (size_t i = 0; i < m.layers.size(); ++i) {
      WeightView& ffn_down = m.layers[i].ffn_down;
      if (options.ffn_down_feature_major && can_feature_major(ffn_down)) relayout_features(&ffn_down, &scratch);
      for (WeightView* W : m.layers[i].matmuls()) {
        if (W->present()) relayout_strips(W, &scratch);
      }
      LayerWeights& w = m.layers[i];
      for (WeightView* W : {&w.ffn_gate_up_exps, &w.ffn_gate_exps, &w.ffn_up_exps, &w.ffn_down_exps}) {
        relayout_expert_strips(c.n_expert, W, &scratch);
      }
    }
    // The head streams its whole matrix for every token, as a layer does. Tied, the same bytes
    // are the token embedding, whose lookups then read rows out of the strips.
    if (m.output.present()) {
      relayout_strips(&m.output, &scratch);
      if (m.token_embd.data == m.output.data) m.token_embd.layout = m.output.layout;
    }
  }
  *out = std::move(m);
  return Status();
}

Status set_threads(Model* model, int n_threads) {
  if (n_threads < 1 || n_threads > kMaxThreads) {
    return Status(Code::invalid_argument, "thread count " + std::to_string(n_threads) + " is outside [1, " +
                                              std::to_string(kMaxThreads) + "]");
  }
  // The old pool finishes a running job before its workers stop (~ThreadPool).
  model->pool.reset();
  model->pool = std::make_shared<ThreadPool>(n_threads);
  model->spare_scratch = std::make_shared<ScratchSpare>();
  return Status();
}

}  // namespace lf
