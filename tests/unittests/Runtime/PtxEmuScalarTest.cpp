//===- PtxEmuScalarTest.cpp - Scalar instructions in the PTX interpreter --===//
//
// Scalar f16 and bf16 arithmetic and integers to f16 and bf16 in the PTX
// interpreter against the compiler's own rounding, and the atomics and
// memory orderings it loads.
//
//===----------------------------------------------------------------------===//

#include "PtxEmuTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace tfc::testing::ptxemu;

/// The orderings and atomics the one-launch decode kernel's arrival counter
/// uses load; other forms are refused naming the line.
TEST(PtxEmu, AtomicsAndOrderingsItImplement) {
  auto load = loadsOrError;
  for (std::string good :
       {"fence.sc.gpu;", "fence.acq_rel.sys;", "membar.gl;", "membar.cta;",
        "atom.global.add.u32 %r1, [%rd1], 1;",
        "atom.acq_rel.gpu.global.add.u64 %rd2, [%rd1], %rd3;"})
    EXPECT_EQ(load(good), "loaded") << good;
  for (std::string bad : {"membar.cluster;", "fence.sc.cluster;",
                          "atom.global.cas.b32 %r1, [%rd1], %r2, %r3;",
                          "atom.global.add.f32 %r1, [%rd1], %r2;",
                          "atom.global.u32 %r1, [%rd1];"}) {
    std::string error = load(bad);
    EXPECT_NE(error, "loaded") << bad;
    EXPECT_NE(error.find("line 10:"), std::string::npos) << error;
  }
}

/// Scalar f16 and bf16 arithmetic (add, sub, mul, fma, min, max, neg, abs,
/// setp; .rn): thread i combines element i of a, b and c into 12 halves
/// of the output (24 bytes, 8-byte aligned stores). f16 results are
/// checked against the compiler's _Float16 rounding of the exact double
/// result (sums and products of two f16 are exact in a double).
std::string halfArithmetic(const char *type) {
  std::string t = type;
  return R"(
.visible .entry arith(.param .u64 pa, .param .u64 pb, .param .u64 pc,
                      .param .u64 pout)
{
  .reg .pred %p<2>;
  .reg .b16 %h<16>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [pa];
  ld.param.u64 %rd2, [pb];
  ld.param.u64 %rd3, [pc];
  ld.param.u64 %rd4, [pout];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd5, %r1, 2;
  add.s64 %rd6, %rd1, %rd5;
  add.s64 %rd7, %rd2, %rd5;
  add.s64 %rd8, %rd3, %rd5;
  ld.global.b16 %h1, [%rd6];
  ld.global.b16 %h2, [%rd7];
  ld.global.b16 %h3, [%rd8];
  add.rn.)" +
         t + R"( %h4, %h1, %h2;
  sub.rn.)" +
         t + R"( %h5, %h1, %h2;
  mul.rn.)" +
         t + R"( %h6, %h1, %h2;
  fma.rn.)" +
         t + R"( %h7, %h1, %h2, %h3;
  min.)" +
         t + R"( %h8, %h1, %h2;
  max.)" +
         t + R"( %h9, %h1, %h2;
  neg.)" +
         t + R"( %h10, %h1;
  abs.)" +
         t + R"( %h11, %h2;
  setp.lt.)" +
         t + R"( %p1, %h1, %h2;
  selp.b16 %h12, 1, 0, %p1;
  mul.wide.u32 %rd9, %r1, 24;
  add.s64 %rd10, %rd4, %rd9;
  st.global.v4.b16 [%rd10], {%h4, %h5, %h6, %h7};
  st.global.v4.b16 [%rd10+8], {%h8, %h9, %h10, %h11};
  st.global.b16 [%rd10+16], %h12;
  ret;
}
)";
}

/// Runs halfArithmetic's kernel, a thread per element of a.
void launchHalfArithmetic(Module &m, std::vector<uint16_t> &a,
                          std::vector<uint16_t> &b, std::vector<uint16_t> &c,
                          std::vector<uint16_t> &out) {
  size_t n = a.size();
  std::string error;
  ASSERT_EQ(launch(m, "arith", n,
                   {{a.data(), 2 * n},
                    {b.data(), 2 * n},
                    {c.data(), 2 * n},
                    {out.data(), 24 * n}},
                   &error),
            PTXEMU_OK)
      << error;
}

TEST(PtxEmu, HalfArithmetic) {
  Module m(halfArithmetic("f16"));
  ASSERT_NE(m.module, nullptr) << m.error;
  constexpr int n = 64;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<uint16_t> a(n), b(n), c(n), out(12 * n);
  auto value = [](uint16_t bits) {
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    return static_cast<double>(h);
  };
  auto round = [](double x) {
    _Float16 h = static_cast<_Float16>(x);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    return bits;
  };
  for (int i = 0; i < n; ++i) {
    a[i] = half(normal(gen));
    b[i] = half(normal(gen));
    c[i] = half(normal(gen));
  }
  b[3] = a[3]; // equal operands
  launchHalfArithmetic(m, a, b, c, out);
  for (int i = 0; i < n; ++i) {
    double x = value(a[i]), y = value(b[i]), z = value(c[i]);
    const uint16_t *o = &out[12 * i];
    EXPECT_EQ(o[0], round(x + y)) << i;
    EXPECT_EQ(o[1], round(x - y)) << i;
    EXPECT_EQ(o[2], round(x * y)) << i;
    EXPECT_EQ(o[3], round(std::fma(x, y, z))) << i;
    EXPECT_EQ(o[4], x < y ? a[i] : b[i]) << i;
    EXPECT_EQ(o[5], x > y ? a[i] : b[i]) << i;
    EXPECT_EQ(o[6], a[i] ^ 0x8000) << i;
    EXPECT_EQ(o[7], b[i] & 0x7fff) << i;
    EXPECT_EQ(o[8], x < y ? 1 : 0) << i;
  }
}

/// bf16: ties to even (1 + 2^-8 is halfway between 1 and 1 + 2^-7), a sum
/// that rounds up, products and fma.
TEST(PtxEmu, Bf16Arithmetic) {
  Module m(halfArithmetic("bf16"));
  ASSERT_NE(m.module, nullptr) << m.error;
  auto bf16 = [](float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    EXPECT_EQ(bits & 0xffff, 0u) << x << " is not a bf16";
    return static_cast<uint16_t>(bits >> 16);
  };
  // a, b, c and the expected a + b, a - b, a * b, a * b + c.
  struct Case {
    float a, b, c, sum, diff, prod, fma;
  } cases[] = {
      {1.0f, 0x1p-8f, 0.0f, 1.0f, 1.0f - 0x1p-8f, 0x1p-8f, 0x1p-8f},
      // 1 - 3 2^-9 is halfway between 1 - 2^-7 and 1 - 2^-8: to even.
      {1.0f, 0x3p-9f, 1.0f, 1.0f + 0x1p-7f, 1.0f - 0x1p-7f, 0x3p-9f,
       1.0f + 0x1p-7f},
      {1.5f, -2.25f, 0.5f, -0.75f, 3.75f, -3.375f, -2.875f},
      {3.0f, 3.0f, -9.0f, 6.0f, 0.0f, 9.0f, 0.0f},
  };
  constexpr int n = 4;
  std::vector<uint16_t> a(n), b(n), c(n), out(12 * n);
  for (int i = 0; i < n; ++i) {
    a[i] = bf16(cases[i].a);
    b[i] = bf16(cases[i].b);
    c[i] = bf16(cases[i].c);
  }
  launchHalfArithmetic(m, a, b, c, out);
  for (int i = 0; i < n; ++i) {
    const Case &k = cases[i];
    const uint16_t *o = &out[12 * i];
    EXPECT_EQ(o[0], bf16(k.sum)) << i;
    EXPECT_EQ(o[1], bf16(k.diff)) << i;
    EXPECT_EQ(o[2], bf16(k.prod)) << i;
    EXPECT_EQ(o[3], bf16(k.fma)) << i;
    EXPECT_EQ(o[4], k.a < k.b ? a[i] : b[i]) << i;
    EXPECT_EQ(o[5], k.a > k.b ? a[i] : b[i]) << i;
    EXPECT_EQ(o[8], k.a < k.b ? 1 : 0) << i;
  }
}

/// Integers to f16/bf16 (cvt.rn.f16.s64: a 0/1 attention mask in f16).
TEST(PtxEmu, IntegerToHalf) {
  Module m(R"(
.visible .entry cvt(.param .u64 pin, .param .u64 pout)
{
  .reg .b16 %h<3>;
  .reg .b32 %r<2>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 8;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.b64 %rd5, [%rd4];
  cvt.rn.f16.s64 %h1, %rd5;
  cvt.rn.bf16.s64 %h2, %rd5;
  mul.wide.u32 %rd6, %r1, 4;
  add.s64 %rd7, %rd2, %rd6;
  st.global.v2.b16 [%rd7], {%h1, %h2};
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  std::vector<int64_t> in = {0, 1, -3, 2049, 300};
  std::vector<uint16_t> out(2 * in.size());
  ASSERT_EQ(launch(m, "cvt", in.size(),
                   {{in.data(), 8 * in.size()}, {out.data(), 2 * out.size()}}),
            PTXEMU_OK);
  // 2049 rounds to 2048 in f16 (ties to even), 300 to 300 in bf16's 8 bits
  // (0x4396).
  std::vector<uint16_t> f16 = {half(0.0f), half(1.0f), half(-3.0f),
                               half(2048.0f), half(300.0f)};
  std::vector<uint16_t> bf16 = {0x0000, 0x3f80, 0xc040, 0x4500, 0x4396};
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[2 * i], f16[i]) << in[i];
    EXPECT_EQ(out[2 * i + 1], bf16[i]) << in[i];
  }
}

} // namespace
