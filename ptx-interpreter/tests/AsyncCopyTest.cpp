//===- AsyncCopyTest.cpp - cp.async and a TMA load on an mbarrier ---------===//
//
// Copies land when their wait completes, not when they are issued: a
// cp.async destination read before cp.async.wait_group holds NaNs, after it
// the source's bytes; a TMA load (cp.async.bulk.tensor) is performed when a
// try_wait on its mbarrier finds the phase's arrival and bytes in, fills
// the box's out-of-bound elements with zeros, and a box read before the
// wait holds NaNs.
//
//===----------------------------------------------------------------------===//

#include "Harness.h"

#include "ptxi/fake_tensor_map.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace ptxi::test;

namespace {

/// Lane l copies 16 bytes of `in` into shared memory with cp.async, stores
/// what it reads there before the wait to `before`, waits, and after a
/// barrier stores lane (l + 1) % 32's 16 bytes to `after`.
const char *kCpAsync = R"(
.visible .entry cpa(.param .u64 pin, .param .u64 pbefore, .param .u64 pafter)
{
  .shared .align 16 .b8 stage[512];
  .reg .b32 %r<16>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pbefore];
  ld.param.u64 %rd3, [pafter];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 16;
  add.s64 %rd5, %rd1, %rd4;
  mov.u64 %rd6, stage;
  add.s64 %rd7, %rd6, %rd4;
  cp.async.cg.shared.global [%rd7], [%rd5], 16;
  cp.async.commit_group;
  ld.shared.v4.b32 {%r2, %r3, %r4, %r5}, [%rd7];
  add.s64 %rd8, %rd2, %rd4;
  st.global.v4.b32 [%rd8], {%r2, %r3, %r4, %r5};
  cp.async.wait_group 0;
  bar.sync 0;
  add.u32 %r6, %r1, 1;
  and.b32 %r7, %r6, 31;
  mul.wide.u32 %rd9, %r7, 16;
  add.s64 %rd10, %rd6, %rd9;
  ld.shared.v4.b32 {%r8, %r9, %r10, %r11}, [%rd10];
  add.s64 %rd11, %rd3, %rd4;
  st.global.v4.b32 [%rd11], {%r8, %r9, %r10, %r11};
  ret;
}
)";

TEST(AsyncCopy, CpAsyncLandsAtItsWait) {
  PtxModule module(kCpAsync);
  ASSERT_TRUE(module.loaded()) << module.error();
  std::vector<uint32_t> in(128), before(128, 0), after(128, 0);
  for (uint32_t i = 0; i < 128; ++i)
    in[i] = 0x10000 + i;
  std::string error;
  ASSERT_EQ(launch(module, "cpa", 1, 32,
                   {bufferOf(in), bufferOf(before), bufferOf(after)}, &error),
            PTXEMU_OK)
      << error;
  // Before the wait: the poison (a NaN in f16, bf16 and f32).
  EXPECT_EQ(before, std::vector<uint32_t>(128, 0xffffffffu));
  for (int lane = 0; lane < 32; ++lane)
    for (int w = 0; w < 4; ++w)
      EXPECT_EQ(after[lane * 4 + w], in[(lane + 1) % 32 * 4 + w])
          << "lane " << lane << " word " << w;
}

/// Thread 0 initializes the mbarrier (one arrival), arrives announcing the
/// box's 128 bytes and issues a 2-d TMA load of an 8x4 box of 4-byte
/// elements at `coords` (x, y) from the tensor map at `ptmap`; every thread
/// then reads word tid of the box, after waiting on the mbarrier's phase 0
/// or, `readEarly`, before (and before a barrier, so that no thread's wait
/// has performed the copy yet), and stores it to `pout`.
std::string tmaKernel(bool readEarly) {
  std::string read = R"(
  ld.shared.b32 %r6, [%rd4];)";
  if (readEarly)
    read += "\n  bar.sync 0;";
  std::string wait = R"(
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p1, [bar], 0;
  @!%p1 bra WAIT;)";
  return R"(
.visible .entry tma(.param .u64 ptmap, .param .u64 pcoords, .param .u64 pout)
{
  .shared .align 128 .b8 box[128];
  .shared .align 8 .b8 bar[8];
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [ptmap];
  ld.param.u64 %rd2, [pcoords];
  ld.param.u64 %rd3, [pout];
  ld.global.v2.u32 {%r2, %r3}, [%rd2];
  mov.u32 %r1, %tid.x;
  setp.eq.u32 %p0, %r1, 0;
  @%p0 mbarrier.init.shared::cta.b64 [bar], 1;
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
  @%p0 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [bar], 128;
  @%p0 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [box], [%rd1, {%r2, %r3}], [bar];
  mov.u64 %rd6, box;
  mul.wide.u32 %rd7, %r1, 4;
  add.s64 %rd4, %rd6, %rd7;)" +
         (readEarly ? read + wait : wait + read) + R"(
  add.s64 %rd5, %rd3, %rd7;
  st.global.b32 [%rd5], %r6;
  ret;
}
)";
}

/// A 20 x 6 tensor of 4-byte elements, rows 80 bytes apart, and its map
/// for boxes of 8 x 4, as the fake driver's cuTensorMapEncodeTiled writes
/// it.
struct Tensor {
  alignas(64) fake_tensor_map map = {};
  alignas(16) uint32_t data[6][20];
  Tensor() {
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 20; ++x)
        data[y][x] = uint32_t(100 * y + x + 1);
    map.magic = FAKE_TENSOR_MAP_MAGIC;
    map.dataType = 7; // f32
    map.rank = 2;
    map.elementBytes = 4;
    map.address = uint64_t(uintptr_t(data));
    map.dims[0] = 20;
    map.dims[1] = 6;
    map.strides[0] = 20 * 4;
    map.box[0] = 8;
    map.box[1] = 4;
    map.elementStrides[0] = map.elementStrides[1] = 1;
  }
};

/// Loads `text` and launches its kernel `tma` on one warp, with a Tensor
/// and a box at `coords`; `out` gets each thread's word.
int runTma(const std::string &text, std::vector<int32_t> coords,
           std::vector<uint32_t> &out, std::string &error) {
  PtxModule module(text);
  if (!module.loaded()) {
    error = module.error();
    return -1;
  }
  Tensor tensor;
  out.assign(32, 0xdeadbeef);
  return launch(module, "tma", 1, 32,
                {{&tensor, sizeof tensor}, bufferOf(coords), bufferOf(out)},
                &error);
}

TEST(AsyncCopy, TmaLoadLandsAtTheMbarrierWaitWithItsBoundsFilled) {
  // Columns 16..23 and rows 4..7: columns 20.. and rows 6.. lie outside.
  std::vector<uint32_t> out, expect(32);
  for (int i = 0; i < 32; ++i) {
    int x = 16 + i % 8, y = 4 + i / 8;
    expect[i] = x < 20 && y < 6 ? Tensor().data[y][x] : 0;
  }
  std::string error;
  ASSERT_EQ(runTma(tmaKernel(false), {16, 4}, out, error), PTXEMU_OK) << error;
  EXPECT_EQ(out, expect);
}

TEST(AsyncCopy, ATmaBoxReadBeforeItsWaitHoldsNaNs) {
  std::vector<uint32_t> out;
  std::string error;
  ASSERT_EQ(runTma(tmaKernel(true), {0, 0}, out, error), PTXEMU_OK) << error;
  EXPECT_EQ(out, std::vector<uint32_t>(32, 0xffffffffu));
}

/// A try_wait on a phase whose bytes never arrive (expect-tx announced
/// more than the copy brings) fails the launch, saying what is missing.
TEST(AsyncCopy, AnMbarrierPhaseThatNeverCompletesFailsTheLaunch) {
  std::string text = tmaKernel(false);
  text.replace(text.find("[bar], 128;"), 11, "[bar], 256;");
  std::vector<uint32_t> out;
  std::string error;
  EXPECT_EQ(runTma(text, {0, 0}, out, error), PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("never completes phase 0: 0 arrivals and 128 bytes "
                       "missing"),
            std::string::npos)
      << error;
}

} // namespace
