//===- PtxEmuTest.cpp - The PTX interpreter of the fake CUDA driver -------===//
//
// The interpreter (ptx-interpreter/include/ptxi/ptxemu.h) checks tfc's GPU
// kernels without a GPU, so its warp-wide instructions are checked here
// against the fragment layouts of the PTX ISA, written out independently:
// mma.sync m16n8k16 (section "Matrix Fragments for mma.m16n8k16"), ldmatrix,
// stmatrix, shfl.sync, vote.sync and elect.sync. Then what it loads (labels
// scoped by block, module-scope data), what PTXEMU_STATS counts, and what it
// reports: illegal addresses, warps that diverge at a warp-wide instruction,
// PTX it does not implement, and reads of a cp.async destination before the
// wait. The other PtxEmu*Test.cpp files check wgmma, TMA, mbarriers, named
// barriers, setmaxnreg and scalar arithmetic; PtxEmuTestSupport.h holds what
// they share.
//
//===----------------------------------------------------------------------===//

#include "PtxEmuTestSupport.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace tfc::testing::ptxemu;

TEST(PtxEmu, MmaM16n8k16FollowsTheIsaFragments) {
  Module m(R"(
.visible .entry mma(.param .u64 pa, .param .u64 pb, .param .u64 pc,
                    .param .u64 pd)
{
  .reg .b32 %r<20>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [pa];
  ld.param.u64 %rd2, [pb];
  ld.param.u64 %rd3, [pc];
  ld.param.u64 %rd4, [pd];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd5, %r1, 16;
  add.s64 %rd6, %rd1, %rd5;
  ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd6];
  mul.wide.u32 %rd7, %r1, 8;
  add.s64 %rd8, %rd2, %rd7;
  ld.global.v2.b32 {%r6, %r7}, [%rd8];
  add.s64 %rd9, %rd3, %rd5;
  ld.global.v4.b32 {%r8, %r9, %r10, %r11}, [%rd9];
  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
    {%r12, %r13, %r14, %r15}, {%r2, %r3, %r4, %r5}, {%r6, %r7},
    {%r8, %r9, %r10, %r11};
  add.s64 %rd10, %rd4, %rd5;
  st.global.v4.b32 [%rd10], {%r12, %r13, %r14, %r15};
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  // Small integers: every product and sum is exact.
  float A[16][16], B[16][8], C[16][8];
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k)
      A[i][k] = float((i * 7 + k * 3) % 9 - 4);
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < 8; ++j)
      B[k][j] = float((k * 5 + j * 11) % 7 - 3);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j)
      C[i][j] = float(i * 8 + j);
  // The ISA's fragments: groupID = lane >> 2, threadID_in_group = lane % 4.
  std::vector<uint32_t> a(32 * 4), b(32 * 2);
  std::vector<float> c(32 * 4), d(32 * 4, -1.0f), expect(32 * 4);
  for (int lane = 0; lane < 32; ++lane) {
    int group = lane >> 2, tig = lane % 4;
    auto aElem = [&](int i) { // a0..a7
      int row = (i < 2 || (i >= 4 && i < 6)) ? group : group + 8;
      int col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      return half(A[row][col]);
    };
    for (int r = 0; r < 4; ++r)
      a[lane * 4 + r] = pack(aElem(2 * r), aElem(2 * r + 1));
    auto bElem = [&](int i) { // b0..b3
      int row = tig * 2 + (i & 1) + (i >= 2 ? 8 : 0);
      return half(B[row][group]);
    };
    for (int r = 0; r < 2; ++r)
      b[lane * 2 + r] = pack(bElem(2 * r), bElem(2 * r + 1));
    for (int i = 0; i < 4; ++i) { // c0..c3
      int row = i < 2 ? group : group + 8, col = tig * 2 + (i & 1);
      c[lane * 4 + i] = C[row][col];
      float acc = C[row][col];
      for (int k = 0; k < 16; ++k)
        acc += A[row][k] * B[k][col];
      expect[lane * 4 + i] = acc;
    }
  }
  ASSERT_EQ(launch(m, "mma", 32,
                   {{a.data(), a.size() * 4},
                    {b.data(), b.size() * 4},
                    {c.data(), c.size() * 4},
                    {d.data(), d.size() * 4}}),
            PTXEMU_OK);
  EXPECT_EQ(d, expect);
}

/// Kernel `name` of one warp for the fragment tests: lane l reads 16 bytes
/// at pin + 16 l into %r2..%r5, %rd7 is tile + 16 l (a 1024-byte shared
/// tile), then `body`; lane l writes %r6..%r9 to pout + 16 l and %r10..%r13
/// to ptrans + 16 l.
std::string fragmentKernel(const std::string &name, const std::string &body) {
  return ".visible .entry " + name +
         R"((.param .u64 pin, .param .u64 pout, .param .u64 ptrans)
{
  .shared .align 16 .b8 tile[1024];
  .reg .b32 %r<20>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pout];
  ld.param.u64 %rd3, [ptrans];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 16;
  add.s64 %rd5, %rd1, %rd4;
  ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd5];
  mov.b64 %rd6, tile;
  add.s64 %rd7, %rd6, %rd4;
)" + body +
         R"(
  add.s64 %rd8, %rd2, %rd4;
  st.global.v4.b32 [%rd8], {%r6, %r7, %r8, %r9};
  add.s64 %rd9, %rd3, %rd4;
  st.global.v4.b32 [%rd9], {%r10, %r11, %r12, %r13};
  ret;
}
)";
}

TEST(PtxEmu, LdmatrixFollowsTheIsaFragments) {
  Module m(fragmentKernel("ldm", R"(
  st.shared.v4.b32 [%rd7], {%r2, %r3, %r4, %r5};
  bar.sync 0;
  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r6, %r7, %r8, %r9}, [%rd7];
  ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r10, %r11, %r12, %r13}, [%rd7];)"));
  ASSERT_NE(m.module, nullptr) << m.error;
  // Four 8x8 matrices of b16, rows of 16 bytes; lane l gives the address
  // of row l % 8 of matrix l / 8.
  std::vector<uint16_t> in(256);
  for (int i = 0; i < 256; ++i)
    in[i] = uint16_t(i);
  auto elem = [&](int mat, int row, int col) {
    return in[mat * 64 + row * 8 + col];
  };
  std::vector<uint32_t> out(128), trans(128), expect(128), expectTrans(128);
  for (int lane = 0; lane < 32; ++lane)
    for (int mat = 0; mat < 4; ++mat) {
      // Thread T holds row T / 4, columns 2 (T % 4) and +1 of each matrix;
      // transposed, rows 2 (T % 4) and +1 of column T / 4.
      int r = lane / 4, c = 2 * (lane % 4);
      expect[lane * 4 + mat] = pack(elem(mat, r, c), elem(mat, r, c + 1));
      expectTrans[lane * 4 + mat] = pack(elem(mat, c, r), elem(mat, c + 1, r));
    }
  ASSERT_EQ(launch(m, "ldm", 32,
                   {{in.data(), in.size() * 2},
                    {out.data(), out.size() * 4},
                    {trans.data(), trans.size() * 4}}),
            PTXEMU_OK);
  EXPECT_EQ(out, expect);
  EXPECT_EQ(trans, expectTrans);
}

/// stmatrix writes the fragments ldmatrix reads: lane l's register m is
/// row l / 4, columns 2 (l % 4) and +1 of matrix m (with .trans: rows
/// 2 (l % 4) and +1 of column l / 4), at the row addresses lanes 8m..8m+7
/// give, as the PTX ISA's "Warp-level matrix store instruction: stmatrix"
/// says.
TEST(PtxEmu, StmatrixWritesTheIsaFragments) {
  Module m(fragmentKernel("stm", R"(
  stmatrix.sync.aligned.m8n8.x4.shared.b16 [%rd7], {%r2, %r3, %r4, %r5};
  add.s64 %rd10, %rd7, 512;
  stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%rd10], {%r2, %r3, %r4, %r5};
  bar.sync 0;
  ld.shared.v4.b32 {%r6, %r7, %r8, %r9}, [%rd7];
  ld.shared.v4.b32 {%r10, %r11, %r12, %r13}, [%rd10];)"));
  ASSERT_NE(m.module, nullptr) << m.error;
  // Lane l's registers: 4 words each, distinct halves.
  std::vector<uint32_t> in(128);
  for (int i = 0; i < 128; ++i)
    in[i] = pack(uint16_t(2 * i + 1), uint16_t(2 * i + 2));
  auto half = [&](int lane, int mat, int hi) {
    return uint16_t(in[lane * 4 + mat] >> (16 * hi));
  };
  // Four 8x8 matrices of b16, rows of 16 bytes at the addresses of lanes
  // 8m..8m+7 (here: consecutive).
  std::vector<uint16_t> out(256), trans(256), expect(256), expectTrans(256);
  for (int lane = 0; lane < 32; ++lane)
    for (int mat = 0; mat < 4; ++mat)
      for (int hi = 0; hi < 2; ++hi) {
        int r = lane / 4, c = 2 * (lane % 4) + hi;
        expect[mat * 64 + r * 8 + c] = half(lane, mat, hi);
        expectTrans[mat * 64 + c * 8 + r] = half(lane, mat, hi);
      }
  ASSERT_EQ(launch(m, "stm", 32,
                   {{in.data(), in.size() * 4},
                    {out.data(), out.size() * 2},
                    {trans.data(), trans.size() * 2}}),
            PTXEMU_OK);
  EXPECT_EQ(out, expect);
  EXPECT_EQ(trans, expectTrans);
}

/// elect.sync d|p, -1 elects lane 0 of each warp: d is 0 in every lane, p
/// true in the leader only.
TEST(PtxEmu, ElectSyncElectsTheFirstLane) {
  Module m(R"(
.visible .entry el(.param .u64 pout)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, 77;
  elect.sync %r2|%p1, -1;
  selp.b32 %r3, 1000, 0, %p1;
  add.u32 %r4, %r2, %r3;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.b32 [%rd3], %r4;
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  std::vector<uint32_t> out(64, 0xdeadbeef), expect(64, 0);
  expect[0] = expect[32] = 1000;
  ASSERT_EQ(launch(m, "el", 64, {{out.data(), out.size() * 4}}), PTXEMU_OK);
  EXPECT_EQ(out, expect);
}

/// Labels in nested blocks (as inline assembly writes them, one name in
/// several blocks): a branch goes to its own block's label, else to the
/// nearest enclosing block's.
TEST(PtxEmu, LabelsAreScopedByBlock) {
  Module m(R"(
.visible .entry lb(.param .u64 pout)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, 0;
  {
  .reg .pred done;
  again:
  add.u32 %r1, %r1, 1;
  setp.lt.u32 done, %r1, 3;
  @done bra.uni again;
  }
  {
  .reg .pred done;
  again:
  add.u32 %r1, %r1, 10;
  setp.lt.u32 done, %r1, 33;
  @done bra.uni again;
  {
  bra.uni skip;
  }
  add.u32 %r1, %r1, 1000;
  skip:
  }
  st.global.b32 [%rd1], %r1;
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  uint32_t out = 0;
  ASSERT_EQ(launch(m, "lb", 1, {{&out, 4}}), PTXEMU_OK);
  EXPECT_EQ(out, 33u); // 3 by ones, then 30 by tens, the add skipped
  Module twice(R"(
.visible .entry lb()
{
  {
  x:
  x:
  ret;
  }
}
)");
  EXPECT_EQ(twice.module, nullptr);
  EXPECT_NE(twice.error.find("label 'x' declared twice in one block"),
            std::string::npos)
      << twice.error;
}

/// Module-scope .global data (Triton's modules declare some): initialised
/// as declared (integers, hex, negative values, bit patterns; zeros past the
/// initializer), readable and writable by symbol and by generic address;
/// .const data is rejected.
TEST(PtxEmu, ModuleScopeGlobalData) {
  Module m(R"(
.global .align 4 .b32 table[5] = {1, 0x20, -1, 0f3F800000};
.global .align 1 .b8 bytes[3] = {95, 67, 7};
.visible .entry gd(.param .u64 pout)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pout];
  ld.global.u32 %r1, [table+4];
  mov.u64 %rd2, table;
  ld.u32 %r2, [%rd2+8];
  ld.global.u32 %r3, [table+12];
  ld.global.u32 %r4, [table+16];
  ld.global.u8 %r5, [bytes+1];
  st.global.u32 [table], 9;
  ld.u32 %r6, [%rd2];
  st.global.v4.b32 [%rd1], {%r1, %r2, %r3, %r4};
  st.global.v2.b32 [%rd1+16], {%r5, %r6};
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  std::vector<uint32_t> out(6, 0xdeadbeef);
  ASSERT_EQ(launch(m, "gd", 1, {{out.data(), out.size() * 4}}), PTXEMU_OK);
  EXPECT_EQ(out,
            (std::vector<uint32_t>{0x20, 0xffffffffu, 0x3f800000u, 0, 67, 9}));
  Module c(".const .align 4 .b32 k[1] = {1};\n");
  EXPECT_EQ(c.module, nullptr);
  EXPECT_NE(c.error.find("module-scope .const data is not supported"),
            std::string::npos)
      << c.error;
}

TEST(PtxEmu, ShflModes) {
  Module m(R"(
.visible .entry shfl(.param .u64 pout)
{
  .reg .b32 %r<20>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x;
  mul.lo.u32 %r2, %r1, 10;
  shfl.sync.bfly.b32 %r3, %r2, 5, 31, -1;
  shfl.sync.idx.b32 %r4, %r2, 7, 31, -1;
  shfl.sync.down.b32 %r5, %r2, 3, 31, -1;
  shfl.sync.up.b32 %r6, %r2, 3, 0, -1;
  mul.wide.u32 %rd2, %r1, 16;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v4.b32 [%rd3], {%r3, %r4, %r5, %r6};
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  std::vector<uint32_t> out(128), expect(128);
  for (uint32_t l = 0; l < 32; ++l) {
    expect[l * 4] = (l ^ 5) * 10;
    expect[l * 4 + 1] = 70;
    expect[l * 4 + 2] = (l + 3 <= 31 ? l + 3 : l) * 10;
    expect[l * 4 + 3] = (l >= 3 ? l - 3 : l) * 10;
  }
  ASSERT_EQ(launch(m, "shfl", 32, {{out.data(), out.size() * 4}}), PTXEMU_OK);
  EXPECT_EQ(out, expect);
}

TEST(PtxEmu, VoteModes) {
  Module m(R"(
.visible .entry vote(.param .u64 pout)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [pout];
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 5;
  vote.sync.any.pred %p2, %p1, -1;
  vote.sync.all.pred %p3, %p1, -1;
  vote.sync.ballot.b32 %r2, %p1, -1;
  selp.u32 %r3, 1, 0, %p2;
  selp.u32 %r4, 1, 0, %p3;
  mul.wide.u32 %rd2, %r1, 16;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v4.b32 [%rd3], {%r3, %r4, %r2, %r1};
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  std::vector<uint32_t> out(128), expect(128);
  for (uint32_t l = 0; l < 32; ++l) {
    expect[l * 4] = 1;        // any: lanes 0-4
    expect[l * 4 + 1] = 0;    // all: not lanes 5-31
    expect[l * 4 + 2] = 0x1f; // ballot
    expect[l * 4 + 3] = l;
  }
  ASSERT_EQ(launch(m, "vote", 32, {{out.data(), out.size() * 4}}), PTXEMU_OK);
  EXPECT_EQ(out, expect);
}

/// PTXEMU_STATS counts a warp's memory accesses in shared-memory
/// wavefronts and global-memory sectors, next to what the same bytes take
/// at best. Shared: consecutive words 1 (1), a 128-byte stride 32 (1: every
/// word in bank 0), one word for all 1 (1), 16 bytes per lane 4 (4), an
/// ldmatrix.x1 whose rows are 128 bytes apart 8 (1), the consecutive words
/// of the even lanes (the odd ones predicated off) 1 (1): 47 (9). Global:
/// consecutive words 4 (4), a 32-byte stride 32 (4): 36 (8).
TEST(PtxEmu, StatsCountWavefrontsAndSectors) {
  Module m(R"(
.visible .entry tx(.param .u64 p)
{
  .reg .pred %p<2>;
  .reg .b32 %r<24>;
  .reg .b64 %rd<8>;
  .shared .align 16 .b8 smem[4096];
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, %tid.x;
  mov.u32 %r10, smem;
  shl.b32 %r2, %r1, 2;
  add.u32 %r3, %r10, %r2;
  ld.shared.u32 %r4, [%r3];
  shl.b32 %r5, %r1, 7;
  add.u32 %r6, %r10, %r5;
  ld.shared.u32 %r7, [%r6];
  ld.shared.u32 %r8, [%r10];
  shl.b32 %r9, %r1, 4;
  add.u32 %r11, %r10, %r9;
  ld.shared.v4.u32 {%r12, %r13, %r14, %r15}, [%r11];
  ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r18}, [%r6];
  and.b32 %r19, %r1, 1;
  setp.eq.u32 %p1, %r19, 0;
  @%p1 ld.shared.u32 %r20, [%r3];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u32 %r16, [%rd3];
  mul.wide.u32 %rd4, %r1, 32;
  add.s64 %rd5, %rd1, %rd4;
  ld.global.u32 %r17, [%rd5];
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  // Sectors are counted on addresses: the buffer starts one.
  alignas(32) uint32_t buffer[256] = {};
  std::string error, stats;
  int rc =
      launchWithStats(m, "tx", 32, {{buffer, sizeof buffer}}, &error, &stats);
  ASSERT_EQ(rc, PTXEMU_OK) << error;
  EXPECT_NE(stats.find(" | shared: 47 wavefronts (9 ideal); global: 36 "
                       "sectors (8 ideal)\n"),
            std::string::npos)
      << stats;
}

TEST(PtxEmu, ReportsAnIllegalAddress) {
  Module m(R"(
.visible .entry oob(.param .u64 p)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, %tid.x;
  st.global.b32 [%rd1+4096], %r1;
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  std::vector<uint32_t> buf(4);
  std::string error;
  EXPECT_EQ(launch(m, "oob", 32, {{buf.data(), 16}}, &error),
            PTXEMU_ILLEGAL_ADDRESS);
  EXPECT_NE(error.find("kernel oob"), std::string::npos) << error;
  EXPECT_NE(error.find("st.global.b32"), std::string::npos) << error;
  EXPECT_NE(error.find("not device memory"), std::string::npos) << error;
}

TEST(PtxEmu, ReportsAWarpDivergentAtAShuffle) {
  Module m(R"(
.visible .entry diverge(.param .u64 p)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  mov.u32 %r1, %tid.x;
  setp.lt.u32 %p1, %r1, 16;
  @%p1 bra $L__skip;
  shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;
$L__skip:
  bar.sync 0;
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  uint32_t unused = 0;
  std::string error;
  EXPECT_EQ(launch(m, "diverge", 32, {{&unused, 4}}, &error),
            PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("not every thread"), std::string::npos) << error;
}

TEST(PtxEmu, RejectsPtxItDoesNotImplement) {
  Module m(R"(
.visible .entry tex(.param .u64 p)
{
  .reg .b32 %r<4>;
  tex.1d.v4.f32.s32 {%r1, %r2, %r3, %r0}, [t, {%r1}];
  ret;
}
)");
  EXPECT_EQ(m.module, nullptr);
  EXPECT_NE(m.error.find("unsupported PTX instruction 'tex.1d.v4.f32.s32'"),
            std::string::npos)
      << m.error;
  Module notPtx("this is not PTX");
  EXPECT_EQ(notPtx.module, nullptr);
}

TEST(PtxEmu, CpAsyncDestinationIsUndefinedUntilTheWait) {
  Module m(R"(
.visible .entry copy(.param .u64 pin, .param .u64 pout)
{
  .shared .align 16 .b8 tile[16];
  .reg .b32 %r<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pin];
  ld.param.u64 %rd2, [pout];
  mov.b64 %rd3, tile;
  cp.async.cg.shared.global [%rd3], [%rd1], 16, 16;
  cp.async.commit_group;
  ld.shared.b32 %r1, [%rd3];
  cp.async.wait_group 0;
  ld.shared.b32 %r2, [%rd3];
  st.global.v2.b32 [%rd2], {%r1, %r2};
  ret;
}
)");
  ASSERT_NE(m.module, nullptr) << m.error;
  std::vector<uint32_t> in = {0x3c003c00u, 2, 3, 4}, out(2);
  ASSERT_EQ(launch(m, "copy", 1,
                   {{in.data(), in.size() * 4}, {out.data(), out.size() * 4}}),
            PTXEMU_OK);
  EXPECT_EQ(out[0], 0xffffffffu); // poison: a NaN in every float format
  EXPECT_EQ(out[1], 0x3c003c00u);
}

} // namespace
