// sin_f32 / cos_f32 against glibc's sinf / cosf on an x86-64 CPU with FMA, the values llama.cpp's
// RoPE cache holds there (docs/gemma-architecture.md, "RoPE").
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include "ops/ops.h"
#include "quant/quant.h"

namespace {

// {x, sinf(x), cosf(x)} as bits, printed by glibc 2.36's sinf / cosf on this project's AVX-512
// host (its FMA variant). The first 8 are RoPE angles (base 10000, n_rot 256, positions 1-3)
// where Emscripten's musl gives another f32; the next 4 lie near multiples of pi/2, where the
// same computation without its fused steps gives another f32 (34 such inputs among all 2^32);
// the rest walk every path: below 2^-12 (and a subnormal), below pi/4, the one-step reduction
// below 120, and the 4/pi-bits reduction up to FLT_MAX, both signs.
struct Expected {
  uint32_t x, sin, cos;
};
constexpr Expected kGlibc[] = {
    {0x3ef953cc, 0x3eef96e1, 0x3f623dd5},  // 0x1.f2a798p-2
    {0x3e297407, 0x3e28ae50, 0x3f7c80b9},  // 0x1.52e80ep-3
    {0x3fb2a506, 0x3f7c157f, 0x3e326c4f},  // 0x1.654a0cp+0
    {0x3d7c564a, 0x3d7c2d70, 0x3f7f83ad},  // 0x1.f8ac94p-5
    {0x4032a506, 0x3eafb199, 0xbf7074a7},  // 0x1.654a0cp+1
    {0x3f5247ea, 0x3f3b6b5c, 0x3f2e6274},  // 0x1.a48fd4p-1
    {0x3e8eea68, 0x3e8d1127, 0x3f76176c},  // 0x1.1dd4dp-2
    {0x3e399d14, 0x3e38994d, 0x3f7bce4f},  // 0x1.733a28p-3
    {0x418a3adb, 0xbf800000, 0xb7b4f770},  // 0x1.1475b6p+4
    {0x41bc76d9, 0xbf7fff80, 0xbb803f6b},  // 0x1.78edb2p+4
    {0x4255b0a9, 0xbc7d08a9, 0xbf7ff82f},  // 0x1.ab6152p+5
    {0x42a35c07, 0xbadaa3b4, 0x3f7fffe9},  // 0x1.46b80ep+6
    {0x00000000, 0x00000000, 0x3f800000},  // 0x0p+0
    {0x80000000, 0x80000000, 0x3f800000},  // -0x0p+0
    {0x3727c5ac, 0x3727c5ac, 0x3f800000},  // 0x1.4f8b58p-17
    {0x00080000, 0x00080000, 0x3f800000},  // 0x1p-130
    {0x3f000000, 0x3ef57744, 0x3f60a940},  // 0x1p-1
    {0xbf333333, 0xbf24eb73, 0x3f43ccb3},  // -0x1.666666p-1
    {0x3f48f5c3, 0x3f34f27f, 0x3f351765},  // 0x1.91eb86p-1
    {0x3f800000, 0x3f576aa4, 0x3f0a5140},  // 0x1p+0
    {0x40000000, 0x3f68c7b7, 0xbed51133},  // 0x1p+1
    {0x40490fdb, 0xb3bbbd2e, 0xbf800000},  // 0x1.921fb6p+1
    {0xc0490fdb, 0x33bbbd2e, 0xbf800000},  // -0x1.921fb6p+1
    {0x4096cbe4, 0xbf800000, 0x324cde2e},  // 0x1.2d97c8p+2
    {0x41200000, 0xbf0b44f8, 0xbf56cd64},  // 0x1.4p+3
    {0xc2480000, 0x3e8655ff, 0x3f770803},  // -0x1.9p+5
    {0x42efcccd, 0x3efe2bff, 0x3f5e3a4d},  // 0x1.df999ap+6
    {0x42f00000, 0x3f14a2ef, 0x3f506e2a},  // 0x1.ep+6
    {0x447a0000, 0x3f53ae61, 0x3f0ff813},  // 0x1.f4p+9
    {0xc640e6b6, 0x3f344b08, 0x3f35be20},  // -0x1.81cd6cp+13
    {0x49742400, 0xbeb33259, 0x3f6fcefd},  // 0x1.e848p+19
    {0x60ad78ec, 0x3f281569, 0x3f411723},  // 0x1.5af1d8p+66
    {0x7f7fc99e, 0xbe79f163, 0x3f7841ca},  // 0x1.ff933cp+127
    {0xff7fc99e, 0x3e79f163, 0x3f7841ca},  // -0x1.ff933cp+127
};

}  // namespace

TEST_CASE("sin_f32 and cos_f32 give glibc's bits where musl's differ and on every reduction path", "[ops]") {
  for (const Expected& e : kGlibc) {
    const float x = lf::f32_from_bits(e.x);
    INFO("x = " << x);
    CHECK(lf::f32_bits(lf::sin_f32(x)) == e.sin);
    CHECK(lf::f32_bits(lf::cos_f32(x)) == e.cos);
  }
}

TEST_CASE("sin_f32 and cos_f32 of inf and NaN are NaN", "[ops]") {
  for (const float x : {INFINITY, -INFINITY, NAN}) {
    CHECK(std::isnan(lf::sin_f32(x)));
    CHECK(std::isnan(lf::cos_f32(x)));
  }
}

#if defined(__GLIBC__) && defined(__x86_64__)
TEST_CASE("sin_f32 and cos_f32 equal this host's glibc on every 257th float (natively, with FMA)", "[ops]") {
  if (!__builtin_cpu_supports("fma") || !__builtin_cpu_supports("avx2")) {
    WARN("glibc runs its non-FMA sinf / cosf on this CPU: nothing to compare against");
    return;
  }
  int64_t differ = 0;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 257) {
    const float x = lf::f32_from_bits(static_cast<uint32_t>(u));
    if (std::isnan(x) || std::isinf(x)) continue;
    differ += lf::f32_bits(lf::sin_f32(x)) != lf::f32_bits(sinf(x));
    differ += lf::f32_bits(lf::cos_f32(x)) != lf::f32_bits(cosf(x));
  }
  CHECK(differ == 0);
}
#endif
