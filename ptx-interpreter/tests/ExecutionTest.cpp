//===- ExecutionTest.cpp - Threads, control flow, shared memory, faults ---===//
//
// Kernels that each thread runs on its own (integer and f32 arithmetic, a
// loop, predicates, partial warps and several blocks), kernels whose warps
// share memory across a barrier (and read what the other warps have not
// written yet without one), and the message a faulting launch gives.
//
//===----------------------------------------------------------------------===//

#include "Harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

using namespace ptxi::test;

namespace {

/// Thread i of the grid (i < 100) writes three words at out + 12 i: the
/// sum of k * k for k < i % 13 (a loop), min(i * 0.5 + 1.25, 10) as an
/// f32, negated for odd i (selp), and ((7 - i) / 3 << 4) >> 2 (signed).
const char *kArithmetic = R"(
.visible .entry arith(.param .u64 pout)
{
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  setp.ge.u32 %p1, %r4, 100;
  @%p1 bra DONE;
  rem.u32 %r5, %r4, 13;
  mov.u32 %r6, 0;
  mov.u32 %r7, 0;
LOOP:
  setp.ge.u32 %p2, %r6, %r5;
  @%p2 bra AFTER;
  mad.lo.u32 %r7, %r6, %r6, %r7;
  add.u32 %r6, %r6, 1;
  bra.uni LOOP;
AFTER:
  cvt.rn.f32.u32 %f1, %r4;
  fma.rn.f32 %f2, %f1, 0f3F000000, 0f3FA00000;
  min.f32 %f3, %f2, 0f41200000;
  and.b32 %r8, %r4, 1;
  setp.eq.u32 %p3, %r8, 1;
  neg.f32 %f4, %f3;
  selp.f32 %f5, %f4, %f3, %p3;
  sub.s32 %r9, 7, %r4;
  div.s32 %r10, %r9, 3;
  shl.b32 %r11, %r10, 4;
  shr.s32 %r12, %r11, 2;
  mul.wide.u32 %rd2, %r4, 12;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  st.global.f32 [%rd3+4], %f5;
  st.global.s32 [%rd3+8], %r12;
DONE:
  ret;
}
)";

TEST(Execution, ArithmeticLoopsAndPredicatesPerThread) {
  PtxModule module(kArithmetic);
  ASSERT_TRUE(module.loaded()) << module.error();
  struct Out {
    uint32_t sum;
    float f;
    int32_t shifted;
  };
  static_assert(sizeof(Out) == 12, "three words per thread");
  std::vector<Out> out(100, Out{0xabababab, -1.0f, -1});
  // 3 blocks of 40 threads: partial warps, and threads past the output.
  std::string error;
  ASSERT_EQ(launch(module, "arith", 3, 40, {bufferOf(out)}, &error), PTXEMU_OK)
      << error;
  for (int i = 0; i < 100; ++i) {
    uint32_t sum = 0;
    for (int k = 0; k < i % 13; ++k)
      sum += uint32_t(k * k);
    float f = std::min(float(i) * 0.5f + 1.25f, 10.0f);
    EXPECT_EQ(out[i].sum, sum) << "thread " << i;
    EXPECT_EQ(out[i].f, i % 2 ? -f : f) << "thread " << i;
    EXPECT_EQ(out[i].shifted, (7 - i) / 3 * 4) << "thread " << i;
  }
}

/// 128 threads (4 warps) reverse 128 words through shared memory: each
/// stores its word, then `barrier`, then reads its mirror's.
std::string reversal(const std::string &barrier) {
  return R"(
.visible .entry rev(.param .u64 pin, .param .u64 pout)
{
  .shared .align 4 .b8 words[512];
  .reg .b32 %r<8>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ntid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r3, [%rd4];
  mov.u64 %rd5, words;
  add.s64 %rd6, %rd5, %rd3;
  st.shared.u32 [%rd6], %r3;
  )" + barrier +
         R"(
  sub.u32 %r4, %r2, %r1;
  sub.u32 %r5, %r4, 1;
  mul.wide.u32 %rd7, %r5, 4;
  add.s64 %rd8, %rd5, %rd7;
  ld.shared.u32 %r6, [%rd8];
  add.s64 %rd9, %rd2, %rd3;
  st.global.u32 [%rd9], %r6;
  ret;
}
)";
}

/// A barrier instruction and a name for it.
struct Barrier {
  const char *name, *text;
};
void PrintTo(const Barrier &b, std::ostream *os) { *os << b.text; }

class BarrierForms : public testing::TestWithParam<Barrier> {};

TEST_P(BarrierForms, OrderSharedMemoryAcrossWarps) {
  PtxModule module(reversal(GetParam().text));
  ASSERT_TRUE(module.loaded()) << module.error();
  std::vector<uint32_t> in(128), out(128, 0);
  for (uint32_t i = 0; i < 128; ++i)
    in[i] = 1000 + 7 * i;
  std::string error;
  ASSERT_EQ(
      launch(module, "rev", 1, 128, {bufferOf(in), bufferOf(out)}, &error),
      PTXEMU_OK)
      << error;
  for (int i = 0; i < 128; ++i)
    EXPECT_EQ(out[i], in[127 - i]) << "thread " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Execution, BarrierForms,
    testing::Values(Barrier{"BarSync", "bar.sync 0;"},
                    Barrier{"BarrierSyncAligned", "barrier.sync.aligned 0;"},
                    Barrier{"NamedBarrierOfAllThreads", "bar.sync 1, 128;"}),
    [](const testing::TestParamInfo<Barrier> &info) {
      return std::string(info.param.name);
    });

/// Each warp runs as far as it can before the next starts: without the
/// barrier, warp 0 reads the words of warp 3 before warp 3 has stored them.
TEST(Execution, WithoutABarrierTheFirstWarpReadsUnwrittenWords) {
  PtxModule module(reversal(""));
  ASSERT_TRUE(module.loaded()) << module.error();
  std::vector<uint32_t> in(128), out(128, 0);
  for (uint32_t i = 0; i < 128; ++i)
    in[i] = 1000 + 7 * i;
  ASSERT_EQ(launch(module, "rev", 1, 128, {bufferOf(in), bufferOf(out)}),
            PTXEMU_OK);
  for (int i = 0; i < 32; ++i)
    EXPECT_NE(out[i], in[127 - i]) << "thread " << i;
}

/// A store past the only allocation fails the launch, naming the kernel,
/// block, thread, PTX line and instruction, and the bytes.
TEST(Execution, AnAccessOutsideDeviceMemoryNamesThreadAndLine) {
  PtxModule module(R"(
.visible .entry oob(.param .u64 pout)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r1;
  ret;
}
)");
  ASSERT_TRUE(module.loaded()) << module.error();
  std::vector<uint32_t> out(1, 0);
  std::string error;
  EXPECT_EQ(launch(module, "oob", 1, 2, {bufferOf(out)}, &error),
            PTXEMU_ILLEGAL_ADDRESS);
  EXPECT_EQ(out[0], 0u) << "thread 0 stores its id";
  char expect[256];
  snprintf(expect, sizeof expect,
           "kernel oob, block (0,0,0), thread (1,0,0), line 13: "
           "st.global.u32 [%%rd3], %%r1: 4 bytes at 0x%llx are not device "
           "memory",
           (unsigned long long)(uintptr_t)(out.data() + 1));
  EXPECT_EQ(error, expect);
}

/// A block beyond 1024 threads is refused before anything runs.
TEST(Execution, ABlockOfMoreThan1024ThreadsIsInvalid) {
  PtxModule module(R"(
.visible .entry nothing(.param .u64 p)
{
  ret;
}
)");
  ASSERT_TRUE(module.loaded()) << module.error();
  std::vector<uint32_t> unused(1);
  std::string error;
  EXPECT_EQ(launch(module, "nothing", 1, 1025, {bufferOf(unused)}, &error),
            PTXEMU_INVALID_VALUE);
  EXPECT_EQ(error, "block of 1025 threads");
}

} // namespace
