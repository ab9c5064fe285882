// Which flash-attention arithmetic reproduces llama.cpp's layer-0 attention output (kqv_out-0)
// from its own q, k, v (Qcur_pos-0, Kcur_pos-0, Vcur_normed-0), gemma4 only (kq_scale 1): the
// steps of ggml's one_chunk kernel (docs/gemma-architecture.md, "Flash attention") with the score
// dot_f16(k, q) summed three ways: in double (ggml's scalar loop, and ours), or in f32 lanes as
// ggml_vec_dot_f16's SIMD path sums it on AVX-512 (4 accumulators of 16 lanes) or AVX2 (4 of 8),
// with the leftover elements in double. For scripts/compare-intermediates.
//
//   attention_probe MODEL.gguf LLAMA_DIR
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf_reader.h"
#include "native/mapped_file.h"
#include "ops/ops.h"
#include "quant/quant.h"

namespace {

struct Tensor {
  int64_t ne[4] = {0, 0, 0, 0};
  std::vector<float> x;
};

Tensor read_tensor(const std::string& path) {
  Tensor t;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return t;
  if (std::fread(t.ne, sizeof t.ne, 1, f) == 1) {
    t.x.resize(static_cast<size_t>(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]));
    if (std::fread(t.x.data(), sizeof(float), t.x.size(), f) != t.x.size()) t.x.clear();
  }
  std::fclose(f);
  return t;
}

float to_half(float x) { return lf::fp16_to_fp32(lf::fp32_to_fp16(x)); }

// k [D] · q [D], both f16 values: ggml_vec_dot_f16 with `lanes` f32 lanes per accumulator (0: the
// scalar loop)
float score(const float* k, const float* q, int D, int lanes) {
  constexpr int kAccumulators = 4;  // GGML_F16_ARR
  const int step = lanes * kAccumulators, done = lanes ? D - D % step : 0;
  std::vector<float> sum(static_cast<size_t>(step), 0.0f);
  for (int i = 0; i < done; i += step) {
    for (int l = 0; l < step; ++l) sum[l] = std::fmaf(k[i + l], q[i + l], sum[l]);
  }
  double total = 0.0;
  if (done > 0) {
    // GGML_F16_VEC_REDUCE: accumulator pairs, then the lanes: AVX-512's _mm512_reduce_add_ps
    // halves them down to one; AVX2 adds its two 128-bit halves, then two hadds pair neighbours.
    for (int half = step / 2; half >= lanes; half /= 2) {
      for (int l = 0; l < half; ++l) sum[l] += sum[l + half];
    }
    if (lanes == 16) {
      for (int half = 8; half > 0; half /= 2) {
        for (int l = 0; l < half; ++l) sum[l] += sum[l + half];
      }
      total = sum[0];
    } else {
      for (int l = 0; l < 4; ++l) sum[l] += sum[l + 4];
      total = (sum[0] + sum[1]) + (sum[2] + sum[3]);
    }
  }
  for (int i = done; i < D; ++i) total += static_cast<double>(k[i] * q[i]);
  return static_cast<float>(total);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: attention_probe MODEL.gguf LLAMA_DIR\n");
    return 2;
  }
  lf::MappedFile file;
  lf::GgufFile g;
  if (!lf::MappedFile::open(argv[1], &file).ok() || !lf::gguf_parse(file.data(), file.size(), file.size(), &g).ok()) return 2;
  std::string arch;
  g.get_string("general.architecture", &arch);
  if (arch != "gemma4") return 0;
  uint32_t window = 0;
  g.get_u32("gemma4.attention.sliding_window", &window);
  const lf::GgufValue* pattern = g.find("gemma4.attention.sliding_window_pattern");
  const bool sliding = pattern && !pattern->ints.empty() && pattern->ints[0] != 0;
  const std::string dir = argv[2];
  const Tensor Q = read_tensor(dir + "/Qcur_pos-0.bin"), K = read_tensor(dir + "/Kcur_pos-0.bin"),
               V = read_tensor(dir + "/Vcur_normed-0.bin"), O = read_tensor(dir + "/kqv_out-0.bin");
  if (Q.x.empty() || K.x.empty() || V.x.empty() || O.x.empty()) return 2;
  const int D = static_cast<int>(Q.ne[0]), H = static_cast<int>(Q.ne[1]), T = static_cast<int>(Q.ne[2]);
  const int HK = static_cast<int>(K.ne[1]), group = H / HK;
  std::printf("layer 0 attention, head dim %d:\n", D);
  for (const int lanes : {0, 16, 8}) {
    int64_t same = 0;
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < H; ++h) {
        std::vector<float> q(D), acc(D, 0.0f);
        for (int d = 0; d < D; ++d) q[d] = to_half(Q.x[(static_cast<size_t>(t) * H + h) * D + d]);
        float M = -INFINITY, S = 0.0f;
        for (int p = 0; p <= t; ++p) {
          if (sliding && t - p >= static_cast<int>(window)) continue;
          std::vector<float> k(D), v(D);
          for (int d = 0; d < D; ++d) {
            k[d] = to_half(K.x[(static_cast<size_t>(p) * HK + h / group) * D + d]);
            v[d] = to_half(V.x[(static_cast<size_t>(p) * HK + h / group) * D + d]);
          }
          const float s = score(k.data(), q.data(), D, lanes);
          float ms = 1.0f, vs = 1.0f;
          if (s > M) {
            ms = std::exp(M - s);
            M = s;
            for (float& a : acc) a = to_half(a * ms);
          } else {
            vs = std::exp(s - M);
          }
          for (int d = 0; d < D; ++d) acc[d] = to_half(std::fmaf(v[d], vs, acc[d]));
          S = S * ms + vs;
        }
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        for (int d = 0; d < D; ++d) {
          const float y = acc[d] * inv;
          same += std::memcmp(&y, &O.x[(static_cast<size_t>(t) * H + h) * D + d], sizeof y) == 0;
        }
      }
    }
    std::printf("  score summed %-30s %7lld of %zu outputs bit-identical\n",
                lanes == 0 ? "in double" : lanes == 16 ? "in 4 x 16 f32 lanes (AVX-512)" : "in 4 x 8 f32 lanes (AVX2)",
                static_cast<long long>(same), O.x.size());
  }
  // The engine's own reference on the same q, k and v.
  std::vector<uint16_t> k16(K.x.size()), v16(V.x.size());
  for (size_t i = 0; i < K.x.size(); ++i) k16[i] = lf::fp32_to_fp16(K.x[i]);
  for (size_t i = 0; i < V.x.size(); ++i) v16[i] = lf::fp32_to_fp16(V.x[i]);
  lf::KvView kv;
  kv.k = k16.data();
  kv.v = v16.data();
  kv.capacity = T;
  kv.n_head_kv = HK;
  kv.head_dim = D;
  std::vector<float> out(Q.x.size());
  lf::attention(Q.x.data(), T, 0, H, kv, sliding ? static_cast<int>(window) : 0, 1.0f, out.data());
  int64_t same = 0;
  for (size_t i = 0; i < out.size(); ++i) same += std::memcmp(&out[i], &O.x[i], sizeof out[i]) == 0;
  std::printf("  lf::attention (the engine's reference)      %7lld of %zu outputs bit-identical\n",
              static_cast<long long>(same), O.x.size());
}
