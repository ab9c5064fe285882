#include "mmproj_file.h"

#include "tensor_adder.h"

namespace lf::make_model {
namespace {

// Google's vision_config values as the converter reads them.
VisionConfig tower(int n_embd, int n_ff, int n_layer, int n_head, bool standardize) {
  VisionConfig c;
  c.n_embd = n_embd;
  c.n_ff = n_ff;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.head_dim = n_embd / n_head;
  c.patch_size = 16;
  c.pos_size = 10240;
  c.standardize = standardize;
  return c;
}

bool clipped_linears(const std::string& name) { return name != "31b"; }

}  // namespace

Status vision_config_for(const ModelConfig& target, const VisionShape& shape, VisionConfig* out) {
  std::string name = shape.tower;
  // E2B (1536) and E4B (2560) carry the small tower, the large models the wide one.
  if (name == "auto") name = target.n_embd_per_layer > 0 ? "e2b" : "31b";
  VisionConfig c;
  if (name == "e2b") {
    c = tower(768, 3072, 16, 12, false);
  } else if (name == "31b") {
    c = tower(1152, 4304, 27, 16, true);
  } else if (name == "tiny") {
    c = tower(64, 128, 2, 2, true);
    c.pos_size = 96;
  } else {
    return Status(Code::invalid_argument, "--vision-tower must be auto, e2b, 31b or tiny, got '" + shape.tower + "'");
  }
  if (shape.n_layer < 0 || shape.n_layer > 256) {
    return Status(Code::invalid_argument, "--vision-layers must be 1 to 256");
  }
  if (shape.n_layer > 0) c.n_layer = shape.n_layer;
  c.n_embd_text = target.n_embd;
  *out = c;
  return Status();
}

Status add_mmproj(const ModelConfig& target, const VisionShape& shape, const MakeSettings& settings, GgufWriter* w) {
  VisionConfig c;
  LF_RETURN_IF_ERROR(vision_config_for(target, shape, &c));
  const bool clipped = clipped_linears(shape.tower == "auto" ? (target.n_embd_per_layer > 0 ? "e2b" : "31b") : shape.tower);
  w->set_string("general.architecture", "clip");
  w->set_string("general.type", "mmproj");
  w->set_u32("general.file_type", shape.type == GgmlType::F32 ? 0 : 1);
  w->set_bool("clip.has_vision_encoder", true);
  w->set_string("clip.vision.projector_type", "gemma4v");
  w->set_u32("clip.vision.projection_dim", static_cast<uint32_t>(c.n_embd_text));
  w->set_u32("clip.vision.image_size", 224);  // the converter's placeholder: Gemma 4 sizes images itself
  w->set_u32("clip.vision.patch_size", static_cast<uint32_t>(c.patch_size));
  w->set_u32("clip.vision.embedding_length", static_cast<uint32_t>(c.n_embd));
  w->set_u32("clip.vision.feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w->set_u32("clip.vision.block_count", static_cast<uint32_t>(c.n_layer));
  w->set_u32("clip.vision.attention.head_count", static_cast<uint32_t>(c.n_head));
  w->set_f32("clip.vision.attention.layer_norm_epsilon", c.eps);
  w->set_array_f32("clip.vision.image_mean", {0.0f, 0.0f, 0.0f});
  w->set_array_f32("clip.vision.image_std", {1.0f, 1.0f, 1.0f});

  // Every weight its own function of (seed, name): not the target's under a shared name.
  MakeSettings s = settings;
  s.seed = mix64(settings.seed ^ fnv1a("mmproj"));
  s.type = shape.type;
  s.tensor_types.clear();
  TensorAdder t(s, *w);
  // The converter keeps the patch kernel in F16 (F32 in an all-F32 file): [p, p, 3, n_embd].
  const GgmlType kernel_type = shape.type == GgmlType::F32 ? GgmlType::F32 : GgmlType::F16;
  const int64_t p = c.patch_size;
  {
    const Stream stream(s.seed, "v.patch_embd.weight");
    const float stddev = 1.0f / std::sqrt(static_cast<float>(c.patch_dim()));
    const int64_t n = static_cast<int64_t>(c.patch_dim()) * c.n_embd;
    LF_RETURN_IF_ERROR(w->add_tensor("v.patch_embd.weight", kernel_type, {p, p, 3, c.n_embd}, [=](uint8_t* dst, uint64_t) {
      std::vector<float> row(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) row[i] = stddev * stream.normal(i);
      convert_row(kernel_type, row.data(), dst, n);
    }));
  }
  {
    const Stream stream(s.seed, "v.position_embd.weight");
    const int64_t n = 2 * static_cast<int64_t>(c.pos_size) * c.n_embd;
    LF_RETURN_IF_ERROR(w->add_tensor("v.position_embd.weight", GgmlType::F32, {c.n_embd, c.pos_size, 2}, [=](uint8_t* dst, uint64_t) {
      for (int64_t i = 0; i < n; ++i) {
        const float v = 0.5f * stream.normal(i);
        std::memcpy(dst + 4 * i, &v, 4);
      }
    }));
  }
  const auto linear = [&](const std::string& stem, int64_t n_in, int64_t n_out) -> Status {
    LF_RETURN_IF_ERROR(t.linear(stem + ".weight", n_in, n_out));
    return clipped ? t.clip_bounds(stem) : Status();
  };
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string b = "v.blk." + std::to_string(il) + ".";
    LF_RETURN_IF_ERROR(t.norm(b + "ln1.weight", c.n_embd));
    LF_RETURN_IF_ERROR(linear(b + "attn_q", c.n_embd, c.q_dim()));
    LF_RETURN_IF_ERROR(linear(b + "attn_k", c.n_embd, c.q_dim()));
    LF_RETURN_IF_ERROR(linear(b + "attn_v", c.n_embd, c.q_dim()));
    LF_RETURN_IF_ERROR(t.norm(b + "attn_q_norm.weight", c.head_dim));
    LF_RETURN_IF_ERROR(t.norm(b + "attn_k_norm.weight", c.head_dim));
    LF_RETURN_IF_ERROR(linear(b + "attn_out", c.q_dim(), c.n_embd));
    LF_RETURN_IF_ERROR(t.norm(b + "attn_post_norm.weight", c.n_embd));
    LF_RETURN_IF_ERROR(t.norm(b + "ln2.weight", c.n_embd));
    LF_RETURN_IF_ERROR(linear(b + "ffn_gate", c.n_embd, c.n_ff));
    LF_RETURN_IF_ERROR(linear(b + "ffn_up", c.n_embd, c.n_ff));
    LF_RETURN_IF_ERROR(linear(b + "ffn_down", c.n_ff, c.n_embd));
    LF_RETURN_IF_ERROR(t.norm(b + "ffn_post_norm.weight", c.n_embd));
    LF_RETURN_IF_ERROR(t.vector_f32(b + "out_scale.weight", 1, [](const Stream& st, uint64_t) { return 0.5f + st.uniform(0); }));
  }
  if (c.standardize) {
    LF_RETURN_IF_ERROR(t.vector_f32("v.std_bias", c.n_embd, [](const Stream& st, uint64_t i) { return st.normal(i); }));
    LF_RETURN_IF_ERROR(t.vector_f32("v.std_scale", c.n_embd, [](const Stream& st, uint64_t i) { return 0.5f + st.uniform(i); }));
  }
  LF_RETURN_IF_ERROR(t.linear("mm.input_projection.weight", c.n_embd, c.n_embd_text));
  return t.check_rules_used();
}

}  // namespace lf::make_model
