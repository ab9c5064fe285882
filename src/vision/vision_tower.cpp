#include "vision/vision_tower.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/scratch_vector.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "ops/ops.h"
#include "projector/clamped_linear.h"

namespace lf {
namespace {

// What every step of one encode shares: the configuration, weights, the call's buffers (each
// [n tokens, width]) and the worker running.
struct Tower {
  const VisionConfig& c;
  const VisionWeights& w;
  ThreadPool& pool;
  int n;       // patches
  int nx, ny;  // the patch grid
  // Every step writes its whole output before the next reads it, so none is zeroed.
  ScratchVector<float> x;            // [n, n_embd] the residual stream
  ScratchVector<float> xn;           // [n, max(n_embd, patch_dim)] a normed input
  ScratchVector<float> q, k, v;      // [n, q_dim]
  ScratchVector<uint16_t> k16, v16;  // [n, n_head, head_dim] K and V as the attention reads them (f16)
  ScratchVector<float> attn;         // [n, q_dim]
  ScratchVector<float> gate, up;     // [n, n_ff]
  ScratchVector<float> tmp;          // [n, max(n_embd, n_embd_text)]
  LinearScratch lin;                  // the matrices' activations; lin.row[worker] is a worker's row otherwise
  std::vector<AttentionWorkspace> ws;   // [workers]

  Share tokens(int worker, int count) const { return share(count, worker, pool.size()); }

  void linear(int worker, const ClampedLinear& L, const float* X, int n_tok, float* Y) {
    clamped_linear(pool, worker, L, X, n_tok, Y, &lin);
  }

  // The patches scaled to [-1, 1] (2x - 1) in the kernel's (c, y, x) order, embedded, plus the
  // x and y position tables' rows.
  void embed_patches(int worker) {
    const int p = c.patch_size, dim = c.patch_dim(), width = nx * p;
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) {
      const int px = static_cast<int>(t % nx), py = static_cast<int>(t / nx);
      float* patch = xn.data() + t * dim;
      for (int ch = 0; ch < 3; ++ch) {
        for (int ky = 0; ky < p; ++ky) {
          for (int kx = 0; kx < p; ++kx) {
            const float value = in_pixels[(static_cast<size_t>(py * p + ky) * width + px * p + kx) * 3 + ch];
            patch[(ch * p + ky) * p + kx] = value * 2.0f - 1.0f;
          }
        }
      }
    }
    pool.barrier();
    const ClampedLinear kernel{w.patch_embd, -INFINITY, INFINITY, -INFINITY, INFINITY};
    clamped_linear(pool, worker, kernel, xn.data(), n, x.data(), &lin, Src0::patches);
    const float* table_x = w.position_embd;
    const float* table_y = w.position_embd + static_cast<int64_t>(c.pos_size) * c.n_embd;
    for (int64_t t = own.begin; t < own.end; ++t) {
      float* xt = x.data() + t * c.n_embd;
      const float* ex = table_x + (t % nx) * c.n_embd;
      const float* ey = table_y + (t / nx) * c.n_embd;
      for (int e = 0; e < c.n_embd; ++e) xt[e] = (xt[e] + ex[e]) + ey[e];
    }
    pool.barrier();
  }

  // Q and K normed per head and rotated: the first half of each head by the patch's column, the
  // second by its row; V normed without a weight; K and V stored as f16.
  void prepare_qkv(int worker, const VisionLayerWeights& l) {
    const int D = c.head_dim, QD = c.q_dim();
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) {
      float* qt = q.data() + t * QD;
      float* kt = k.data() + t * QD;
      float* vt = v.data() + t * QD;
      rmsnorm_rows(qt, l.attn_q_norm, c.n_head, D, c.eps, qt);
      rmsnorm_rows(kt, l.attn_k_norm, c.n_head, D, c.eps, kt);
      rmsnorm_rows(vt, nullptr, c.n_head, D, c.eps, vt);
      const int px = static_cast<int>(t % nx), py = static_cast<int>(t / nx);
      for (float* head : {qt, kt}) {
        rope_neox(head, c.n_head, D, D / 2, px, c.rope_theta, 1.0f, nullptr);
        rope_neox(head + D / 2, c.n_head, D, D / 2, py, c.rope_theta, 1.0f, nullptr);
      }
      for (int i = 0; i < QD; ++i) {
        k16[t * QD + i] = fp32_to_fp16(kt[i]);
        v16[t * QD + i] = fp32_to_fp16(vt[i]);
      }
    }
    pool.barrier();
  }

  // Every patch attends to every patch, scale 1, by the path ggml's CPU flash attention takes
  // for the call (on AVX-512): its tiled f32 kernel from 64 patches on when the head dim is a
  // multiple of 16, else its one-chunk kernel, the patches one non-causal span.
  void attend(int worker) {
    const Share own = tokens(worker, n);
    const auto first = static_cast<int>(own.begin);
    KvView kv;
    kv.k = k16.data();
    kv.v = v16.data();
    kv.capacity = n;
    kv.n_head_kv = c.n_head;
    kv.head_dim = c.head_dim;
    const KeyMask all(0, 0, n);
    float* out = attn.data() + own.begin * c.q_dim();
    const float* qs = q.data() + own.begin * c.q_dim();
    if (takes_f32_tiles(n, c.head_dim)) {
      attention_f32_tiles(qs, static_cast<int>(own.end) - first, first, c.n_head, kv, all, 1.0f, out, &ws[worker]);
    } else {
      attention_tiled(qs, static_cast<int>(own.end) - first, first, c.n_head, kv, all, 1.0f, out, &ws[worker]);
    }
    pool.barrier();
  }

  // x += norm(y) over this worker's tokens; then the next step's normed input when `next`.
  void add_normed(int worker, const float* post_norm, const float* next_norm, const float* out_scale) {
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) {
      float* yt = tmp.data() + t * c.n_embd;
      float* xt = x.data() + t * c.n_embd;
      rmsnorm(yt, post_norm, c.n_embd, c.eps, yt);
      for (int e = 0; e < c.n_embd; ++e) xt[e] = yt[e] + xt[e];
      if (out_scale) for (int e = 0; e < c.n_embd; ++e) xt[e] *= out_scale[0];
      if (next_norm) rmsnorm(xt, next_norm, c.n_embd, c.eps, xn.data() + t * c.n_embd);
    }
    pool.barrier();
  }

  void layer(int worker, const VisionLayerWeights& l, const VisionLayerWeights* next) {
    linear(worker, l.attn_q, xn.data(), n, q.data());
    linear(worker, l.attn_k, xn.data(), n, k.data());
    linear(worker, l.attn_v, xn.data(), n, v.data());
    prepare_qkv(worker, l);
    attend(worker);
    linear(worker, l.attn_out, attn.data(), n, tmp.data());
    add_normed(worker, l.attn_post_norm, l.ln2, nullptr);
    linear(worker, l.ffn_gate, xn.data(), n, gate.data());
    linear(worker, l.ffn_up, xn.data(), n, up.data());
    const Share own = tokens(worker, n);
    for (int64_t t = own.begin; t < own.end; ++t) {
      float* g = gate.data() + t * c.n_ff;
      const float* u = up.data() + t * c.n_ff;
      if (c.ffn_op == VisionFfnOp::gelu) geglu(g, u, c.n_ff, g); else geglu_quick(g, u, c.n_ff, g);
    }
    pool.barrier();
    linear(worker, l.ffn_down, gate.data(), n, tmp.data());
    add_normed(worker, l.ffn_post_norm, next ? next->ln1 : nullptr, l.out_scale);
  }

  // n_merge × n_merge patches averaged into one token, times sqrt(n_embd), standardized, RMS-normed
  // (no weight) into xn [m, n_embd].
  void pool_tokens(int worker) {
    const int k = c.n_merge, ox_n = nx / k, m = ox_n * (ny / k);
    const float scale = sqrtf(static_cast<float>(c.n_embd));
    const Share own = tokens(worker, m);
    std::vector<float>& r = lin.row[worker];
    for (int64_t o = own.begin; o < own.end; ++o) {
      const int ox = static_cast<int>(o % ox_n), oy = static_cast<int>(o / ox_n);
      for (int e = 0; e < c.n_embd; ++e) {
        float sum = 0;
        for (int ky = 0; ky < k; ++ky) {
          for (int kx = 0; kx < k; ++kx) sum += x[(static_cast<int64_t>(oy * k + ky) * nx + ox * k + kx) * c.n_embd + e];
        }
        sum /= static_cast<float>(k * k);
        r[e] = sum * scale;
        if (w.std_bias) r[e] = (r[e] - w.std_bias[e]) * w.std_scale[e];
      }
      rmsnorm(r.data(), nullptr, c.n_embd, c.eps, xn.data() + o * c.n_embd);
    }
    pool.barrier();
  }

  const float* in_pixels = nullptr;
};

}  // namespace

int vision_tokens(const VisionConfig& c, int width, int height) {
  return (width / c.patch_size / c.n_merge) * (height / c.patch_size / c.n_merge);
}

namespace {

Status check_input(const VisionConfig& c, const VisionInput& in) {
  const int align = c.patch_size * c.n_merge;
  if (in.patch_size != c.patch_size || in.width <= 0 || in.height <= 0 || in.width % align != 0 ||
      in.height % align != 0 || in.pixels.size() != static_cast<size_t>(in.width) * in.height * 3) {
    return Status(Code::invalid_argument, "the vision input is not a preprocessed image of this projector");
  }
  return Status();
}

}  // namespace

// One encode: the request's configuration and input, which the tower refers to, and the tower.
struct ImageEncoding::State {
  VisionConfig c;
  VisionInput in;
  Tower t;
  int m;  // soft tokens
  std::atomic<bool> finished{false};  // the pool's job is over (ImageEncoding::start)

  State(const VisionConfig& config, const VisionWeights& w, VisionInput input, ThreadPool& pool)
      : c(config), in(std::move(input)), t{c, w, pool, in.n_patches_x() * in.n_patches_y(), in.n_patches_x(), in.n_patches_y()},
        m(vision_tokens(c, in.width, in.height)) {
    const int64_t n = t.n, E = c.n_embd, QD = c.q_dim(), FF = c.n_ff;
    const int64_t widest = std::max({E, static_cast<int64_t>(c.patch_dim()), QD, FF});
    t.x.resize(n * E);
    t.xn.resize(n * std::max(E, static_cast<int64_t>(c.patch_dim())));
    t.q.resize(n * QD);
    t.k.resize(n * QD);
    t.v.resize(n * QD);
    t.k16.resize(n * QD);
    t.v16.resize(n * QD);
    t.attn.resize(n * QD);
    t.gate.resize(n * FF);
    t.up.resize(n * FF);
    t.tmp.resize(n * std::max(E, static_cast<int64_t>(c.n_embd_text)));
    t.lin.size_for(pool.size(), widest, n * widest);
    t.ws.resize(pool.size());
    t.in_pixels = in.pixels.data();
  }

  // Worker `worker`'s part of the whole encode.
  void run(int worker) {
    const VisionWeights& w = t.w;
    t.embed_patches(worker);
    const Share own = t.tokens(worker, t.n);
    for (int64_t i = own.begin; i < own.end; ++i) rmsnorm(&t.x[i * c.n_embd], w.layers[0].ln1, c.n_embd, c.eps, &t.xn[i * c.n_embd]);
    t.pool.barrier();
    for (size_t il = 0; il < w.layers.size(); ++il) {
      t.layer(worker, w.layers[il], il + 1 < w.layers.size() ? &w.layers[il + 1] : nullptr);
    }
    t.pool_tokens(worker);
    t.linear(worker, w.input_projection, t.xn.data(), m, t.tmp.data());
  }

  Status collect(std::vector<float>* embd) const {
    for (const Status& s : t.lin.failed) LF_RETURN_IF_ERROR(s);
    embd->assign(t.tmp.begin(), t.tmp.begin() + static_cast<int64_t>(m) * c.n_embd_text);
    return Status();
  }
};

ImageEncoding::ImageEncoding() = default;
ImageEncoding::~ImageEncoding() = default;

Status ImageEncoding::start(const VisionConfig& c, const VisionWeights& w, VisionInput in, ThreadPool* pool,
                            std::function<void()> done, std::unique_ptr<ImageEncoding>* out) {
  LF_RETURN_IF_ERROR(check_input(c, in));
  auto encoding = std::unique_ptr<ImageEncoding>(new ImageEncoding());
  encoding->state_ = std::make_unique<State>(c, w, std::move(in), *pool);
  State* s = encoding->state_.get();
  const auto over = [s, done = std::move(done)] {
    s->finished.store(true, std::memory_order_release);
    done();
  };
  if (!pool->start([s](int worker) { s->run(worker); }, over)) {
    return Status(Code::failed_precondition, "the vision encoder is encoding another image");
  }
  *out = std::move(encoding);
  return Status();
}

Status ImageEncoding::finish(std::vector<float>* embd) const {
  if (!state_->finished.load(std::memory_order_acquire)) {
    return Status(Code::failed_precondition, "the image is still being encoded: wait for its flag");
  }
  return state_->collect(embd);
}

Status encode_image(const VisionConfig& c, const VisionWeights& w, const VisionInput& in, ThreadPool* pool,
                    std::vector<float>* embd) {
  LF_RETURN_IF_ERROR(check_input(c, in));
  ImageEncoding::State s(c, w, in, *pool);
  pool->run([&s](int worker) { s.run(worker); });
  return s.collect(embd);
}

}  // namespace lf
