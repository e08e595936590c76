//===- PtxEmuBarrierTest.cpp - Named barriers in the PTX interpreter ------===//
//
// Named barriers (bar.sync / bar.arrive with a thread count) in the PTX
// interpreter: the ping-pong of two warpgroups and a producer and consumer
// pair, what a launch reports about them, and the forms that load; and
// setmaxnreg moving registers between warpgroups, with what a launch
// reports about it.
//
//===----------------------------------------------------------------------===//

#include "PtxEmuTestSupport.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace tfc::testing::ptxemu;

/// FlashAttention-3's ping-pong between the two warpgroups of a 256-thread
/// block: warpgroup w waits on barrier 1 + w before its turn and arrives on
/// the other's, 1 + (1 - w), after it (ids in registers); warpgroup 1
/// arrives on barrier 1 once first, so warpgroup 0 goes first. In its turn
/// lane 0 of each warp appends the warpgroup to a log in shared memory
/// (a plain load, add and store: the interpreter runs one thread at a
/// time). The log must alternate in runs of 4: 0000 1111 0000... Block-wide
/// bar.sync 0 before and after, the last arrival on barrier 1 left pending.
TEST(PtxEmu, NamedBarriersPingPongBetweenWarpgroups) {
  Module m(R"(
.visible .entry pingpong(.param .u64 pout)
{
  .shared .align 4 .b8 log[256];
  .reg .pred %p<6>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 7;
  add.u32 %r3, %r2, 1;
  sub.u32 %r4, 2, %r2;
  and.b32 %r5, %r1, 31;
  setp.eq.u32 %p2, %r5, 0;
  mov.u32 %r6, 0;
  mov.u32 %r9, log;
  setp.ne.u32 %p3, %r1, 0;
  @%p3 bra $L__inited;
  st.shared.u32 [log], 0;
$L__inited:
  bar.sync 0;
  setp.eq.u32 %p1, %r2, 0;
  @%p1 bra $L__loop;
  bar.arrive 1, 256;
$L__loop:
  bar.sync %r3, 256;
  @!%p2 bra $L__appended;
  ld.shared.u32 %r7, [log];
  shl.b32 %r8, %r7, 2;
  add.u32 %r10, %r9, %r8;
  st.shared.u32 [%r10+4], %r2;
  add.u32 %r7, %r7, 1;
  st.shared.u32 [log], %r7;
$L__appended:
  bar.arrive %r4, 256;
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p4, %r6, 5;
  @%p4 bra $L__loop;
  barrier.sync.aligned 0;
  setp.gt.u32 %p5, %r1, 40;
  @%p5 bra $L__done;
  shl.b32 %r11, %r1, 2;
  add.u32 %r12, %r9, %r11;
  ld.shared.u32 %r13, [%r12];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r13;
$L__done:
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  std::vector<uint32_t> out(41, 0xdeadbeef);
  std::string error;
  ASSERT_EQ(launch(m, "pingpong", 256, {{out.data(), out.size() * 4}}, &error),
            PTXEMU_OK)
      << error;
  EXPECT_EQ(out[0], 40u); // 5 rounds of 2 warpgroups of 4 warps
  std::string log, expect;
  for (int i = 0; i < 40; ++i) {
    log += char('0' + out[1 + i]);
    expect += char('0' + (i / 4) % 2);
  }
  EXPECT_EQ(log, expect);
}

/// Warp 2 produces a buffer in shared memory for warp 1 three times:
/// bar.arrive 1, 64 when it is written, which warp 1 waits for with
/// bar.sync 1, 64; warp 1 arrives on barrier 2 (64) when it has read it,
/// which warp 2 waits for before writing the next (the last arrival left
/// pending at the end). The consumer runs first (ascending warps): without
/// the wait it reads shared memory not written yet. Warps 0 and 3 take no
/// part: they write their own output and exit. The barriers count in
/// PTXEMU_STATS' bar.sync class: 5 warp-instructions of the producer and 6
/// of the consumer.
TEST(PtxEmu, NamedBarrierProducerConsumerBetweenTwoWarps) {
  Module m(R"(
.visible .entry prodcons(.param .u64 pout, .param .u64 pother)
{
  .shared .align 4 .b8 buf[128];
  .reg .pred %p<6>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pout];
  ld.param.u64 %rd2, [pother];
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  and.b32 %r3, %r1, 31;
  shl.b32 %r4, %r3, 2;
  mov.u32 %r5, buf;
  add.u32 %r5, %r5, %r4;
  mov.u32 %r6, 0;
  setp.eq.u32 %p1, %r2, 2;
  @%p1 bra $L__producer;
  setp.eq.u32 %p1, %r2, 1;
  @%p1 bra $L__consumer;
  setp.eq.u32 %p1, %r2, 3;
  selp.u32 %r7, 64, 0, %p1;
  sub.u32 %r8, %r1, %r7;
  mul.lo.u32 %r9, %r1, 7;
  mul.wide.u32 %rd3, %r8, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.u32 [%rd4], %r9;
  ret;
$L__producer:
  setp.eq.u32 %p2, %r6, 0;
  @%p2 bra $L__produce;
  bar.sync 2, 64;
$L__produce:
  mad.lo.u32 %r10, %r6, 100, %r3;
  st.shared.u32 [%r5], %r10;
  bar.arrive 1, 64;
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p3, %r6, 3;
  @%p3 bra $L__producer;
  ret;
$L__consumer:
  barrier.sync 1, 64;
  ld.shared.u32 %r11, [%r5];
  mad.lo.u32 %r12, %r6, 32, %r3;
  mul.wide.u32 %rd5, %r12, 4;
  add.s64 %rd6, %rd1, %rd5;
  st.global.u32 [%rd6], %r11;
  barrier.arrive.aligned 2, 64;
  add.u32 %r6, %r6, 1;
  setp.lt.u32 %p4, %r6, 3;
  @%p4 bra $L__consumer;
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  std::vector<uint32_t> out(96, 0xdeadbeef), other(64, 0xdeadbeef);
  std::string error, stats;
  int rc = launchWithStats(m, "prodcons", 128,
                           {{out.data(), out.size() * 4}, {other.data(), 256}},
                           &error, &stats);
  ASSERT_EQ(rc, PTXEMU_OK) << error;
  for (uint32_t r = 0; r < 3; ++r)
    for (uint32_t lane = 0; lane < 32; ++lane)
      EXPECT_EQ(out[r * 32 + lane], r * 100 + lane) << r << " " << lane;
  for (uint32_t i = 0; i < 64; ++i)
    EXPECT_EQ(other[i], (i < 32 ? i : i + 64) * 7) << i;
  EXPECT_NE(stats.find(", bar.sync 11,"), std::string::npos) << stats;
}

/// Arrivals no phase completed end with their block: in blocks of 2 warps,
/// warp 0 of block 0 leaves 32 of 64 on barrier 1, warp 0 of block 1
/// arrives on it with count 32 (too many if they carried over).
TEST(PtxEmu, NamedBarrierArrivalsEndWithTheBlock) {
  Module m(R"(
.visible .entry blocks(.param .u64 p)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  mov.u32 %r2, %tid.x;
  setp.ge.u32 %p1, %r2, 32;
  @%p1 bra $L__end;
  mov.u32 %r1, %ctaid.x;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra $L__first;
  bar.arrive 1, 32;
  ret;
$L__first:
  bar.arrive 1, 64;
$L__end:
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  ptxemu_kernel *k = ptxemu_get(m.module, "blocks");
  ASSERT_NE(k, nullptr);
  uint32_t unused = 0;
  void *arg = &unused;
  void *params[] = {&arg};
  ptxemu_range range = {reinterpret_cast<const char *>(&unused), 4};
  unsigned grid[3] = {2, 1, 1}, block[3] = {64, 1, 1};
  char error[512] = "";
  EXPECT_EQ(
      ptxemu_launch(k, grid, block, 0, params, &range, 1, error, sizeof error),
      PTXEMU_OK)
      << error;
}

/// What a launch reports about named barriers: values out of range, a warp
/// whose lanes diverge at one, a phase that never completes, arrivals
/// beyond the count.
TEST(PtxEmu, NamedBarrierLaunchErrors) {
  auto kernel = [](const std::string &body) {
    return R"(
.visible .entry bars(.param .u64 p)
{
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  and.b32 %r3, %r1, 31;
)" + body + R"(
$L__end:
  ret;
}
)";
  };
  auto run = [&](const std::string &body, unsigned threads,
                 std::string *error) {
    Module m(kernel(body));
    EXPECT_NE(m.module, nullptr) << m.error;
    if (!m.module)
      return -1;
    uint32_t unused = 0;
    return launch(m, "bars", threads, {{&unused, 4}}, error);
  };
  auto expectFailure = [&](const std::string &body, const std::string &what,
                           unsigned threads = 128) {
    std::string error;
    EXPECT_EQ(run(body, threads, &error), PTXEMU_LAUNCH_FAILED) << body;
    EXPECT_NE(error.find(what), std::string::npos) << error;
    EXPECT_NE(error.find("kernel bars, block (0,0,0)"), std::string::npos)
        << error;
  };
  // The count covers whole warps: 128 in a block of 100 threads.
  std::string error;
  EXPECT_EQ(run("  bar.sync 1, 128;\n  bar.sync 0;\n", 100, &error), PTXEMU_OK)
      << error;
  expectFailure("  bar.sync 16, 128;\n",
                "bar.sync 16, 128: barrier id 16: a block has barriers 0 to "
                "15");
  expectFailure("  mov.u32 %r4, 17;\n  bar.sync %r4;\n",
                "barrier id 17: a block has barriers 0 to 15");
  expectFailure("  bar.arrive 1, 48;\n",
                "thread count 48 of barrier 1: not a positive multiple of the "
                "warp size (32)");
  expectFailure("  mov.u32 %r4, 0;\n  bar.sync 2, %r4;\n",
                "thread count 0 of barrier 2: not a positive multiple");
  expectFailure("  bar.sync 1, 160;\n",
                "thread count 160 of barrier 1 beyond the block's 128 "
                "threads (128 in whole warps)");
  expectFailure("  bar.sync 1, 160;\n",
                "thread count 160 of barrier 1 beyond the block's 100 "
                "threads (128 in whole warps)",
                100);
  expectFailure("  bar.sync %r3, 128;\n",
                "the barrier id differs between the lanes of the warp");
  // Lanes 0-15 at one bar.sync, 16-31 at another.
  expectFailure("  setp.lt.u32 %p1, %r3, 16;\n  @%p1 bra $L__low;\n"
                "  bar.sync 1, 128;\n  bra.uni $L__end;\n$L__low:\n"
                "  bar.sync 1, 128;\n",
                "the lanes of warp 0 diverge at a named barrier");
  // Warp 3 exits: the others wait for ever.
  expectFailure("  setp.eq.u32 %p1, %r2, 3;\n  @%p1 bra $L__end;\n"
                "  bar.sync 1, 128;\n",
                "bar.sync 1, 128: barrier 1: 96 of 128 threads arrived");
  // Warps 0-2 arrive with count 128, warp 3 with 64.
  expectFailure(
      "  setp.eq.u32 %p1, %r2, 3;\n  @%p1 bra $L__small;\n"
      "  bar.arrive 1, 128;\n  bra.uni $L__end;\n$L__small:\n"
      "  bar.arrive 1, 64;\n",
      "bar.arrive on barrier 1 with thread count 64 after 96 arrivals in "
      "this phase: too many arrivals in one phase");
  // Warp 0 arrives with count 64, warp 1 syncs with 128.
  expectFailure("  setp.eq.u32 %p1, %r2, 0;\n  @%p1 bra $L__first;\n"
                "  setp.ne.u32 %p1, %r2, 1;\n  @%p1 bra $L__end;\n"
                "  bar.sync 1, 128;\n  bra.uni $L__end;\n$L__first:\n"
                "  bar.arrive 1, 64;\n",
                "bar.sync on barrier 1 with thread count 128, while this "
                "phase's earlier arrivals gave 64");
}

TEST(PtxEmu, BarrierForms) {
  auto load = loadsOrError;
  for (std::string good : {
           "bar.sync 0;",
           "bar.sync 1, 256;",
           "bar.arrive 1, 256;",
           "bar.sync %r1, %r2;",
           "bar.cta.sync 3;",
           "bar.cta.arrive %r1, 64;",
           "barrier.sync 0;",
           "barrier.sync.aligned 0;",
           "barrier.sync.aligned 2, 64;",
           "barrier.arrive 15, 32;",
           "barrier.arrive.aligned 1, %r2;",
           "barrier.cta.sync.aligned 4, 128;",
       })
    EXPECT_EQ(load(good), "loaded") << good;
  for (std::string bad : {
           "bar.arrive 1;",
           "bar.sync;",
           "bar.sync 1, 64, 2;",
           "bar.sync [%r1], 64;",
           "bar.red.popc.u32 %r1, 0, %p1;",
           "barrier.red.and.pred %p1, 0, %p1;",
           "bar.sync.aligned 1, 64;",
           "barrier.arrive.aligned.sync 1, 64;",
       }) {
    std::string error = load(bad);
    EXPECT_NE(error, "loaded") << bad;
    EXPECT_NE(error.find("line 10:"), std::string::npos) << error;
  }
}

//===-- setmaxnreg --------------------------------------------------------===//

/// A block of 384 threads (.maxntid: launched with 168 registers per
/// thread) whose warpgroup 2 runs `producer` and warpgroups 0 and 1
/// `consumers`, then every thread writes its id.
std::string registersKernel(const std::string &producer,
                            const std::string &consumers,
                            const std::string &maxntid = ".maxntid 384, 1, 1") {
  return R"(
.visible .entry regs(.param .u64 p)
)" + maxntid +
         R"(
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  setp.lt.u32 %p1, %r1, 256;
  @%p1 bra $L__consumer;
)" + producer +
         R"(
  bra.uni $L__write;
$L__consumer:
)" + consumers +
         R"(
$L__write:
  ld.param.u64 %rd1, [p];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r1;
  ret;
}
)";
}

/// A producer warpgroup returning registers that two consumer warpgroups
/// take (FlashAttention-3's 24 / 240): the block runs to the end.
TEST(PtxEmu, SetmaxnregMovesRegistersBetweenWarpgroups) {
  Module m(registersKernel("  setmaxnreg.dec.sync.aligned.u32 24;\n",
                           "  setmaxnreg.inc.sync.aligned.u32 240;\n"));
  ASSERT_NE(m.module, nullptr) << m.error;
  std::vector<uint32_t> ids(384, 0);
  std::string error;
  EXPECT_EQ(launch(m, "regs", 384, {{ids.data(), ids.size() * 4}}, &error),
            PTXEMU_OK)
      << error;
  for (uint32_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(ids[i], i);
}

/// What a launch reports about setmaxnreg: registers nobody returns, more
/// than were returned, a warpgroup whose warps disagree, counts against
/// the warp's own, a kernel without .maxntid, a block beyond it, and the
/// counts that do not load.
TEST(PtxEmu, SetmaxnregLaunchErrors) {
  auto run = [](const std::string &ptx, unsigned threads, std::string *error) {
    Module m(ptx);
    EXPECT_NE(m.module, nullptr) << m.error;
    if (!m.module)
      return -1;
    std::vector<uint32_t> ids(threads, 0);
    return launch(m, "regs", threads, {{ids.data(), ids.size() * 4}}, error);
  };
  auto expectFailure = [&](const std::string &ptx, const std::string &what,
                           int rc = PTXEMU_LAUNCH_FAILED,
                           unsigned threads = 384) {
    std::string error;
    EXPECT_EQ(run(ptx, threads, &error), rc);
    EXPECT_NE(error.find(what), std::string::npos) << error;
  };
  std::string inc240 = "  setmaxnreg.inc.sync.aligned.u32 240;\n";
  std::string dec24 = "  setmaxnreg.dec.sync.aligned.u32 24;\n";
  // Nobody returns registers: the first consumer warp waits for ever.
  expectFailure(registersKernel("", inc240),
                "setmaxnreg.inc to 240 registers in warp 0 (it has 168) "
                "waits for registers no other warp returns (the block's "
                "pool has 0)");
  // 248 for 256 threads: 80 more each, and the pool has 144 * 128.
  expectFailure(
      registersKernel(dec24, "  setmaxnreg.inc.sync.aligned.u32 248;\n"),
      "waits for registers no other warp returns (the block's "
      "pool has 512)");
  // Warps 2 and 3 of the producer keep theirs.
  expectFailure(registersKernel("  setp.lt.u32 %p2, %r2, 10;\n"
                                "  @%p2 setmaxnreg.dec.sync.aligned.u32 "
                                "152;\n",
                                ""),
                "warp 2 of warpgroup 2 ends with 168 registers per thread, "
                "warp 0 with 152 (setmaxnreg is executed by a whole "
                "warpgroup)");
  expectFailure(registersKernel("  setmaxnreg.dec.sync.aligned.u32 200;\n", ""),
                "setmaxnreg.dec to 200 registers in warp 8, which has 168");
  expectFailure(
      registersKernel(dec24, "  setmaxnreg.inc.sync.aligned.u32 160;\n"),
      "setmaxnreg.inc to 160 registers in warp 0, which has 168");
  // A warp whose lanes 16-31 exited.
  expectFailure(registersKernel("  and.b32 %r3, %r1, 31;\n"
                                "  setp.ge.u32 %p2, %r3, 16;\n"
                                "  @%p2 bra $L__write;\n" +
                                    dec24,
                                ""),
                "setmaxnreg in warp 8 after some of its threads exited");
  expectFailure(registersKernel(dec24, inc240, ""),
                "setmaxnreg in a kernel without .maxntid: its launch "
                "register count is unknown");
  expectFailure(registersKernel(dec24, inc240),
                "block of 512 threads, beyond the 384 of the kernel's "
                ".maxntid",
                PTXEMU_INVALID_VALUE, 512);
  for (std::string bad : {"setmaxnreg.inc.sync.aligned.u32 16;",
                          "setmaxnreg.dec.sync.aligned.u32 260;",
                          "setmaxnreg.inc.sync.aligned.u32 100;"}) {
    std::string error = loadsOrError(bad);
    EXPECT_NE(error.find("line 10: setmaxnreg to"), std::string::npos) << error;
    EXPECT_NE(error.find("the count must be 24 to 256, a multiple of 8"),
              std::string::npos)
        << error;
  }
  EXPECT_EQ(loadsOrError("setmaxnreg.dec.sync.aligned.u32 24;"), "loaded");
}

} // namespace
