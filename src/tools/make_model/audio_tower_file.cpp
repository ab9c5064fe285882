#include "audio_tower_file.h"

#include <cmath>
#include <string>

#include "tensor_adder.h"

namespace lf::make_model {
namespace {

// A stride-2, pad-1, kernel-3 convolution's output length.
int conv_out(int n) { return (n - 1) / 2 + 1; }

}  // namespace

Status audio_config_for(const ModelConfig& target, const AudioShape& shape, AudioConfig* out) {
  if (target.n_embd_per_layer <= 0) {
    return Status(Code::invalid_argument,
                  "--audio: the target (width " + std::to_string(target.n_embd) +
                      ", no per-layer embeddings: a gemma-4-31B or 26B-A4B shape) has no audio encoder; only Gemma 4's "
                      "E-models (E2B, E4B) read audio");
  }
  if (shape.n_layer < 0 || shape.n_layer > 256) return Status(Code::invalid_argument, "--audio-layers must be 1 to 256");
  // google/gemma-4-E2B and -E4B's audio_config (the same tower in both; docs/audio.md).
  AudioConfig c;
  c.n_embd = 1024;
  c.n_ff = 4 * c.n_embd;  // the converter's intermediate_size: Gemma4AudioFeedForward is 4x wide
  c.n_layer = shape.n_layer > 0 ? shape.n_layer : 12;
  c.n_head = 8;
  c.head_dim = c.n_embd / c.n_head;
  c.n_mel = 128;
  c.conv_channels[0] = 128;
  c.conv_channels[1] = 32;
  c.conv_kernel = 5;
  c.n_embd_out = 1536;
  c.n_embd_text = target.n_embd;
  *out = c;
  return Status();
}

Status add_audio_tower(const ModelConfig& target, const AudioShape& shape, GgmlType type, const MakeSettings& settings,
                       GgufWriter* w) {
  AudioConfig c;
  LF_RETURN_IF_ERROR(audio_config_for(target, shape, &c));
  w->set_bool("clip.has_audio_encoder", true);
  w->set_string("clip.audio.projector_type", "gemma4a");
  w->set_u32("clip.audio.projection_dim", static_cast<uint32_t>(c.n_embd_text));
  w->set_u32("clip.audio.embedding_length", static_cast<uint32_t>(c.n_embd));
  w->set_u32("clip.audio.feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w->set_u32("clip.audio.block_count", static_cast<uint32_t>(c.n_layer));
  w->set_u32("clip.audio.attention.head_count", static_cast<uint32_t>(c.n_head));
  w->set_u32("clip.audio.num_mel_bins", static_cast<uint32_t>(c.n_mel));
  w->set_f32("clip.audio.attention.layer_norm_epsilon", c.eps);

  // The vision tower's seed (mmproj_file.cpp): tensors of the two towers differ by name.
  MakeSettings s = settings;
  s.seed = mix64(settings.seed ^ fnv1a("mmproj"));
  s.type = type;
  s.tensor_types.clear();
  TensorAdder t(s, *w);
  const int64_t d = c.n_embd;

  // The converter keeps every audio convolution in F32, and the input projection too (its
  // Hugging Face name, subsample_conv_projection.input_proj_linear, matches its "_conv" rule).
  // Kernels [3 (mel), 3 (time), in, out]; each conv's LayerNorm over channels then brings its
  // output back to unit scale whatever the input's.
  const int64_t ch0 = c.conv_channels[0], ch1 = c.conv_channels[1];
  const auto kernel = [&](const std::string& name, int64_t n_in, int64_t n_out) -> Status {
    const Stream stream(s.seed, name);
    const float stddev = 1.0f / std::sqrt(9.0f * static_cast<float>(n_in));
    const int64_t n = 9 * n_in * n_out;
    return w->add_tensor(name, GgmlType::F32, {3, 3, n_in, n_out}, [=](uint8_t* dst, uint64_t) {
      for (int64_t i = 0; i < n; ++i) {
        const float v = stddev * stream.normal(i);
        std::memcpy(dst + 4 * i, &v, 4);
      }
    });
  };
  // W [n_in, n_out] whose every row sums to zero, for a linear after a ReLU or SiLU: it drops the
  // constant part of what they pass on (a unit normal's SiLU has mean 0.21), which would otherwise
  // add one and the same vector to every token, block after block (a 3 s clip's tokens: mean
  // cosine 0.88 -> 0.82 between them after 2 blocks, 0.75 -> 0.65 after 12).
  const auto centered = [&](const std::string& name, int64_t n_in, int64_t n_out, GgmlType as) -> Status {
    // Every audio matrix's rows (1024, 1536, 4096) fill the blocks of any type make_model writes.
    TypeTraits traits;
    type_traits(static_cast<uint32_t>(as), &traits);
    const Stream stream(s.seed, name);
    const float stddev = 1.0f / std::sqrt(static_cast<float>(n_in));
    const uint64_t bytes = row_bytes(traits, static_cast<uint64_t>(n_in));
    return w->add_tensor(name, as, {n_in, n_out}, [=](uint8_t* dst, uint64_t) {
      std::vector<float> row(static_cast<size_t>(n_in));
      for (int64_t r = 0; r < n_out; ++r) {
        double sum = 0;
        for (int64_t i = 0; i < n_in; ++i) sum += row[i] = stddev * stream.normal(static_cast<uint64_t>(r * n_in + i));
        const float mean = static_cast<float>(sum / static_cast<double>(n_in));
        for (float& v : row) v -= mean;
        convert_row(as, row.data(), dst + static_cast<uint64_t>(r) * bytes, n_in);
      }
    });
  };
  LF_RETURN_IF_ERROR(kernel("a.conv1d.0.weight", 1, ch0));
  LF_RETURN_IF_ERROR(t.norm("a.conv1d.0.norm.weight", ch0));
  LF_RETURN_IF_ERROR(kernel("a.conv1d.1.weight", ch0, ch1));
  LF_RETURN_IF_ERROR(t.norm("a.conv1d.1.norm.weight", ch1));
  const int64_t n_flat = ch1 * conv_out(conv_out(c.n_mel));  // channels x mel bins left after two stride-2 convs
  LF_RETURN_IF_ERROR(centered("a.input_projection.weight", n_flat, d, GgmlType::F32));

  // Google's audio tower clips every block linear but attn_k_rel, as the vision tower's.
  const auto clipped = [&](const std::string& stem, int64_t n_in, int64_t n_out, bool after_activation = false) -> Status {
    LF_RETURN_IF_ERROR(after_activation ? centered(stem + ".weight", n_in, n_out, type) : t.linear(stem + ".weight", n_in, n_out));
    return t.clip_bounds(stem);
  };
  // What each FFN and the attention add is normed, and so is the block's output (ln2): unit-scale
  // weights keep every block's output at unit scale however many blocks there are.
  const auto ffn = [&](const std::string& b, const std::string& sfx) -> Status {
    LF_RETURN_IF_ERROR(t.norm(b + "ffn_norm" + sfx + ".weight", d));
    LF_RETURN_IF_ERROR(clipped(b + "ffn_up" + sfx, d, c.n_ff));
    LF_RETURN_IF_ERROR(clipped(b + "ffn_down" + sfx, c.n_ff, d, true));
    return t.norm(b + "ffn_post_norm" + sfx + ".weight", d);
  };
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string b = "a.blk." + std::to_string(il) + ".";
    LF_RETURN_IF_ERROR(ffn(b, ""));
    LF_RETURN_IF_ERROR(t.norm(b + "attn_pre_norm.weight", d));
    LF_RETURN_IF_ERROR(clipped(b + "attn_q", d, c.q_dim()));
    LF_RETURN_IF_ERROR(clipped(b + "attn_k", d, c.q_dim()));
    LF_RETURN_IF_ERROR(clipped(b + "attn_v", d, c.q_dim()));
    // softplus(per_dim_scale), as the converter stores it: Google's zero init gives ln 2, which
    // with llama.cpp's 1/(sqrt(head_dim)·ln 2) scales queries by 1/sqrt(head_dim).
    LF_RETURN_IF_ERROR(t.norm(b + "per_dim_scale.weight", c.head_dim, std::log(2.0f)));
    LF_RETURN_IF_ERROR(t.linear(b + "attn_k_rel.weight", d, c.q_dim()));
    LF_RETURN_IF_ERROR(clipped(b + "attn_out", c.q_dim(), d));
    LF_RETURN_IF_ERROR(t.norm(b + "attn_post_norm.weight", d));
    // llama.cpp's names for the light conv's norms are swapped from Hugging Face's: conv_norm is
    // the one before pw1 (lconv1d.pre_layer_norm), norm_conv the one after the depthwise conv.
    LF_RETURN_IF_ERROR(t.norm(b + "conv_norm.weight", d));
    LF_RETURN_IF_ERROR(clipped(b + "conv_pw1", d, 2 * d));
    LF_RETURN_IF_ERROR(t.matrices_of_type(b + "conv_dw.weight", c.conv_kernel, d, 1,
                                          1.0f / std::sqrt(static_cast<float>(c.conv_kernel)), GgmlType::F32));
    LF_RETURN_IF_ERROR(t.norm(b + "norm_conv.weight", d));
    LF_RETURN_IF_ERROR(clipped(b + "conv_pw2", d, d, true));
    LF_RETURN_IF_ERROR(ffn(b, "_1"));
    LF_RETURN_IF_ERROR(t.norm(b + "ln2.weight", d));
  }
  LF_RETURN_IF_ERROR(t.linear("a.pre_encode.out.weight", d, c.n_embd_out));
  LF_RETURN_IF_ERROR(t.vector_f32("a.pre_encode.out.bias", c.n_embd_out, [](const Stream& st, uint64_t i) { return 0.1f * st.normal(i); }));
  // Google's embedder norms without a scale (no mm.a.soft_emb_norm), then projects.
  LF_RETURN_IF_ERROR(t.linear("mm.a.input_projection.weight", c.n_embd_out, c.n_embd_text));
  return t.check_rules_used();
}

}  // namespace lf::make_model
