//===- TensorCoreTest.cpp - A tile product on ldmatrix and mma.sync -------===//
//
// One warp multiplies a 16x16 f16 tile A by a 16x8 tile B as a kernel
// does: both tiles staged in shared memory, their fragments loaded with
// ldmatrix, one mma.sync m16n8k16 into f32, each lane storing its four
// results where the ISA's accumulator fragment puts them. The result is
// checked against the product computed here, so the interpreter's
// ldmatrix and mma.sync fragments must agree with each other and with the
// row-major tiles.
//
//===----------------------------------------------------------------------===//

#include "Harness.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace ptxi::test;

namespace {

// Lane l: copies 16 bytes of A (rows of 32 bytes) and 8 of Bt (B
// transposed, rows of 32 bytes along k) into shared memory; gives
// ldmatrix.x4 the address of row l % 8 of A's 8x8 matrix l / 8 (matrices
// ordered rows 0-7 / 8-15, then columns 0-7 / 8-15) and ldmatrix.x2 that
// of row l % 8 of Bt's matrix (l / 8) % 2 (columns 0-7, then 8-15); stores
// D's row l / 4 and l / 4 + 8, columns 2 (l % 4) and + 1.
const char *kTileProduct = R"(
.visible .entry tile(.param .u64 pa, .param .u64 pbt, .param .u64 pd)
{
  .shared .align 16 .b8 sa[512];
  .shared .align 16 .b8 sbt[256];
  .reg .b32 %r<32>;
  .reg .b64 %rd<24>;
  ld.param.u64 %rd1, [pa];
  ld.param.u64 %rd2, [pbt];
  ld.param.u64 %rd3, [pd];
  mov.u32 %r1, %tid.x;
  mov.u64 %rd4, sa;
  mov.u64 %rd5, sbt;
  mul.wide.u32 %rd6, %r1, 16;
  add.s64 %rd7, %rd1, %rd6;
  ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd7];
  add.s64 %rd8, %rd4, %rd6;
  st.shared.v4.b32 [%rd8], {%r2, %r3, %r4, %r5};
  mul.wide.u32 %rd9, %r1, 8;
  add.s64 %rd10, %rd2, %rd9;
  ld.global.v2.b32 {%r6, %r7}, [%rd10];
  add.s64 %rd11, %rd5, %rd9;
  st.shared.v2.b32 [%rd11], {%r6, %r7};
  bar.sync 0;
  and.b32 %r8, %r1, 7;
  shr.u32 %r9, %r1, 3;
  and.b32 %r10, %r9, 1;
  shl.b32 %r11, %r10, 3;
  add.u32 %r12, %r8, %r11;
  shr.u32 %r13, %r9, 1;
  shl.b32 %r14, %r13, 3;
  shl.b32 %r15, %r12, 4;
  add.u32 %r16, %r15, %r14;
  mul.wide.u32 %rd12, %r16, 2;
  add.s64 %rd13, %rd4, %rd12;
  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r17, %r18, %r19, %r20}, [%rd13];
  shl.b32 %r21, %r8, 4;
  shl.b32 %r22, %r10, 3;
  add.u32 %r23, %r21, %r22;
  mul.wide.u32 %rd14, %r23, 2;
  add.s64 %rd15, %rd5, %rd14;
  ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r24, %r25}, [%rd15];
  mov.b32 %r26, 0;
  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
    {%r27, %r28, %r29, %r30}, {%r17, %r18, %r19, %r20}, {%r24, %r25},
    {%r26, %r26, %r26, %r26};
  shr.u32 %r2, %r1, 2;
  and.b32 %r3, %r1, 3;
  shl.b32 %r4, %r2, 3;
  shl.b32 %r5, %r3, 1;
  add.u32 %r6, %r4, %r5;
  mul.wide.u32 %rd16, %r6, 4;
  add.s64 %rd17, %rd3, %rd16;
  st.global.v2.b32 [%rd17], {%r27, %r28};
  st.global.v2.b32 [%rd17+256], {%r29, %r30};
  ret;
}
)";

uint16_t toHalf(float x) {
  _Float16 h = static_cast<_Float16>(x);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

TEST(TensorCore, LdmatrixAndMmaSyncMultiplyATile) {
  PtxModule module(kTileProduct);
  ASSERT_TRUE(module.loaded()) << module.error();
  // Integers small enough for every product and sum to be exact in f16
  // operands and f32 results.
  float A[16][16], B[16][8];
  std::vector<uint16_t> a(16 * 16), bt(8 * 16);
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) {
      A[i][k] = float((3 * i + 5 * k) % 11 - 5);
      a[i * 16 + k] = toHalf(A[i][k]);
    }
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < 8; ++j) {
      B[k][j] = float((7 * k + 2 * j) % 9 - 4);
      bt[j * 16 + k] = toHalf(B[k][j]);
    }
  std::vector<float> d(16 * 8, -999.0f), expect(16 * 8, 0.0f);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j)
      for (int k = 0; k < 16; ++k)
        expect[i * 8 + j] += A[i][k] * B[k][j];
  std::string error;
  ASSERT_EQ(launch(module, "tile", 1, 32,
                   {bufferOf(a), bufferOf(bt), bufferOf(d)}, &error),
            PTXEMU_OK)
      << error;
  EXPECT_EQ(d, expect);
}

/// mma.sync is warp-wide: in a block of 16 threads it fails the launch.
TEST(TensorCore, MmaSyncInAPartialWarpFails) {
  PtxModule module(kTileProduct);
  ASSERT_TRUE(module.loaded()) << module.error();
  std::vector<uint16_t> a(16 * 16), bt(8 * 16);
  std::vector<float> d(16 * 8);
  std::string error;
  EXPECT_EQ(launch(module, "tile", 1, 16,
                   {bufferOf(a), bufferOf(bt), bufferOf(d)}, &error),
            PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("ldmatrix in a partial warp"), std::string::npos)
      << error;
}

} // namespace
