#include "audio/audio_encoder.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>

#include "base/scratch_vector.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "ops/ops.h"
#include "projector/clamped_linear.h"
#include "quant/quant.h"

namespace lf {
namespace {

constexpr float kMasked = -1e9f;  // llama.cpp's mask value
constexpr int kConvSlab = 4096;   // convolution outputs per GEMM: bounds the patches' buffer

// logf where it rounds correctly (glibc's does on the constants used here).
float log_f32(double x) { return static_cast<float>(std::log(x)); }

ClampedLinear unclamped(const WeightView& w) { return ClampedLinear{w, -INFINITY, INFINITY, -INFINITY, INFINITY}; }

// What every step of one chunk's encode shares: the configuration, weights, the chunk's
// buffers and the worker running. Every step writes its whole output before the next reads it.
struct Encoder {
  const AudioConfig& c;
  const AudioWeights& w;
  const LogMel& mel;
  ThreadPool& pool;
  std::vector<float> padded;         // the chunk's samples, padded as its frames read them
  MelChunk features;                 // [n_mel, frames]
  int t1, f1;                        // the first convolution's output grid (time, frequency)
  int n;                             // tokens: the second convolution's time
  ScratchVector<float> conv0;        // [t1, f1, channels_0]
  ScratchVector<float> sub;          // [n, n_mel_sub, channels_1]: each token's subsampled frame
  ScratchVector<float> patches;      // [kConvSlab, 9 · in_channels]
  ScratchVector<float> x, h, y;      // [n, n_embd]: the residual stream, a normed input, a step's output
  ScratchVector<float> wide;         // [n, max(n_ff, 2 n_embd, n_embd_out)]
  ScratchVector<float> q, k, v, att; // [n, n_embd]
  ScratchVector<float> rel, relk;    // [max_past + 1, n_embd]: each distance's sinusoids, and their projection
  ScratchVector<float> embd;         // [n, n_embd_text]
  LinearScratch lin;
  std::vector<std::vector<float>> fft;  // [workers] FFT scratch

  Share tokens(int worker, int count) const { return share(count, worker, pool.size()); }

  void linear(int worker, const ClampedLinear& L, const float* X, int n_tok, float* Y) {
    clamped_linear(pool, worker, L, X, n_tok, Y, &lin);
  }

  void compute_features(int worker) {
    const Share own = tokens(worker, features.n_frames);
    mel.frames(padded, static_cast<int>(own.begin), static_cast<int>(own.end), &features, &fft[worker]);
    pool.barrier();
  }

  // Convolution i: 3 × 3 taps, stride 2, a zero border of 1 (ggml_conv_2d: an im2col GEMM whose
  // patches are F16, as its kernel then is), over a t_in × f_in grid of `in_ch` channels; then
  // each output's channels LayerNormed and ReLU'd. Outputs [t_out, f_out, channels_i] in dst.
  void convolve(int worker, int i, int t_in, int f_in, int in_ch, float* dst) {
    const int t_out = (t_in - 1) / 2 + 1, f_out = (f_in - 1) / 2 + 1, out_ch = c.conv_channels[i], K = 9 * in_ch;
    const int n_out = t_out * f_out;
    const auto input = [&](int t, int f, int ch) {
      return i == 0 ? features.data[static_cast<size_t>(f) * features.n_frames + t]
                    : conv0[(static_cast<size_t>(t) * f_in + f) * in_ch + ch];
    };
    for (int first = 0; first < n_out; first += kConvSlab) {
      const int m = std::min(kConvSlab, n_out - first);
      const Share own = tokens(worker, m);
      for (int64_t r = own.begin; r < own.end; ++r) {
        const int token = first + static_cast<int>(r), t = token / f_out, f = token % f_out;
        float* p = &patches[static_cast<size_t>(r) * K];
        for (int ch = 0; ch < in_ch; ++ch) {
          for (int kt = 0; kt < 3; ++kt) {
            for (int kf = 0; kf < 3; ++kf) {
              const int ti = 2 * t - 1 + kt, fi = 2 * f - 1 + kf;
              const bool inside = ti >= 0 && ti < t_in && fi >= 0 && fi < f_in;
              p[(ch * 3 + kt) * 3 + kf] = inside ? fp16_to_fp32(fp32_to_fp16(input(ti, fi, ch))) : 0.0f;
            }
          }
        }
      }
      pool.barrier();
      // A slab's patches are a multiple of 4 wherever the whole's are, so tinyBLAS takes the same ones.
      clamped_linear(pool, worker, unclamped(w.conv[i]), patches.data(), m, dst + static_cast<size_t>(first) * out_ch, &lin,
                     Src0::patches);
    }
    const Share own = tokens(worker, n_out);
    for (int64_t r = own.begin; r < own.end; ++r) {
      float* o = dst + r * out_ch;
      if (w.conv_norm[i]) layernorm(o, w.conv_norm[i], out_ch, c.eps, o);
      for (int ch = 0; ch < out_ch; ++ch) o[ch] = o[ch] > 0.0f ? o[ch] : 0.0f;
    }
    pool.barrier();
  }

  void subsample(int worker) {
    convolve(worker, 0, features.n_frames, c.n_mel, 1, conv0.data());
    convolve(worker, 1, t1, f1, c.conv_channels[0], sub.data());
    linear(worker, w.input_projection, sub.data(), n, x.data());
    add_bias(worker, w.input_projection_b, x.data());
  }

  void add_bias(int worker, const float* b, float* X) {
    if (!b) return;
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) {
      for (int e = 0; e < c.n_embd; ++e) X[t * c.n_embd + e] += b[e];
    }
    pool.barrier();
  }

  // h = norm(x) per token (no weight: x itself).
  void norm_into_h(int worker, const float* weight) {
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) {
      const float* xt = &x[t * c.n_embd];
      float* ht = &h[t * c.n_embd];
      if (weight) rmsnorm(xt, weight, c.n_embd, c.eps, ht); else std::copy(xt, xt + c.n_embd, ht);
    }
    pool.barrier();
  }

  // x += weight · post_norm(y) per token.
  void add_to_residual(int worker, const float* post_norm, float weight) {
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) {
      float* yt = &y[t * c.n_embd];
      float* xt = &x[t * c.n_embd];
      if (post_norm) rmsnorm(yt, post_norm, c.n_embd, c.eps, yt);
      for (int e = 0; e < c.n_embd; ++e) xt[e] = xt[e] + (weight == 1.0f ? yt[e] : yt[e] * weight);
    }
    pool.barrier();
  }

  // x += ½ · post_norm(down(silu(up(norm(x))))).
  void half_ffn(int worker, const float* norm, const ClampedLinear& up, const ClampedLinear& down, const float* post_norm) {
    norm_into_h(worker, norm);
    linear(worker, up, h.data(), n, wide.data());
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) silu(&wide[t * c.n_ff], c.n_ff, &wide[t * c.n_ff]);
    pool.barrier();
    linear(worker, down, wide.data(), n, y.data());
    add_to_residual(worker, post_norm, c.residual_weight);
  }

  // Each token's queries see the max_past tokens up to and including it: llama.cpp's blocks of
  // chunk_size queries over chunk_size + max_past key slots. Scores QK (tinyBLAS's dot: 24 key
  // rows) + Q·rel(distance) (ggml's vector dot: 13 rows, which tinyBLAS declines), soft-capped;
  // the masked slots at -1e9 in ggml's softmax; the values summed over the 24 slots by the tail
  // loop of ggml's vector dot (fewer than its 64-wide step): a product and an f32 sum a slot.
  void attend(int worker, const AudioLayerWeights& l) {
    const int D = c.head_dim, E = c.n_embd, slots = c.chunk_size + c.max_past;
    const bool relative = l.attn_k_rel.present();
    if (relative) linear(worker, unclamped(l.attn_k_rel), rel.data(), c.max_past + 1, relk.data());
    const auto visible = [&](int64_t i, int64_t key) { return key >= 0 && key <= i && i - key < c.max_past; };
    std::vector<float> score(static_cast<size_t>(slots));
    const Share own = tokens(worker, n);
    for (int64_t i = own.begin; i < own.end; ++i) {
      const int64_t first_key = (i / c.chunk_size) * c.chunk_size - c.max_past;  // the key in slot 0
      for (int hd = 0; hd < c.n_head; ++hd) {
        const float* qi = &q[i * E + hd * D];
        for (int s = 0; s < slots; ++s) {
          const int64_t key = first_key + s;
          if (!visible(i, key)) {
            score[s] = kMasked;
            continue;
          }
          float sum = dot_f32_lanes16(&k[key * E + hd * D], qi, D);
          if (relative) sum = sum + dot_f32_ggml(&relk[(c.max_past - (i - key)) * E + hd * D], qi, D);
          score[s] = tanh_f32(sum * (1.0f / c.logit_cap)) * c.logit_cap;
        }
        float max = -INFINITY;
        for (float s : score) max = std::max(max, s);
        // ggml_vec_soft_max_f32 on AVX-512: vectors of 16, then the tail one by one.
        double total = 0.0;
        int s = 0;
        for (; s + 15 < slots; s += 16) total += sum_exp_lanes_simd(&score[s], max);
        for (; s < slots; ++s) {
          score[s] = score[s] == kMasked ? 0.0f : exp_f32(score[s] - max);
          total += score[s];
        }
        const auto inv = static_cast<float>(1.0 / total);
        float* out = &att[i * E + hd * D];
        std::fill(out, out + D, 0.0f);
        for (int t = 0; t < slots; ++t) {
          const int64_t key = first_key + t;
          if (visible(i, key)) add_scaled_floats(out, &v[key * E + hd * D], score[t] * inv, D);
        }
      }
    }
    pool.barrier();
  }

  void attention(int worker, const AudioLayerWeights& l) {
    norm_into_h(worker, l.attn_pre_norm ? l.attn_pre_norm : l.ln1);
    linear(worker, l.attn_q, h.data(), n, q.data());
    linear(worker, l.attn_k, h.data(), n, k.data());
    linear(worker, l.attn_v, h.data(), n, v.data());
    const int D = c.head_dim;
    const float q_scale = (1.0f / std::sqrt(static_cast<float>(D))) / log_f32(2.0);
    const float k_scale = log_f32(1.0f + exp_f32(1.0f)) / log_f32(2.0);
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) {
      for (int e = 0; e < c.n_embd; ++e) {
        float& qe = q[t * c.n_embd + e];
        float& ke = k[t * c.n_embd + e];
        qe = qe * q_scale;
        if (l.per_dim_scale) qe = qe * l.per_dim_scale[e % D];
        ke = ke * k_scale;
        if (l.per_dim_k_scale) ke = ke * l.per_dim_k_scale[e % D];
      }
    }
    pool.barrier();
    attend(worker, l);
    linear(worker, l.attn_out, att.data(), n, y.data());
    add_bias(worker, l.attn_out_b, y.data());
    add_to_residual(worker, l.attn_post_norm, 1.0f);
  }

  // x += pw2(silu(norm(dwconv(glu(pw1(norm(x))))))), the depthwise convolution causal over 5 tokens.
  void conv_module(int worker, const AudioLayerWeights& l) {
    const int E = c.n_embd, taps = c.conv_kernel;
    norm_into_h(worker, l.conv_in_norm);
    linear(worker, l.conv_pw1, h.data(), n, wide.data());
    Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) {
      const float* g = &wide[t * 2 * E];
      for (int e = 0; e < E; ++e) y[t * E + e] = g[e] * sigmoid_f32(g[E + e]);
    }
    pool.barrier();
    for (int64_t t = own.begin; t < own.end; ++t) {
      // ggml_ssm_conv's f32 sum over the taps from 0, each multiply-add fused as llama.cpp's
      // build fuses it; the taps before the first token read zeros.
      float* ht = &h[t * E];
      std::fill(ht, ht + E, 0.0f);
      for (int j = 0; j < taps; ++j) {
        const int64_t from = t - (taps - 1) + j;
        if (from >= 0) {
          madd_floats(ht, &y[from * E], l.conv_taps + j * E, E);
        } else {
          for (int e = 0; e < E; ++e) ht[e] = fma_f32(0.0f, l.conv_taps[j * E + e], ht[e]);
        }
      }
      if (l.conv_dw_b) for (int e = 0; e < E; ++e) ht[e] = ht[e] + l.conv_dw_b[e];
      if (l.conv_out_norm) rmsnorm(ht, l.conv_out_norm, E, c.eps, ht);
      silu(ht, E, ht);
    }
    pool.barrier();
    linear(worker, l.conv_pw2, h.data(), n, y.data());
    add_to_residual(worker, nullptr, 1.0f);
  }

  void block(int worker, const AudioLayerWeights& l) {
    half_ffn(worker, l.ffn_norm, l.ffn_up, l.ffn_down, l.ffn_post_norm);
    attention(worker, l);
    conv_module(worker, l);
    half_ffn(worker, l.ffn_norm_1, l.ffn_up_1, l.ffn_down_1, l.ffn_post_norm_1);
    if (!l.ln2) return;
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) rmsnorm(&x[t * c.n_embd], l.ln2, c.n_embd, c.eps, &x[t * c.n_embd]);
    pool.barrier();
  }

  // The output projection (when there is one), an RMS norm with the soft embedding's weight and
  // the projection into the language model's width.
  void project(int worker) {
    const int E_out = c.n_embd_out;
    float* cur = x.data();
    if (w.out_projection.w.present()) {
      linear(worker, w.out_projection, x.data(), n, wide.data());
      cur = wide.data();
    }
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) {
      float* ct = cur + t * E_out;
      if (w.out_projection_b) for (int e = 0; e < E_out; ++e) ct[e] += w.out_projection_b[e];
      rmsnorm(ct, w.soft_emb_norm, E_out, c.eps, ct);
    }
    pool.barrier();
    linear(worker, w.mm_input_projection, cur, n, embd.data());
  }

  void run(int worker) {
    compute_features(worker);
    subsample(worker);
    for (const AudioLayerWeights& l : w.layers) block(worker, l);
    project(worker);
  }
};

// Row p: the sinusoids of distance max_past - p, sines of the n_embd/2 timescales then their cosines.
void relative_sinusoids(const AudioConfig& c, float* out) {
  const int n_embd = c.n_embd, half = n_embd / 2;
  const float step = log_f32(10000.0) / static_cast<float>(std::max(half - 1, 1));
  for (int p = 0; p <= c.max_past; ++p) {
    const auto distance = static_cast<float>(c.max_past - p);
    for (int i = 0; i < half; ++i) {
      const float scaled = distance * exp_f32(-static_cast<float>(i) * step);
      out[p * n_embd + i] = sin_f32(scaled);
      out[p * n_embd + half + i] = cos_f32(scaled);
    }
  }
}

}  // namespace

Status audio_features(const LogMel& mel, const float* samples, int64_t n, std::vector<MelChunk>* out) {
  std::vector<int64_t> starts, lengths;
  LF_RETURN_IF_ERROR(mel.chunks(n, &starts, &lengths));
  out->clear();
  std::vector<float> scratch;
  for (size_t i = 0; i < starts.size(); ++i) {
    MelChunk chunk;
    chunk.n_frames = mel.config().frames(lengths[i]);
    chunk.data.resize(static_cast<size_t>(mel.config().n_mel) * chunk.n_frames);
    mel.frames(mel.padded_chunk(samples + starts[i], lengths[i]), 0, chunk.n_frames, &chunk, &scratch);
    out->push_back(std::move(chunk));
  }
  return Status();
}

// One clip's encode: its samples and chunks, the encoder (sized anew for each chunk) and the
// embeddings so far; the pool's workers go through the chunks together.
struct AudioEncoding::State {
  const AudioConfig& c;
  const LogMel& mel;
  ThreadPool& pool;
  std::vector<float> samples;
  std::vector<int64_t> starts, lengths;
  Encoder e;
  AudioEmbeddings result;
  std::atomic<bool> finished{false};  // the pool's job is over (AudioEncoding::start)

  State(const AudioConfig& config, const AudioWeights& w, const LogMel& m, std::vector<float> clip, ThreadPool& p)
      : c(config), mel(m), pool(p), samples(std::move(clip)), e{config, w, m, p} {}

  // The encoder's buffers for chunk i (worker 0, the others waiting).
  void prepare(size_t i) {
    e.padded = mel.padded_chunk(samples.data() + starts[i], lengths[i]);
    e.features.n_frames = c.frames(lengths[i]);
    e.features.data.resize(static_cast<size_t>(c.n_mel) * e.features.n_frames);
    e.t1 = (e.features.n_frames - 1) / 2 + 1;
    e.f1 = (c.n_mel - 1) / 2 + 1;
    e.n = (e.t1 - 1) / 2 + 1;
    const int64_t N = e.n, E = c.n_embd, C0 = c.conv_channels[0];
    const int64_t wide = std::max({static_cast<int64_t>(c.n_ff), 2 * E, static_cast<int64_t>(c.n_embd_out)});
    e.conv0.resize(static_cast<size_t>(e.t1) * e.f1 * C0);
    e.sub.resize(static_cast<size_t>(N * c.n_embd_sub()));
    e.patches.resize(static_cast<size_t>(kConvSlab) * 9 * C0);
    for (auto* b : {&e.x, &e.h, &e.y, &e.q, &e.k, &e.v, &e.att}) b->resize(static_cast<size_t>(N * E));
    e.wide.resize(static_cast<size_t>(N * wide));
    e.rel.resize(static_cast<size_t>((c.max_past + 1) * E));
    e.relk.resize(e.rel.size());
    e.embd.resize(static_cast<size_t>(N * c.n_embd_text));
    const int64_t widest = std::max({9 * C0, static_cast<int64_t>(c.n_embd_sub()), wide});
    e.lin.size_for(pool.size(), widest, std::max({kConvSlab * 9 * C0, N * c.n_embd_sub(), N * wide, N * E}));
    e.fft.resize(static_cast<size_t>(pool.size()));
    relative_sinusoids(c, e.rel.data());
  }

  void run(int worker) {
    for (size_t i = 0; i < starts.size(); ++i) {
      if (worker == 0) prepare(i);
      pool.barrier();
      e.run(worker);
      if (worker == 0) {
        result.chunk_tokens.push_back(e.n);
        result.embd.insert(result.embd.end(), e.embd.begin(), e.embd.end());
      }
    }
  }

  Status collect(AudioEmbeddings* out) const {
    for (const Status& s : e.lin.failed) LF_RETURN_IF_ERROR(s);
    *out = result;
    return Status();
  }
};

AudioEncoding::AudioEncoding() = default;
AudioEncoding::~AudioEncoding() = default;

Status AudioEncoding::prepare(const AudioConfig& c, const AudioWeights& w, const LogMel& mel, std::vector<float> samples,
                              ThreadPool* pool, std::unique_ptr<State>* out) {
  if (mel.config().n_mel != c.n_mel) return Status(Code::invalid_argument, "the log-mel front end is for another encoder");
  auto s = std::make_unique<State>(c, w, mel, std::move(samples), *pool);
  LF_RETURN_IF_ERROR(mel.chunks(static_cast<int64_t>(s->samples.size()), &s->starts, &s->lengths));
  *out = std::move(s);
  return Status();
}

Status AudioEncoding::start(const AudioConfig& c, const AudioWeights& w, const LogMel& mel, std::vector<float> samples,
                            ThreadPool* pool, std::function<void()> done, std::unique_ptr<AudioEncoding>* out) {
  auto encoding = std::unique_ptr<AudioEncoding>(new AudioEncoding());
  LF_RETURN_IF_ERROR(prepare(c, w, mel, std::move(samples), pool, &encoding->state_));
  State* s = encoding->state_.get();
  const auto over = [s, done = std::move(done)] {
    s->finished.store(true, std::memory_order_release);
    done();
  };
  if (!pool->start([s](int worker) { s->run(worker); }, over)) {
    return Status(Code::failed_precondition, "the audio encoder is encoding another clip");
  }
  *out = std::move(encoding);
  return Status();
}

Status AudioEncoding::finish(AudioEmbeddings* out) const {
  if (!state_->finished.load(std::memory_order_acquire)) {
    return Status(Code::failed_precondition, "the clip is still being encoded: wait for its flag");
  }
  return state_->collect(out);
}

Status encode_audio(const AudioConfig& c, const AudioWeights& w, const LogMel& mel, std::vector<float> samples,
                    ThreadPool* pool, AudioEmbeddings* out) {
  std::unique_ptr<AudioEncoding::State> s;
  LF_RETURN_IF_ERROR(AudioEncoding::prepare(c, w, mel, std::move(samples), pool, &s));
  pool->run([&s](int worker) { s->run(worker); });
  return s->collect(out);
}

}  // namespace lf
