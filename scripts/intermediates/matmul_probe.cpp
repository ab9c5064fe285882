// Which arithmetic reproduces llama.cpp's bits for one weight matmul: W (Q4_0 or Q8_0, from the
// GGUF) times llama.cpp's own input X (a llama_dump file), each activation quantizer times each
// f32 block step, counted against llama.cpp's output Y. For scripts/compare-intermediates.
//
//   matmul_probe MODEL.gguf WEIGHT X.bin Y.bin
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gguf/gguf_reader.h"
#include "native/mapped_file.h"
#include "quant/quant.h"
#include "quant/unpack.h"

namespace {

using namespace lf;

std::vector<float> read_tensor(const char* path) {
  std::vector<float> x;
  FILE* f = std::fopen(path, "rb");
  if (!f) return x;
  int64_t ne[4];
  if (std::fread(ne, sizeof ne, 1, f) == 1) {
    x.resize(static_cast<size_t>(ne[0] * ne[1] * ne[2] * ne[3]));
    if (std::fread(x.data(), sizeof(float), x.size(), f) != x.size()) x.clear();
  }
  std::fclose(f);
  return x;
}

// llama.cpp's generic C quantizer: id = 1/d, halves away from zero
void quantize_generic(const float* x, block_q8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127, id = d != 0 ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < 32; ++j) y[b].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

// its x86 AVX one: id = 127/amax, halves to even
void quantize_x86(const float* x, block_q8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    y[b].d = fp32_to_fp16(amax / 127);
    for (int j = 0; j < 32; ++j) y[b].qs[j] = static_cast<int8_t>(std::nearbyintf(x[j] * id));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: matmul_probe MODEL.gguf WEIGHT X.bin Y.bin\n");
    return 2;
  }
  MappedFile file;
  GgufFile g;
  if (!MappedFile::open(argv[1], &file).ok() || !gguf_parse(file.data(), file.size(), file.size(), &g).ok()) return 2;
  const GgufTensorInfo* t = g.tensor(argv[2]);
  if (!t || (t->type != GgmlType::Q4_0 && t->type != GgmlType::Q8_0)) {
    std::fprintf(stderr, "matmul_probe: %s is not a Q4_0 or Q8_0 tensor\n", argv[2]);
    return 2;
  }
  const uint8_t* w = file.data() + g.data_offset + t->offset;
  const int64_t K = t->ne[0], N = t->ne[1], nb = K / 32;
  const std::vector<float> X = read_tensor(argv[3]), Y = read_tensor(argv[4]);
  const int64_t M = static_cast<int64_t>(X.size()) / K;
  if (M == 0 || static_cast<int64_t>(Y.size()) != M * N) {
    std::fprintf(stderr, "matmul_probe: shapes do not match\n");
    return 2;
  }
  std::printf("%s [%lld -> %lld] x %lld rows:\n", argv[2], static_cast<long long>(K), static_cast<long long>(N),
              static_cast<long long>(M));
  for (int quantizer = 0; quantizer < 2; ++quantizer) {
    std::vector<block_q8_0> A(static_cast<size_t>(M * nb));
    for (int64_t m = 0; m < M; ++m) (quantizer ? quantize_x86 : quantize_generic)(&X[m * K], &A[m * nb], K);
    for (int fused = 0; fused < 2; ++fused) {
      int64_t same = 0;
      for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
          float acc = 0;
          for (int64_t b = 0; b < nb; ++b) {
            int8_t q[32];
            float dw;
            if (t->type == GgmlType::Q4_0) {
              const auto& blk = reinterpret_cast<const block_q4_0*>(w)[n * nb + b];
              unpack_q4_0(blk, q);
              dw = fp16_to_fp32(blk.d);
            } else {
              const auto& blk = reinterpret_cast<const block_q8_0*>(w)[n * nb + b];
              std::memcpy(q, blk.qs, sizeof q);
              dw = fp16_to_fp32(blk.d);
            }
            int32_t sumi = 0;
            for (int j = 0; j < 32; ++j) sumi += q[j] * A[m * nb + b].qs[j];
            const float dy = fp16_to_fp32(A[m * nb + b].d);
            // dw·dy of two f16 is exact in f32, so the generic step is acc + round(sumi·dw·dy)
            if (fused) {
              acc = std::fmaf(static_cast<float>(sumi), dw * dy, acc);
            } else {
              const float p = static_cast<float>(sumi) * (dw * dy);
              acc = acc + p;
            }
          }
          same += std::memcmp(&acc, &Y[m * N + n], sizeof acc) == 0;
        }
      }
      std::printf("  quantizer %-7s  block step %-28s %7lld of %lld outputs bit-identical\n",
                  quantizer ? "x86" : "generic", fused ? "fma(sumi, dw*dy, acc)" : "acc + sumi*dw*dy (rounded)",
                  static_cast<long long>(same), static_cast<long long>(M * N));
    }
  }
}
