//===- PtxEmuMbarrierTest.cpp - mbarriers in the PTX interpreter ----------===//
//
// mbarrier phases in the PTX interpreter, in a pipeline of TMA loads as
// tfc's kernels run one; what a launch reports about mbarriers and TMA, and
// the forms of both that load.
//
//===----------------------------------------------------------------------===//

#include "PtxEmuTestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace tfc::testing::ptxemu;

/// Pipeline of 2 stages over 5 tiles of 8 x 64 f16, as tfc's kernels run
/// one: thread 0 loads, every thread waits on the stage's "full" mbarrier
/// (parity of the round), sums its 4 elements and arrives on the "empty"
/// one (count 128), which thread 0 waits on before reloading the stage.
/// Each stage's mbarriers go through 2 or 3 phases. Without the wait on
/// "empty", thread 0 reloads a stage the other warps have not read: the
/// launch fails or the sums are wrong.
TEST(PtxEmu, MbarrierPipelineOverSeveralPhases) {
  const int tiles = 5;
  std::vector<uint16_t> g(tiles * 8 * 64);
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = half(float(int(i * 7 % 23) - 11));
  TensorMap map =
      tensorMap(g.data(), 2, {64, uint64_t(tiles * 8)}, {128}, {64, 8}, 0);
  std::string emptyWait =
      "$L__empty:\n"
      "  mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p4, [%r16], "
      "%r13;\n  @!%p4 bra $L__empty;\n";
  auto kernel = [&](const std::string &wait) {
    std::string body = R"(
  @%p1 bra $L__inited;
  mbarrier.init.shared::cta.b64 [%r1], 1;
  mbarrier.init.shared::cta.b64 [%r1+8], 1;
  mbarrier.init.shared.b64 [%r1+16], 128;
  mbarrier.init.shared.b64 [%r1+24], 128;
  fence.mbarrier_init.release.cluster;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 1024;
)" + tmaLoad(0, {0, 0}) +
                       R"(
  mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r1+8], 1024;
)" + tmaLoad(1024, {0, 8}, "%rd1", "%r1+8") +
                       R"($L__inited:
  bar.sync 0;
  mov.f32 %f1, 0f00000000;
  mov.u32 %r10, 0;
$L__loop:
  and.b32 %r11, %r10, 1;
  shr.u32 %r12, %r10, 1;
  and.b32 %r13, %r12, 1;
  shl.b32 %r15, %r11, 3;
  add.u32 %r15, %r15, %r1;
  add.u32 %r16, %r15, 16;
  shl.b32 %r18, %r11, 10;
  add.u32 %r18, %r18, %r2;
)" + waitLoop("L__full", "%r15") +
                       R"(  shl.b32 %r20, %r9, 3;
  add.u32 %r21, %r18, %r20;
  ld.shared.v2.b32 {%r22, %r23}, [%r21];
  mov.b32 {%rs1, %rs2}, %r22;
  mov.b32 {%rs3, %rs4}, %r23;
  cvt.f32.f16 %f2, %rs1;
  add.f32 %f1, %f1, %f2;
  cvt.f32.f16 %f2, %rs2;
  add.f32 %f1, %f1, %f2;
  cvt.f32.f16 %f2, %rs3;
  add.f32 %f1, %f1, %f2;
  cvt.f32.f16 %f2, %rs4;
  add.f32 %f1, %f1, %f2;
  mbarrier.arrive.release.cta.shared::cta.b64 %rd6, [%r16];
  @%p1 bra $L__next;
  add.u32 %r24, %r10, 2;
  setp.ge.u32 %p3, %r24, )" +
                       std::to_string(tiles) + R"(;
  @%p3 bra $L__next;
)" + wait + R"(  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r15], 1024;
  shl.b32 %r41, %r24, 3;
  mov.u32 %r40, 0;
  cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes [%r18], [%rd1, {%r40, %r41}], [%r15];
$L__next:
  add.u32 %r10, %r10, 1;
  setp.lt.u32 %p5, %r10, )" +
                       std::to_string(tiles) + R"(;
  @%p5 bra $L__loop;
  bar.sync 0;
  shl.b32 %r27, %r9, 2;
  add.u32 %r27, %r27, 4096;
  add.u32 %r28, %r2, %r27;
  st.shared.f32 [%r28], %f1;
)";
    return tmaKernel(4096 + 512, body);
  };
  // Thread t sums elements 4t..4t+3 of each tile (exact: small integers).
  std::vector<float> want(128, 0.0f);
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < tiles; ++i)
      for (int e = 0; e < 4; ++e) {
        _Float16 h;
        std::memcpy(&h, &g[i * 512 + 4 * t + e], 2);
        want[t] += float(h);
      }
  std::vector<uint8_t> tile(4096 + 512, 0);
  std::string error;
  ASSERT_EQ(runTma(kernel(emptyWait), map, tile, 128, &error), PTXEMU_OK)
      << error;
  std::vector<float> got(128);
  std::memcpy(got.data(), &tile[4096], 512);
  EXPECT_EQ(got, want);

  // The same with thread 0 spinning on test_wait, which never blocks.
  std::string emptySpin =
      "$L__empty:\n"
      "  mbarrier.test_wait.parity.shared::cta.b64 %p4, [%r16], %r13;\n"
      "  @!%p4 bra $L__empty;\n";
  std::fill(tile.begin(), tile.end(), 0);
  ASSERT_EQ(runTma(kernel(emptySpin), map, tile, 128, &error), PTXEMU_OK)
      << error;
  std::memcpy(got.data(), &tile[4096], 512);
  EXPECT_EQ(got, want);

  int rc = runTma(kernel(""), map, tile, 128, &error);
  std::memcpy(got.data(), &tile[4096], 512);
  EXPECT_TRUE(rc != PTXEMU_OK || got != want) << "the race went unseen";
}

/// What a launch reports about mbarriers and TMA loads.
TEST(PtxEmu, MbarrierAndTmaLaunchErrors) {
  std::vector<uint16_t> g = numbered<uint16_t>(64 * 64);
  TensorMap map = tensorMap(g.data(), 2, {64, 64}, {128}, {64, 8}, 3);
  auto expectFailure = [&](const std::string &body, int code,
                           const std::string &what,
                           std::vector<TensorMap> maps = {}) {
    Module m(tmaKernel(2048, body));
    ASSERT_NE(m.module, nullptr) << m.error;
    std::vector<uint8_t> tile(2048);
    std::string error;
    if (maps.empty())
      maps = {map};
    EXPECT_EQ(runTmaMaps(m, maps, tile, &error, 32), code) << body;
    EXPECT_NE(error.find(what), std::string::npos) << error;
    EXPECT_NE(error.find("kernel tma, block (0,0,0)"), std::string::npos)
        << error;
  };
  const std::string init = "  mbarrier.init.shared::cta.b64 [%r1], 1;\n";
  const std::string initTwo = "  mbarrier.init.shared::cta.b64 [%r1], 2;\n";
  // An arrival missing: every thread waits for ever.
  expectFailure("  @%p1 bra $L__go;\n" + initTwo +
                    "  mbarrier.arrive.shared::cta.b64 _, [%r1];\n"
                    "$L__go:\n  bar.sync 0;\n" +
                    waitLoop("L__wait"),
                PTXEMU_LAUNCH_FAILED,
                "mbarrier at shared 0x800 never completes phase 0: 1 "
                "arrivals and 0 bytes missing");
  // The same, spinning on test_wait.
  expectFailure("  @%p1 bra $L__go;\n" + initTwo +
                    "  mbarrier.arrive.shared::cta.b64 _, [%r1];\n"
                    "$L__go:\n  bar.sync 0;\n$L__spin:\n"
                    "  mbarrier.test_wait.parity.shared::cta.b64 %p4, [%r1], "
                    "0;\n  @!%p4 bra $L__spin;\n",
                PTXEMU_LAUNCH_FAILED,
                "never completes phase 0: 1 arrivals and 0 bytes missing");
  // Bytes missing: 2048 expected, 1024 loaded.
  expectFailure(
      "  @%p1 bra $L__go;\n" + init +
          "  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 2048;\n" +
          tmaLoad(0, {0, 0}) + "$L__go:\n  bar.sync 0;\n" + waitLoop("L__wait"),
      PTXEMU_LAUNCH_FAILED,
      "never completes phase 0: 0 arrivals and 1024 bytes missing");
  // Waiting for the phase after the one that completed.
  expectFailure(loadAndWait(1024, tmaLoad(0, {0, 0})) + "  mov.u32 %r13, 1;\n" +
                    waitLoop("L__again"),
                PTXEMU_LAUNCH_FAILED, "never completes phase 1: 1 arrivals");
  // A copy nobody waits for.
  expectFailure(
      "  @%p1 bra $L__go;\n" + init +
          "  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 1024;\n" +
          tmaLoad(0, {0, 0}) + "$L__go:\n",
      PTXEMU_LAUNCH_FAILED,
      "a cp.async.bulk.tensor still in flight at the end of the block");
  // Without the expect-tx, the arrival completes the phase before the copy.
  expectFailure("  @%p1 bra $L__go;\n" + init + tmaLoad(0, {0, 0}) +
                    "  mbarrier.arrive.shared::cta.b64 _, [%r1];\n$L__go:\n",
                PTXEMU_LAUNCH_FAILED, "no expect-tx announced its 1024 bytes");
  // Too many arrivals.
  expectFailure(
      "  @%p1 bra $L__go;\n" + init +
          "  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 16;\n"
          "  mbarrier.arrive.shared::cta.b64 _, [%r1];\n$L__go:\n",
      PTXEMU_LAUNCH_FAILED, "whose phase 0 waits for 0 more of its 1");
  // An mbarrier used before its init.
  expectFailure("  mbarrier.arrive.shared::cta.b64 _, [%r1+8];\n",
                PTXEMU_LAUNCH_FAILED,
                "mbarrier at shared 0x808 used before mbarrier.init");
  expectFailure(waitLoop("L__wait"), PTXEMU_LAUNCH_FAILED,
                "used before mbarrier.init");
  expectFailure("  @%p1 bra $L__go;\n" + init +
                    "  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], "
                    "1024;\n" +
                    tmaLoad(0, {0, 0}, "%rd1", "%r1+4") + "$L__go:\n",
                PTXEMU_ILLEGAL_ADDRESS, "misaligned 8-byte access");
  // The map argument points at data, not at a map.
  TensorMap notAMap;
  std::memset(&notAMap, 0, sizeof notAMap);
  std::memcpy(notAMap.bytes, g.data(), sizeof notAMap.bytes);
  expectFailure(loadAndWait(1024, tmaLoad(0, {0, 0})), PTXEMU_LAUNCH_FAILED,
                "is not a tensor map", {notAMap});
  // A destination not 128-byte aligned.
  expectFailure(loadAndWait(1024, tmaLoad(16, {0, 0})), PTXEMU_ILLEGAL_ADDRESS,
                "is not 128-byte aligned");
  // A destination beyond shared memory.
  expectFailure(loadAndWait(1024, tmaLoad(1152, {0, 0})),
                PTXEMU_ILLEGAL_ADDRESS, "beyond the block's");
  // A stage reloaded while its previous load is in flight.
  expectFailure("  @%p1 bra $L__go;\n" + init +
                    "  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], "
                    "2048;\n" +
                    tmaLoad(0, {0, 0}) + tmaLoad(0, {0, 8}) + "$L__go:\n",
                PTXEMU_LAUNCH_FAILED,
                "writes shared [0x0, 0x400) while the cp.async.bulk.tensor of "
                "line");
  // A 3-d load of a 2-d map; a box wider than its swizzle; element
  // strides.
  expectFailure(loadAndWait(1024, tmaLoad(0, {0, 0, 0})), PTXEMU_LAUNCH_FAILED,
                "has rank 2, the instruction 3 coordinates");
  TensorMap wide = tensorMap(g.data(), 2, {64, 64}, {128}, {128, 4}, 3);
  expectFailure(loadAndWait(1024, tmaLoad(0, {0, 0})), PTXEMU_LAUNCH_FAILED,
                "innermost box of 256 bytes, beyond its 128-byte swizzle",
                {wide});
  TensorMap strided = map;
  strided.map.elementStrides[1] = 2;
  expectFailure(loadAndWait(1024, tmaLoad(0, {0, 0})), PTXEMU_LAUNCH_FAILED,
                "element stride 2 in dimension 1", {strided});
  // Elements in bounds outside device memory (the map says 8 rows, the
  // tensor has 4).
  std::vector<uint16_t> small(64 * 4);
  TensorMap beyond = tensorMap(small.data(), 2, {64, 8}, {128}, {64, 8}, 3);
  std::vector<ptxemu_range> tensors = {
      {reinterpret_cast<const char *>(small.data()), small.size() * 2}};
  Module m(tmaKernel(2048, loadAndWait(1024, tmaLoad(0, {0, 0}))));
  std::vector<uint8_t> tile(2048);
  std::string error;
  EXPECT_EQ(runTmaMaps(m, {beyond}, tile, &error, 32, {0}, &tensors),
            PTXEMU_ILLEGAL_ADDRESS);
  EXPECT_NE(error.find("cp.async.bulk.tensor"), std::string::npos) << error;
  EXPECT_NE(error.find("not device memory"), std::string::npos) << error;
}

TEST(PtxEmu, MbarrierAndTmaForms) {
  auto load = loadsOrError;
  for (std::string good : {
           "mbarrier.init.shared::cta.b64 [%r1], 1;",
           "mbarrier.init.shared.b64 [%rd1+8], %r2;",
           "mbarrier.arrive.shared::cta.b64 _, [%r1];",
           "mbarrier.arrive.shared::cta.b64 %rd2, [%r1], 2;",
           "mbarrier.arrive.release.cta.shared::cta.b64 _, [%r1];",
           "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], %r3;",
           "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %rd2, [%r1], "
           "1024;",
           "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r1], 64;",
           "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;",
           "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p1, [%r1], "
           "1, 1000;",
           "mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;",
           "mbarrier.inval.shared::cta.b64 [%r1];",
           "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, "
           "[%r12], %r13;\nselp.b32 %r14, 1, 0, p;\n}",
           "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::"
           "complete_tx::bytes [%r1], [%rd1, {%r2}], [%r3];",
           "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
           "complete_tx::bytes [%r1], [%rd1, {%r2, %r3, %r4}], [%r5];",
           "cp.async.bulk.tensor.5d.shared::cta.global.mbarrier::complete_tx::"
           "bytes [%r1+128], [%rd1, {%r2, %r3, %r4, %r5, -1}], [%r6+8];",
           "setmaxnreg.inc.sync.aligned.u32 240;",
           "setmaxnreg.dec.sync.aligned.u32 40;",
           "fence.mbarrier_init.release.cluster;",
           "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group "
           "[%rd1, {%r2, %r3}], [%r1];",
           "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group "
           "[%rd1, {%r2, %r3, 0}], [%r1+128];",
           "cp.async.bulk.commit_group;",
           "cp.async.bulk.wait_group.read 0;",
           "cp.async.bulk.wait_group 1;",
           "elect.sync %r1|%p1, -1;",
           "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%r1], {%r2, %r3};",
       })
    EXPECT_EQ(load(good), "loaded") << good;
  for (std::string bad : {
           "mbarrier.try_wait.shared::cta.b64 %p1, [%r1], %rd1;",
           "mbarrier.arrive.shared::cluster.b64 _, [%r1];",
           "mbarrier.init.b64 [%rd1], 1;",
           "mbarrier.arrive_drop.shared::cta.b64 _, [%r1];",
           "mbarrier.init.shared::cta.b64 [%r1];",
           "mbarrier.try_wait.parity.shared::cta.b64 [%r1], %r2;",
           "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
           "complete_tx::bytes.multicast::cluster [%r1], [%rd1, {%r2, %r3}], "
           "[%r4], %rs1;",
           "cp.async.bulk.tensor.6d.shared::cluster.global.tile.mbarrier::"
           "complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];",
           "cp.async.bulk.tensor.2d.shared::cluster.global.im2col.mbarrier::"
           "complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4], {%rs1};",
           "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
           "complete_tx::bytes [%r1], [%rd1, {%r2}], [%r4];",
           "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group "
           "[%rd1, {%r2}], [%r1];",
           "cp.async.bulk.tensor.2d.global.shared::cta.tile.mbarrier::"
           "complete_tx::bytes [%rd1, {%r2, %r3}], [%r1];",
           "cp.async.bulk.tensor.2d.global.shared::cluster.tile.bulk_group "
           "[%rd1, {%r2, %r3}], [%r1];",
           "cp.async.bulk.commit_group 0;",
           "cp.async.bulk.wait_group %r1;",
           "cp.async.bulk.wait_group.write 0;",
           "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%r1], {%r2, %r3};",
           "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r2, %r3}, %r1;",
           "setmaxnreg.inc.sync.aligned.u32 %r1;",
           "fence.mbarrier_init.release.gpu;",
       }) {
    std::string error = load(bad);
    EXPECT_NE(error, "loaded") << bad;
    EXPECT_NE(error.find("line 10:"), std::string::npos) << error;
  }
}

} // namespace
