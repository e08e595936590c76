//===- PtxEmuTest.cpp - The PTX interpreter of the fake CUDA driver -------===//
//
// The interpreter (ptx-interpreter/include/ptxi/ptxemu.h) checks tfc's GPU
// kernels without a GPU, so its warp-wide instructions are checked here
// against the fragment layouts of the PTX ISA, written out independently:
// mma.sync m16n8k16 (section "Matrix Fragments for mma.m16n8k16"), ldmatrix,
// stmatrix, shfl.sync and elect.sync; wgmma (sm_90a) against the accumulator
// and A fragments of the ISA ("Register Fragments and Shared Memory Matrix
// Layouts" of wgmma) and the shared-memory layouts without swizzle as CUTLASS's
// canonical GMMA layouts write them (cute/atom/mma_traits_sm90_gmma.hpp).
// Then what it reports: illegal addresses, warps that diverge at a
// warp-wide instruction, PTX it does not implement, and reads of a cp.async
// destination before the wait or of a wgmma accumulator before its
// wait_group.
// TMA loads and stores (cp.async.bulk.tensor) against the box, out-of-bound
// fill or clipping and swizzle of the ISA and cuTensorMapEncodeTiled,
// written out byte by byte;
// mbarrier phases in a pipeline as tfc's kernels run one; wgmma reading
// the swizzled tiles TMA wrote, in the configurations of tfc's attention;
// and what a launch reports about them.
// Named barriers (bar.sync / bar.arrive with a thread count): the
// ping-pong of two warpgroups and a producer and consumer pair, what a
// launch reports about them, and the forms that load.
//
//===----------------------------------------------------------------------===//

#include "ptxi/ptxemu.h"
#include "ptxi/fake_tensor_map.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

const char *kHeader = ".version 8.0\n.target sm_90\n.address_size 64\n";

struct Module {
  ptxemu_module *module = nullptr;
  std::string error;
  explicit Module(const std::string &body) {
    char buf[512] = "";
    module =
        ptxemu_load((std::string(kHeader) + body).c_str(), buf, sizeof buf);
    error = buf;
  }
  ~Module() { ptxemu_unload(module); }
};

/// Launches `name` on one block of `threads` with pointer arguments that
/// are also the only device memory.
int launch(Module &m, const char *name, unsigned threads,
           std::vector<std::pair<void *, size_t>> buffers,
           std::string *error = nullptr) {
  ptxemu_kernel *k = ptxemu_get(m.module, name);
  EXPECT_NE(k, nullptr) << m.error;
  if (!k)
    return -1;
  std::vector<void *> values, params;
  std::vector<ptxemu_range> ranges;
  for (auto &[ptr, size] : buffers) {
    values.push_back(ptr);
    ranges.push_back({static_cast<const char *>(ptr), size});
  }
  for (void *&v : values)
    params.push_back(&v);
  unsigned grid[3] = {1, 1, 1}, block[3] = {threads, 1, 1};
  char buf[512] = "";
  int rc = ptxemu_launch(k, grid, block, 0, params.data(), ranges.data(),
                         ranges.size(), buf, sizeof buf);
  if (error)
    *error = buf;
  return rc;
}

/// launch() with PTXEMU_STATS set; `stats` gets what it printed.
int launchWithStats(Module &m, const char *name, unsigned threads,
                    std::vector<std::pair<void *, size_t>> buffers,
                    std::string *error, std::string *stats) {
  setenv("PTXEMU_STATS", "1", 1);
  testing::internal::CaptureStderr();
  int rc = launch(m, name, threads, std::move(buffers), error);
  *stats = testing::internal::GetCapturedStderr();
  unsetenv("PTXEMU_STATS");
  return rc;
}

uint16_t half(float x) {
  _Float16 h = static_cast<_Float16>(x);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
uint32_t pack(uint16_t lo, uint16_t hi) { return lo | (uint32_t(hi) << 16); }

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

//===-- wgmma -------------------------------------------------------------===//

/// 16-bit elements of one type (f16 or bf16) and their values.
struct Elem {
  bool bf16;
  uint16_t bits(float x) const {
    if (!bf16)
      return half(x);
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u += 0x7fff + ((u >> 16) & 1); // to nearest even
    return uint16_t(u >> 16);
  }
  float value(uint16_t b) const {
    if (bf16) {
      uint32_t u = uint32_t(b) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    _Float16 h;
    std::memcpy(&h, &b, 2);
    return float(h);
  }
};

/// A matrix of rows x cols 16-bit elements, random in [-2, 2), with the
/// values they hold.
struct Matrix {
  int rows, cols;
  std::vector<uint16_t> bits;
  std::vector<float> values;
  Matrix(int rows, int cols, Elem e, std::mt19937 &rng)
      : rows(rows), cols(cols), bits(rows * cols), values(rows * cols) {
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    for (int i = 0; i < rows * cols; ++i) {
      bits[i] = e.bits(dist(rng));
      values[i] = e.value(bits[i]);
    }
  }
  float at(int r, int c) const { return values[r * cols + c]; }
  uint16_t bitsAt(int r, int c) const { return bits[r * cols + c]; }
};

/// A shared-memory operand without swizzle, as CUTLASS's canonical GMMA
/// layouts (INTERLEAVE) put it, in elements with T = 8 (16 bytes):
/// K-major ((8,m),(T,2)):((1T,SBO),(1,LBO)), MN-major
/// ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)). I.e. 8x8 core matrices of 128
/// contiguous bytes, LBO bytes apart along K and SBO bytes apart along M/N.
struct SmemOperand {
  uint64_t offset, lbo, sbo; // bytes
  bool mnMajor;
  uint64_t byteOf(int mn, int k) const {
    uint64_t inCore =
        mnMajor ? (k % 8) * 16 + (mn % 8) * 2 : (mn % 8) * 16 + (k % 8) * 2;
    return offset + (mn / 8) * sbo + (k / 8) * lbo + inCore;
  }
};

/// The shared-memory image the kernel copies into its tile: NaN (0xffff)
/// wherever no operand puts an element, so that reading padding shows.
struct Image {
  std::vector<uint16_t> halves;
  /// Puts X (mn x k: A as it is, B transposed) where `op` says.
  void put(const SmemOperand &op, const Matrix &x, bool transposed) {
    int mns = transposed ? x.cols : x.rows;
    for (int mn = 0; mn < mns; ++mn)
      for (int k = 0; k < 16; ++k) {
        uint64_t b = op.byteOf(mn, k);
        if (halves.size() < b / 2 + 8)
          halves.resize((b / 2 + 8 + 7) / 8 * 8, 0xffff);
        EXPECT_EQ(halves[b / 2], 0xffff) << "operands overlap at byte " << b;
        halves[b / 2] = transposed ? x.bitsAt(k, mn) : x.bitsAt(mn, k);
      }
  }
  int chunks() const { return int(halves.size() / 8); }
};

/// Each thread's A registers for A (64 x 16): warp w's rows 16w.. as
/// mma.sync m16n8k16's A fragment (a0: row g, k 2t and 2t+1; a1: row g+8;
/// a2: k + 8; a3: both), lower k in the lower half.
std::vector<uint32_t> aFragments(const Matrix &a) {
  std::vector<uint32_t> regs(128 * 4);
  for (int tid = 0; tid < 128; ++tid) {
    int m = 16 * (tid / 32) + (tid % 32) / 4, k = 2 * (tid % 4);
    for (int r = 0; r < 4; ++r) {
      int row = m + 8 * (r % 2), col = k + 8 * (r / 2);
      regs[tid * 4 + r] = pack(a.bitsAt(row, col), a.bitsAt(row, col + 1));
    }
  }
  return regs;
}

/// D = sA A x sB B (+ C), per thread: register 4i + j of thread (w, lane)
/// holds D[16w + lane/4 + 8(j/2)][8i + 2(lane%4) + j%2]; exact products
/// summed in double, C first, rounded once.
std::vector<uint32_t> wgmmaReference(const Matrix &a, const Matrix &b,
                                     const std::vector<uint32_t> *c,
                                     float scaleA = 1, float scaleB = 1) {
  int n = b.cols, regs = n / 2;
  std::vector<uint32_t> d(128 * regs);
  for (int tid = 0; tid < 128; ++tid)
    for (int i = 0; i < regs; ++i) {
      int lane = tid % 32, j = i % 4;
      int row = 16 * (tid / 32) + lane / 4 + 8 * (j / 2);
      int col = 8 * (i / 4) + 2 * (lane % 4) + j % 2;
      double acc = 0;
      if (c) {
        float x;
        std::memcpy(&x, &(*c)[tid * regs + i], 4);
        acc = x;
      }
      for (int k = 0; k < 16; ++k)
        acc += double(scaleA * a.at(row, k)) * double(scaleB * b.at(k, col));
      float f = float(acc);
      std::memcpy(&d[tid * regs + i], &f, 4);
    }
  return d;
}

std::vector<uint32_t> randomFloats(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<uint32_t> v(n);
  for (auto &x : v) {
    float f = dist(rng);
    std::memcpy(&x, &f, 4);
  }
  return v;
}

/// The accumulator list {%r200, ...} of m64nNk16.
std::string dRegs(int n) {
  std::string s = "{";
  for (int i = 0; i < n / 2; ++i)
    s += (i ? ", %r" : "%r") + std::to_string(200 + i);
  return s + "}";
}

/// One mma_async m64nNk16 of element type `t` into f32 on the accumulators
/// dRegs(n), `operands` after them (A, B, scale-d and the immediates).
std::string mmaAsync(int n, const std::string &t, const std::string &operands) {
  return "  wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) +
         "k16.f32." + t + "." + t + "\n    " + dRegs(n) + ", " + operands +
         ";\n";
}

const char *const kFence = "  wgmma.fence.sync.aligned;\n";
const char *const kCommit = "  wgmma.commit_group.sync.aligned;\n";
const char *const kWait0 = "  wgmma.wait_group.sync.aligned 0;\n";

/// `mmas` fenced, committed as one group and waited for.
std::string fencedGroup(const std::string &mmas) {
  return kFence + mmas + kCommit + kWait0;
}

/// Builds descriptor `reg` (a b64 register) of the operand at byte
/// `offset` of the tile: address >> 4 in bits 0-13, LBO >> 4 in 16-29,
/// SBO >> 4 in 32-45, `high` (base offset, swizzle) or'ed in.
std::string descriptor(const char *reg, const SmemOperand &op,
                       uint64_t high = 0) {
  uint64_t fields = ((op.lbo >> 4) << 16) | ((op.sbo >> 4) << 32) | high;
  return "  mov.u64 %rd30, tile;\n  add.s64 %rd31, %rd30, " +
         std::to_string(op.offset) +
         ";\n  shr.u64 %rd32, %rd31, 4;\n  and.b64 %rd33, %rd32, 16383;\n"
         "  or.b64 " +
         reg + ", %rd33, " + std::to_string(fields) + ";\n";
}

/// A kernel `wg` for one warpgroup (128 threads): copies `chunks` 16-byte
/// chunks of `img` into the shared tile (then the proxy fence and barrier
/// wgmma's shared operands need), loads two A fragments (%r10-%r13,
/// %r14-%r17) from `a` and the N/2 accumulators %r200.. from `c`, runs
/// `body`, then stores the accumulators to `d` and %r9 (0 unless `body`
/// sets it) to `extra`.
std::string wgmmaKernel(int n, int chunks, const std::string &body) {
  int regs = n / 2;
  std::string accLoads, accStores;
  for (int q = 0; q < regs / 4; ++q) {
    std::string v = "{";
    for (int i = 0; i < 4; ++i)
      v += (i ? ", %r" : "%r") + std::to_string(200 + 4 * q + i);
    v += "}";
    accLoads += "  ld.global.v4.b32 " + v + ", [%rd12+" +
                std::to_string(16 * q) + "];\n";
    accStores += "  st.global.v4.b32 [%rd13+" + std::to_string(16 * q) + "], " +
                 v + ";\n";
  }
  return R"(
.visible .entry wg(.param .u64 pa, .param .u64 pimg, .param .u64 pc,
                   .param .u64 pd, .param .u64 pextra)
{
  .shared .align 128 .b8 tile[)" +
         std::to_string(16 * chunks) + R"(];
  .reg .pred %p<8>;
  .reg .b32 %r<400>;
  .reg .b64 %rd<40>;
  ld.param.u64 %rd1, [pa];
  ld.param.u64 %rd2, [pimg];
  ld.param.u64 %rd3, [pc];
  ld.param.u64 %rd4, [pd];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %r1;
$L__copy:
  setp.ge.u32 %p1, %r2, )" +
         std::to_string(chunks) + R"(;
  @%p1 bra $L__copied;
  mul.wide.u32 %rd5, %r2, 16;
  add.s64 %rd6, %rd2, %rd5;
  ld.global.v4.b32 {%r3, %r4, %r5, %r6}, [%rd6];
  mov.u64 %rd7, tile;
  add.s64 %rd8, %rd7, %rd5;
  st.shared.v4.b32 [%rd8], {%r3, %r4, %r5, %r6};
  add.u32 %r2, %r2, 128;
  bra.uni $L__copy;
$L__copied:
  fence.proxy.async.shared::cta;
  bar.sync 0;
  mul.wide.u32 %rd9, %r1, 16;
  add.s64 %rd10, %rd1, %rd9;
  ld.global.v4.b32 {%r10, %r11, %r12, %r13}, [%rd10];
  ld.global.v4.b32 {%r14, %r15, %r16, %r17}, [%rd10+2048];
  mul.wide.u32 %rd11, %r1, )" +
         std::to_string(regs * 4) + R"(;
  add.s64 %rd12, %rd3, %rd11;
)" + accLoads +
         "  mov.u32 %r9, 0;\n" + body + R"(
  add.s64 %rd13, %rd4, %rd11;
)" + accStores +
         R"(  mul.wide.u32 %rd14, %r1, 4;
  ld.param.u64 %rd15, [pextra];
  add.s64 %rd16, %rd15, %rd14;
  st.global.b32 [%rd16], %r9;
  ret;
}
)";
}

/// Runs kernel text `ptx` on 128 threads (or `threads`): A fragments
/// `a` (two sets), the image, the accumulator inputs `c`; D into `d`, the
/// extra words into `extra`.
int runWgmma(const std::string &ptx, const std::vector<uint32_t> &a,
             const Image &img, std::vector<uint32_t> c,
             std::vector<uint32_t> &d, std::vector<uint32_t> *extra = nullptr,
             std::string *error = nullptr, unsigned threads = 128) {
  Module m(ptx);
  EXPECT_NE(m.module, nullptr) << m.error;
  if (!m.module)
    return -1;
  std::vector<uint32_t> aBoth = a, extraWords(128, 0xdeadbeef);
  aBoth.resize(128 * 8, 0);
  std::vector<uint16_t> halves = img.halves;
  d.assign(c.size(), 0xdeadbeef);
  int rc = launch(m, "wg", threads,
                  {{aBoth.data(), aBoth.size() * 4},
                   {halves.data(), halves.size() * 2},
                   {c.data(), c.size() * 4},
                   {d.data(), d.size() * 4},
                   {extraWords.data(), extraWords.size() * 4}},
                  error);
  if (extra)
    *extra = extraWords;
  return rc;
}

/// Bitwise equality, reporting the first few differences by thread and
/// register.
void expectSameBits(const std::vector<uint32_t> &got,
                    const std::vector<uint32_t> &want, int regs) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i])
      continue;
    if (++bad <= 5) {
      float g, w;
      std::memcpy(&g, &got[i], 4);
      std::memcpy(&w, &want[i], 4);
      ADD_FAILURE() << "thread " << i / regs << " d" << i % regs << ": got "
                    << g << ", want " << w;
    }
  }
  EXPECT_EQ(bad, 0) << "of " << got.size();
}

/// m64n16k16, A from registers, B K-major at offset 256 of the tile; the
/// two LBO/SBO pairs give the same layout only when swapped consistently.
TEST(PtxEmu, WgmmaRegisterAKMajorB) {
  std::mt19937 rng(1);
  Elem e{false};
  Matrix a(64, 16, e, rng), b(16, 16, e, rng);
  SmemOperand bOp{256, 128, 256, false}; // core matrices: K, then N
  Image img;
  img.put(bOp, b, true);
  std::string body =
      "  mov.pred %p2, -1;\n" + descriptor("%rd21", bOp) +
      fencedGroup(
          mmaAsync(16, "f16", "{%r10, %r11, %r12, %r13}, %rd21, %p2, 1, 1, 0"));
  std::vector<uint32_t> c = randomFloats(128 * 8, rng), d;
  ASSERT_EQ(
      runWgmma(wgmmaKernel(16, img.chunks(), body), aFragments(a), img, c, d),
      PTXEMU_OK);
  expectSameBits(d, wgmmaReference(a, b, &c), 8);
  // The same data with LBO and SBO swapped in the descriptor only reads
  // other elements: the check above could fail.
  std::string swapped = body;
  SmemOperand wrong{256, 256, 128, false};
  swapped.replace(swapped.find(descriptor("%rd21", bOp)),
                  descriptor("%rd21", bOp).size(), descriptor("%rd21", wrong));
  ASSERT_EQ(runWgmma(wgmmaKernel(16, img.chunks(), swapped), aFragments(a), img,
                     c, d),
            PTXEMU_OK);
  EXPECT_NE(d, wgmmaReference(a, b, &c));
}

/// bf16, B MN-major (tnsp-b 1), N = 24, scale-d from setp.
TEST(PtxEmu, WgmmaRegisterAMnMajorBf16) {
  std::mt19937 rng(2);
  Elem e{true};
  Matrix a(64, 16, e, rng), b(16, 24, e, rng);
  SmemOperand bOp{0, 3 * 128, 128, true}; // core matrices: N, then K
  Image img;
  img.put(bOp, b, true);
  std::string body =
      "  setp.ne.u32 %p2, %r1, 4096;\n" + descriptor("%rd21", bOp) +
      fencedGroup(mmaAsync(24, "bf16",
                           "{%r10, %r11, %r12, %r13}, %rd21, %p2, 1, 1, 1"));
  std::vector<uint32_t> c = randomFloats(128 * 12, rng), d;
  ASSERT_EQ(
      runWgmma(wgmmaKernel(24, img.chunks(), body), aFragments(a), img, c, d),
      PTXEMU_OK);
  expectSameBits(d, wgmmaReference(a, b, &c), 12);
}

/// A and B from shared memory, padded between core matrices (LBO 160 and
/// SBO 368 for A, K-major; B MN-major with LBO 448, SBO 144), scale-d false
/// (the accumulators' NaNs ignored).
TEST(PtxEmu, WgmmaSharedAPaddedCoreMatrices) {
  std::mt19937 rng(3);
  Elem e{false};
  Matrix a(64, 16, e, rng), b(16, 24, e, rng);
  SmemOperand aOp{0, 160, 368, false};
  SmemOperand bOp{3072, 448, 144, true};
  Image img;
  img.put(aOp, a, false);
  img.put(bOp, b, true);
  std::string body =
      "  mov.pred %p2, 0;\n" + descriptor("%rd20", aOp) +
      descriptor("%rd21", bOp) +
      fencedGroup(mmaAsync(24, "f16", "%rd20, %rd21, %p2, 1, 1, 0, 1"));
  std::vector<uint32_t> c(128 * 12, 0x7fc00000u), d;
  ASSERT_EQ(runWgmma(wgmmaKernel(24, img.chunks(), body), {}, img, c, d),
            PTXEMU_OK);
  expectSameBits(d, wgmmaReference(a, b, nullptr), 12);
}

/// Two mma_async on the same accumulators, one group: the first ignores
/// the accumulators (NaN), the second adds to the first's result.
TEST(PtxEmu, WgmmaChainedOnTheSameAccumulators) {
  std::mt19937 rng(4);
  Elem e{false};
  Matrix a1(64, 16, e, rng), a2(64, 16, e, rng), b1(16, 32, e, rng),
      b2(16, 32, e, rng);
  SmemOperand b1Op{0, 128, 256, false}, b2Op{1024, 128, 256, false};
  Image img;
  img.put(b1Op, b1, true);
  img.put(b2Op, b2, true);
  std::string body =
      "  mov.pred %p2, 0;\n  mov.pred %p3, 1;\n" + descriptor("%rd21", b1Op) +
      descriptor("%rd22", b2Op) +
      fencedGroup(
          mmaAsync(32, "f16", "{%r10, %r11, %r12, %r13}, %rd21, %p2, 1, 1, 0") +
          mmaAsync(32, "f16", "{%r14, %r15, %r16, %r17}, %rd22, %p3, 1, 1, 0"));
  std::vector<uint32_t> frags = aFragments(a1), frags2 = aFragments(a2);
  frags.insert(frags.end(), frags2.begin(), frags2.end());
  std::vector<uint32_t> c(128 * 16, 0xffffffffu), d;
  ASSERT_EQ(runWgmma(wgmmaKernel(32, img.chunks(), body), frags, img, c, d),
            PTXEMU_OK);
  std::vector<uint32_t> first = wgmmaReference(a1, b1, nullptr);
  expectSameBits(d, wgmmaReference(a2, b2, &first), 16);
}

/// scale-d as the immediates 0 and 1 (as ptxas takes it, and Triton
/// writes it): the first product ignores the accumulators, the second adds.
TEST(PtxEmu, WgmmaScaleDImmediate) {
  std::mt19937 rng(14);
  Elem e{true};
  Matrix a1(64, 16, e, rng), a2(64, 16, e, rng), b1(16, 16, e, rng),
      b2(16, 16, e, rng);
  SmemOperand b1Op{0, 128, 256, false}, b2Op{1024, 128, 256, false};
  Image img;
  img.put(b1Op, b1, true);
  img.put(b2Op, b2, true);
  std::string body =
      descriptor("%rd21", b1Op) + descriptor("%rd22", b2Op) +
      fencedGroup(
          mmaAsync(16, "bf16", "{%r10, %r11, %r12, %r13}, %rd21, 0, 1, 1, 0") +
          mmaAsync(16, "bf16", "{%r14, %r15, %r16, %r17}, %rd22, 1, 1, 1, 0"));
  std::vector<uint32_t> frags = aFragments(a1), frags2 = aFragments(a2);
  frags.insert(frags.end(), frags2.begin(), frags2.end());
  std::vector<uint32_t> c(128 * 8, 0x7fc00000u), d;
  ASSERT_EQ(runWgmma(wgmmaKernel(16, img.chunks(), body), frags, img, c, d),
            PTXEMU_OK);
  std::vector<uint32_t> first = wgmmaReference(a1, b1, nullptr);
  expectSameBits(d, wgmmaReference(a2, b2, &first), 8);
}

/// An accumulator read before its wait_group is NaN, also after a
/// wait_group that retired an earlier wgmma on it while a later one is in
/// flight; the tile is read at the wait: overwriting it before gives other
/// results.
TEST(PtxEmu, WgmmaAccumulatorsAreUndefinedUntilTheWait) {
  std::mt19937 rng(5);
  Elem e{false};
  Matrix a(64, 16, e, rng), b(16, 8, e, rng);
  SmemOperand bOp{0, 128, 256, false};
  Image img;
  img.put(bOp, b, true);
  std::string issue =
      mmaAsync(8, "f16", "{%r10, %r11, %r12, %r13}, %rd21, %p2, 1, 1, 0") +
      kCommit;
  std::string body = "  mov.pred %p2, 1;\n" + descriptor("%rd21", bOp) +
                     kFence + issue + issue +
                     R"(  wgmma.wait_group.sync.aligned 1;
  mov.b32 %r9, %r201;
  wgmma.wait_group.sync.aligned 0;
)";
  std::vector<uint32_t> c = randomFloats(128 * 4, rng), d, extra;
  ASSERT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), body), aFragments(a), img, c,
                     d, &extra),
            PTXEMU_OK);
  std::vector<uint32_t> once = wgmmaReference(a, b, &c);
  expectSameBits(d, wgmmaReference(a, b, &once), 4);
  EXPECT_EQ(extra, std::vector<uint32_t>(128, 0xffffffffu));

  // Read right after the issue; and the tile zeroed before the wait.
  std::string early = "  mov.pred %p2, 1;\n" + descriptor("%rd21", bOp) +
                      kFence + issue +
                      R"(  mov.b32 %r9, %r200;
  mov.u32 %r8, 0;
  st.shared.b32 [%rd31], %r8;
  wgmma.wait_group.sync.aligned 0;
)";
  ASSERT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), early), aFragments(a), img, c,
                     d, &extra),
            PTXEMU_OK);
  EXPECT_EQ(extra, std::vector<uint32_t>(128, 0xffffffffu));
  Matrix zeroed = b;
  for (int k = 0; k < 2; ++k) // b's (n 0, k 0..1) at the tile's first word
    zeroed.values[k * b.cols] = 0;
  expectSameBits(d, wgmmaReference(a, zeroed, &c), 4);
}

/// scale-a -1, with A MN-major from shared memory.
TEST(PtxEmu, WgmmaNegatedMnMajorA) {
  std::mt19937 rng(6);
  Elem e{true};
  Matrix a(64, 16, e, rng), b(16, 16, e, rng);
  SmemOperand aOp{0, 1024, 128, true}; // core matrices: M, then K
  SmemOperand bOp{2048, 128, 256, false};
  Image img;
  img.put(aOp, a, false);
  img.put(bOp, b, true);
  std::string body =
      "  mov.pred %p2, -1;\n" + descriptor("%rd20", aOp) +
      descriptor("%rd21", bOp) +
      fencedGroup(mmaAsync(16, "bf16", "%rd20, %rd21, %p2, -1, 1, 1, 0"));
  std::vector<uint32_t> c = randomFloats(128 * 8, rng), d;
  ASSERT_EQ(runWgmma(wgmmaKernel(16, img.chunks(), body), {}, img, c, d),
            PTXEMU_OK);
  expectSameBits(d, wgmmaReference(a, b, &c, -1.0f), 8);
}

/// What a launch reports: a descriptor with a base offset, a wgmma never
/// waited for,
/// a warpgroup the block does not fill, a tile beyond shared memory, an
/// mma_async without a wgmma.fence before it, a warp of the warpgroup that
/// skips one, registers of a wgmma in flight written before its wait.
TEST(PtxEmu, WgmmaLaunchErrors) {
  std::mt19937 rng(7);
  Elem e{false};
  Matrix a(64, 16, e, rng), b(16, 8, e, rng);
  SmemOperand bOp{0, 128, 256, false};
  Image img;
  img.put(bOp, b, true);
  auto body = [&](const SmemOperand &op, uint64_t high, const char *wait) {
    return "  mov.pred %p2, 1;\n" + descriptor("%rd21", op, high) + kFence +
           mmaAsync(8, "f16", "{%r10, %r11, %r12, %r13}, %rd21, %p2, 1, 1, 0") +
           kCommit + wait;
  };
  const char *wait0 = kWait0;
  const char *wait1 = "  wgmma.wait_group.sync.aligned 1;\n";
  std::vector<uint32_t> c(128 * 4, 0), d;
  std::string error;
  EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), body(bOp, 1ull << 49, wait0)),
                     aFragments(a), img, c, d, nullptr, &error),
            PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("wgmma.mma_async"), std::string::npos) << error;
  EXPECT_NE(error.find("the B descriptor"), std::string::npos) << error;
  EXPECT_NE(error.find("base offset 1"), std::string::npos) << error;
  EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), body(bOp, 0, wait1)),
                     aFragments(a), img, c, d, nullptr, &error),
            PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("wgmma not waited for"), std::string::npos) << error;
  EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), body(bOp, 0, "")),
                     aFragments(a), img, c, d, nullptr, &error),
            PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("wgmma not waited for"), std::string::npos) << error;
  EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), body(bOp, 0, wait0)),
                     aFragments(a), img, c, d, nullptr, &error, 64),
            PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("does not fill"), std::string::npos) << error;
  SmemOperand outside{16 * 1024, 128, 256, false};
  EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), body(outside, 0, wait0)),
                     aFragments(a), img, c, d, nullptr, &error),
            PTXEMU_ILLEGAL_ADDRESS);
  EXPECT_NE(error.find("beyond the block's"), std::string::npos) << error;
  std::string unfenced = body(bOp, 0, wait0);
  unfenced.erase(unfenced.find(kFence), std::string(kFence).size());
  EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), unfenced), aFragments(a), img,
                     c, d, nullptr, &error),
            PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("without a wgmma.fence"), std::string::npos) << error;
  // All 4 warps of the warpgroup must issue the same mma_async: here warp 2
  // skips it.
  std::string skipping = body(bOp, 0, wait0);
  skipping.replace(skipping.find("  wgmma.mma_async"), 0,
                   "  setp.ge.u32 %p3, %r1, 64;\n  setp.lt.u32 %p4, %r1, 96;\n"
                   "  and.pred %p3, %p3, %p4;\n  @%p3 bra $L__skip;\n");
  skipping.replace(skipping.find("  wgmma.commit_group"), 0, "$L__skip:\n");
  EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), skipping), aFragments(a), img,
                     c, d, nullptr, &error),
            PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("warp 2 of warpgroup 0 issued other wgmma.mma_async "
                       "than warp 0: its wgmma 1 is none"),
            std::string::npos)
      << error;
  // Registers of a wgmma in flight must keep their values until its wait.
  for (auto [write, what] :
       {std::pair{"  mov.b32 %r11, 0;\n", "A register 1 of"},
        std::pair{"  mov.b32 %r201, 0;\n", "accumulator register 1 of"}}) {
    std::string early = body(bOp, 0, (std::string(write) + wait0).c_str());
    EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), early), aFragments(a), img,
                       c, d, nullptr, &error),
              PTXEMU_LAUNCH_FAILED);
    EXPECT_NE(error.find(what), std::string::npos) << error;
    EXPECT_NE(error.find("written while the wgmma was in flight"),
              std::string::npos)
        << error;
  }
  // And the same kernel as it should be runs.
  EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), body(bOp, 0, wait0)),
                     aFragments(a), img, c, d),
            PTXEMU_OK);
}

/// "loaded" when a kernel of the one instruction `inst` loads, else the
/// interpreter's error.
std::string loadsOrError(const std::string &inst) {
  Module m(R"(
.visible .entry k(.param .u64 p)
{
  .reg .pred %p<2>;
  .reg .b32 %r<300>;
  .reg .b64 %rd<4>;
  )" + inst +
           R"(
  ret;
}
)");
  return m.module ? std::string("loaded") : m.error;
}

TEST(PtxEmu, WgmmaRejectsFormsItDoesNotImplement) {
  auto load = loadsOrError;
  std::string d8 = dRegs(8), a = ", {%r10, %r11, %r12, %r13}, %rd1, %p1, ";
  EXPECT_EQ(load("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 " + d8 + a +
                 "1, 1, 0;"),
            "loaded");
  // scale-d as an immediate 0 or 1, as ptxas takes it.
  EXPECT_EQ(load("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 " + d8 +
                 ", {%r10, %r11, %r12, %r13}, %rd1, 1, 1, 1, 0;"),
            "loaded");
  EXPECT_EQ(load("wgmma.fence.sync.aligned;"), "loaded");
  EXPECT_EQ(load("fence.proxy.async.shared::cta;"), "loaded");
  for (std::string bad : {
           "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16 {%r200, %r201}" +
               a + "1, 1, 0;",
           "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16.satfinite " + d8 +
               a + "1, 1, 0;",
           "wgmma.mma_async.sync.aligned.m64n8k16.f32.e4m3.e4m3 " + d8 + a +
               "1, 1, 0;",
           "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 " + d8 + a +
               "1, 1, 0;",
           "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16 " + d8 + a +
               "1, 1, 0;",
           "wgmma.mma_async.sync.aligned.m64n12k16.f32.f16.f16 " + d8 + a +
               "1, 1, 0;",
           "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 " + d8 + a +
               "1, 1, 0;",
           "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 " + d8 + a +
               "2, 1, 0;",
           "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 " + d8 + a +
               "1, 1, 2;",
           "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 " + d8 +
               ", {%r10, %r11, %r12, %r13}, %rd1, 2, 1, 1, 0;",
           std::string("wgmma.wait_group.sync.aligned %r1;"),
           std::string("fence.sc.cluster;"),
       }) {
    std::string error = load(bad);
    EXPECT_NE(error, "loaded") << bad;
    EXPECT_NE(error.find("line 10:"), std::string::npos) << error;
  }
}

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

//===-- TMA and mbarrier --------------------------------------------------===//

/// A CUtensorMap's 128 bytes, holding what the fake driver's
/// cuTensorMapEncodeTiled writes (fake_tensor_map.h).
union alignas(64) TensorMap {
  fake_tensor_map map;
  char bytes[128];
};

/// A map of `base`: sizes and box innermost first, `strides` the bytes
/// between elements of dimensions 1.., `swizzle` as CUtensorMapSwizzle (0
/// none, 1 32-byte, 2 64-byte, 3 128-byte).
TensorMap tensorMap(const void *base, int elementBytes,
                    std::vector<uint64_t> dims, std::vector<uint64_t> strides,
                    std::vector<uint16_t> box, int swizzle, int oobFill = 0) {
  TensorMap t;
  std::memset(&t, 0, sizeof t);
  fake_tensor_map &m = t.map;
  m.magic = FAKE_TENSOR_MAP_MAGIC;
  m.dataType = elementBytes == 2 ? 6 : 7;
  m.rank = uint8_t(dims.size());
  m.elementBytes = uint8_t(elementBytes);
  m.swizzle = uint8_t(swizzle);
  m.oobFill = uint8_t(oobFill);
  m.address = reinterpret_cast<uintptr_t>(base);
  for (size_t d = 0; d < dims.size(); ++d) {
    m.dims[d] = dims[d];
    m.box[d] = box[d];
    m.elementStrides[d] = 1;
    if (d)
      m.strides[d - 1] = strides[d - 1];
  }
  return t;
}

/// Where a swizzle of `span` bytes (0, 32, 64, 128) puts shared byte `a`:
/// 16-byte chunk c of 128-byte line l of the pattern goes to chunk
/// c ^ (l mod span / 16), the xor confined to the chunks of one span.
uint64_t swizzled(uint64_t a, int span) {
  if (!span)
    return a;
  uint64_t chunks = uint64_t(span) / 16; // 2, 4 or 8 chunks are permuted
  uint64_t line = (a / 128) % chunks, chunk = (a / 16) % 8;
  return a - chunk * 16 + (chunk ^ line) * 16;
}

/// The exact inline asm tfc emits to wait on the mbarrier at %r1 for the
/// phase of parity %r13, in its loop.
std::string waitLoop(const std::string &label, const std::string &bar = "%r1",
                     const std::string &parity = "%r13") {
  return "$" + label +
         ":\n  {\n  .reg .pred p;\n"
         "  mbarrier.try_wait.parity.shared::cta.b64 p, [" +
         bar + "], " + parity +
         ";\n  selp.b32 %r14, 1, 0, p;\n  }\n"
         "  setp.eq.u32 %p9, %r14, 0;\n  @%p9 bra $" +
         label + ";\n";
}

/// A TMA load of the map at %rd<mapReg> into tile + `offset`, on the
/// mbarrier at %r1, at `coords` (moved into %r40..).
std::string tmaLoad(int offset, const std::vector<int> &coords,
                    const std::string &map = "%rd1",
                    const std::string &bar = "%r1") {
  std::string s, list;
  for (size_t d = 0; d < coords.size(); ++d) {
    std::string reg = "%r" + std::to_string(40 + d);
    s += "  mov.u32 " + reg + ", " + std::to_string(coords[d]) + ";\n";
    list += (d ? ", " : "") + reg;
  }
  return s + "  cp.async.bulk.tensor." + std::to_string(coords.size()) +
         "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2+" +
         std::to_string(offset) + "], [" + map + ", {" + list + "}], [" + bar +
         "];\n";
}

/// Kernel `tma` for `threads` threads: %rd1 the tensor maps (128 bytes
/// each), %rd2 the output, %rd8 the extra input, %r1 the mbarriers (`bar`,
/// 4 of them), %r2 the 1024-byte aligned `tile` of `tileBytes` bytes, first
/// filled with 0x5a; %r9 the thread, %p1 set in threads other than 0,
/// %r13 = 0. Runs `body`, then thread 0 copies the tile to the output.
std::string tmaKernel(int tileBytes, const std::string &body) {
  std::string size = std::to_string(tileBytes);
  return R"(
.visible .entry tma(.param .u64 pmap, .param .u64 pout, .param .u64 pextra)
{
  .shared .align 1024 .b8 tile[)" +
         size + R"(];
  .shared .align 8 .b8 bar[32];
  .reg .pred %p<12>;
  .reg .b32 %r<64>;
  .reg .f32 %f<8>;
  .reg .b16 %rs<8>;
  .reg .b64 %rd<40>;
  ld.param.u64 %rd1, [pmap];
  ld.param.u64 %rd2, [pout];
  ld.param.u64 %rd8, [pextra];
  mov.u32 %r1, bar;
  mov.u32 %r2, tile;
  mov.u32 %r9, %tid.x;
  setp.ne.u32 %p1, %r9, 0;
  mov.u32 %r13, 0;
  @%p1 bra $L__filled;
  mov.u32 %r20, 0;
  mov.u32 %r21, 0x5a5a5a5a;
$L__fill:
  add.u32 %r22, %r2, %r20;
  st.shared.v4.b32 [%r22], {%r21, %r21, %r21, %r21};
  add.u32 %r20, %r20, 16;
  setp.lt.u32 %p2, %r20, )" +
         size + R"(;
  @%p2 bra $L__fill;
$L__filled:
  bar.sync 0;
)" + body +
         R"(
  bar.sync 0;
  @%p1 bra $L__end;
  mov.u32 %r20, 0;
$L__out:
  add.u32 %r22, %r2, %r20;
  ld.shared.v4.b32 {%r23, %r24, %r25, %r26}, [%r22];
  cvt.u64.u32 %rd3, %r20;
  add.s64 %rd4, %rd2, %rd3;
  st.global.v4.b32 [%rd4], {%r23, %r24, %r25, %r26};
  add.u32 %r20, %r20, 16;
  setp.lt.u32 %p2, %r20, )" +
         size + R"(;
  @%p2 bra $L__out;
$L__end:
  ret;
}
)";
}

/// Thread 0 initialises the mbarrier at %r1 (count 1); after a barrier
/// (the init must be visible before other threads use it), it arrives
/// expecting `bytes` and issues `loads`; then every thread waits for phase
/// 0.
std::string loadAndWait(int bytes, const std::string &loads) {
  return "  @%p1 bra $L__inited;\n"
         "  mbarrier.init.shared::cta.b64 [%r1], 1;\n"
         "  fence.mbarrier_init.release.cluster;\n"
         "$L__inited:\n  bar.sync 0;\n  @%p1 bra $L__issued;\n"
         "  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], " +
         std::to_string(bytes) + ";\n" + loads + "$L__issued:\n" +
         waitLoop("L__wait");
}

/// Runs kernel `tma` of `m` on `threads` threads: the tensor maps, the
/// tile's image as output, the extra input; these are the device memory,
/// with the tensors the maps describe (or `tensors` where given).
int runTmaMaps(Module &m, std::vector<TensorMap> maps,
               std::vector<uint8_t> &tile, std::string *error = nullptr,
               unsigned threads = 128, std::vector<uint32_t> extra = {0},
               const std::vector<ptxemu_range> *tensors = nullptr) {
  ptxemu_kernel *k = ptxemu_get(m.module, "tma");
  EXPECT_NE(k, nullptr) << m.error;
  if (!k)
    return -1;
  std::vector<void *> values = {maps.data(), tile.data(), extra.data()};
  std::vector<ptxemu_range> ranges = {
      {reinterpret_cast<const char *>(maps.data()),
       maps.size() * sizeof(TensorMap)},
      {reinterpret_cast<const char *>(tile.data()), tile.size()},
      {reinterpret_cast<const char *>(extra.data()), extra.size() * 4}};
  std::vector<void *> params;
  for (void *&v : values)
    params.push_back(&v);
  if (tensors)
    ranges.insert(ranges.end(), tensors->begin(), tensors->end());
  for (const TensorMap &t : maps)
    if (!tensors && t.map.magic == FAKE_TENSOR_MAP_MAGIC && t.map.address)
      ranges.push_back({reinterpret_cast<const char *>(t.map.address),
                        size_t(t.map.dims[t.map.rank - 1]) *
                            (t.map.rank > 1 ? t.map.strides[t.map.rank - 2]
                                            : t.map.elementBytes)});
  unsigned grid[3] = {1, 1, 1}, block[3] = {threads, 1, 1};
  char buf[512] = "";
  int rc = ptxemu_launch(k, grid, block, 0, params.data(), ranges.data(),
                         ranges.size(), buf, sizeof buf);
  if (error)
    *error = buf;
  return rc;
}

/// The same for one map.
int runTma(const std::string &ptx, const TensorMap &map,
           std::vector<uint8_t> &tile, unsigned threads = 1,
           std::string *error = nullptr) {
  Module m(ptx);
  EXPECT_NE(m.module, nullptr) << m.error;
  if (!m.module)
    return -1;
  return runTmaMaps(m, {map}, tile, error, threads);
}

/// The tile image a TMA load should leave, computed element by element
/// from the PTX ISA's description: the box (innermost first) at `coords`
/// placed densely at tile offset `dst`, bytes swizzled, out-of-bound
/// elements zero or a NaN (all ones but the sign bit), the rest 0x5a.
std::vector<uint8_t> expectedTile(const TensorMap &t,
                                  const std::vector<int> &coords, int dst,
                                  int tileBytes) {
  const fake_tensor_map &m = t.map;
  std::vector<uint8_t> tile(tileBytes, 0x5a);
  int rank = m.rank, eb = m.elementBytes;
  int span = m.swizzle == 0 ? 0 : 16 << m.swizzle;
  int count = 1;
  for (int d = 0; d < rank; ++d)
    count *= m.box[d];
  for (int e = 0; e < count; ++e) {
    // Box index i (innermost fastest) and its global coordinates.
    int rest = e;
    bool inBounds = true;
    int64_t offset = 0; // of the element in the tensor, bytes
    for (int d = 0; d < rank; ++d) {
      int64_t x = coords[d] + rest % m.box[d];
      rest /= m.box[d];
      inBounds = inBounds && x >= 0 && x < int64_t(m.dims[d]);
      offset += x * (d ? int64_t(m.strides[d - 1]) : eb);
    }
    const char *src =
        inBounds ? reinterpret_cast<const char *>(uintptr_t(m.address)) + offset
                 : nullptr;
    for (int b = 0; b < eb; ++b) {
      uint8_t fill = m.oobFill ? (b == eb - 1 ? 0x7f : 0xff) : 0;
      uint64_t at = swizzled(uint64_t(dst) + uint64_t(e) * eb + b, span);
      tile.at(at) = inBounds ? uint8_t(src[b]) : fill;
    }
  }
  return tile;
}

/// Elements numbered from 1 (no 0x5a5a, no NaN pattern among them).
template <typename T> std::vector<T> numbered(size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = T(i + 1);
  return v;
}

/// TMA boxes of 1 to 5 dimensions, without swizzle and with each swizzle,
/// partly out of bounds (negative coordinates and beyond the end), written
/// byte by byte where the ISA says, at 128-byte aligned destinations that
/// are not 1024-byte aligned too (the swizzle is of the address itself).
TEST(PtxEmu, TmaLoadsBoxesWithOutOfBoundFill) {
  std::vector<uint16_t> g16 = numbered<uint16_t>(8192);
  std::vector<uint32_t> g32 = numbered<uint32_t>(8192);
  struct Case {
    const char *name;
    TensorMap map;
    std::vector<int> coords;
    int dst;
  };
  std::vector<Case> cases = {
      // 40 x 20 f16, rows 96 bytes apart, box 24 x 6.
      {"2d none",
       tensorMap(g16.data(), 2, {40, 20}, {96}, {24, 6}, 0),
       {-8, 17},
       128},
      // 100 x 30 f16, rows of 208 bytes, box 64 x 16, NaN fill.
      {"2d 128B",
       tensorMap(g16.data(), 2, {100, 30}, {208}, {64, 16}, 3, 1),
       {60, -3},
       384},
      {"2d 128B in",
       tensorMap(g16.data(), 2, {100, 30}, {208}, {64, 16}, 3),
       {8, 2},
       0},
      // f32, 20 x 6 x 5, box 16 x 4 x 3 (rows of 64 bytes).
      {"3d 64B",
       tensorMap(g32.data(), 4, {20, 6, 5}, {96, 672}, {16, 4, 3}, 2),
       {8, 3, -1},
       256},
      {"3d 32B",
       tensorMap(g16.data(), 2, {16, 9, 4}, {48, 480}, {16, 5, 3}, 1, 1),
       {-4, 6, 2},
       128},
      {"1d none", tensorMap(g16.data(), 2, {50}, {}, {64}, 0), {-10}, 128},
      {"5d none",
       tensorMap(g16.data(), 2, {8, 3, 3, 2, 2}, {16, 48, 144, 288},
                 {8, 2, 2, 2, 2}, 0, 1),
       {0, 2, -1, 1, 0},
       0},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    const fake_tensor_map &m = c.map.map;
    int bytes = m.elementBytes;
    for (int d = 0; d < m.rank; ++d)
      bytes *= m.box[d];
    int tileBytes = (c.dst + bytes + 1023) / 1024 * 1024;
    std::vector<uint8_t> tile(tileBytes, 0);
    ASSERT_EQ(runTma(tmaKernel(tileBytes,
                               loadAndWait(bytes, tmaLoad(c.dst, c.coords))),
                     c.map, tile),
              PTXEMU_OK);
    std::vector<uint8_t> want = expectedTile(c.map, c.coords, c.dst, tileBytes);
    int bad = 0;
    for (int i = 0; i < tileBytes; ++i)
      if (tile[i] != want[i] && ++bad <= 5)
        ADD_FAILURE() << "tile byte " << i << ": got " << int(tile[i])
                      << ", want " << int(want[i]);
    EXPECT_EQ(bad, 0);
  }
}

/// A box entirely out of bounds reads nothing (its map's address need not
/// even be device memory) and is all fill.
TEST(PtxEmu, TmaBoxEntirelyOutOfBounds) {
  for (int fill : {0, 1}) {
    TensorMap map = tensorMap(nullptr, 2, {64, 64}, {128}, {64, 8}, 3, fill);
    std::vector<int> coords = {-64, 20};
    std::vector<uint8_t> tile(1024, 0);
    ASSERT_EQ(runTma(tmaKernel(1024, loadAndWait(1024, tmaLoad(0, coords))),
                     map, tile),
              PTXEMU_OK);
    for (int i = 0; i < 1024; i += 2) {
      uint16_t h = uint16_t(tile[i] | tile[i + 1] << 8);
      ASSERT_EQ(h, fill ? 0x7fff : 0) << "byte " << i;
    }
  }
}

/// The destination of a TMA load holds NaNs (0xff bytes) until a wait
/// completes its mbarrier's phase: a read before the wait sees them.
TEST(PtxEmu, TmaDestinationIsUndefinedUntilTheWait) {
  std::vector<uint16_t> g = numbered<uint16_t>(64 * 8);
  TensorMap map = tensorMap(g.data(), 2, {64, 8}, {128}, {64, 8}, 3);
  // Reads tile word 0 into tile word 300 after the issue, and again after
  // the wait into word 301.
  std::string body = R"(
  @%p1 bra $L__issued;
  mbarrier.init.shared::cta.b64 [%r1], 1;
  mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %rd5, [%r1], 1024;
)" + tmaLoad(0, {0, 0}) +
                     R"(  ld.shared.b32 %r30, [%r2];
  st.shared.b32 [%r2+1200], %r30;
$L__issued:
)" + waitLoop("L__wait") +
                     R"(  @%p1 bra $L__read;
  ld.shared.b32 %r30, [%r2];
  st.shared.b32 [%r2+1204], %r30;
$L__read:
)";
  std::vector<uint8_t> tile(2048, 0);
  ASSERT_EQ(runTma(tmaKernel(2048, body), map, tile), PTXEMU_OK);
  uint32_t before, after;
  std::memcpy(&before, &tile[1200], 4);
  std::memcpy(&after, &tile[1204], 4);
  EXPECT_EQ(before, 0xffffffffu); // a NaN in every float format
  EXPECT_EQ(after, pack(g[0], g[1]));
}

/// Thread 0 numbers the tile's words (the word at byte offset w holds
/// w + 1) and issues a TMA store of the map at %rd1 from tile + `offset`
/// at `coords` in one bulk group; `wait` follows the commit.
std::string tmaStore(int tileBytes, int offset, const std::vector<int> &coords,
                     const std::string &wait) {
  std::string s = R"(  @%p1 bra $L__stored;
  mov.u32 %r20, 0;
$L__number:
  add.u32 %r22, %r2, %r20;
  add.u32 %r23, %r20, 1;
  st.shared.b32 [%r22], %r23;
  add.u32 %r20, %r20, 4;
  setp.lt.u32 %p2, %r20, )" +
                  std::to_string(tileBytes) +
                  R"(;
  @%p2 bra $L__number;
  fence.proxy.async.shared::cta;
)";
  std::string list;
  for (size_t d = 0; d < coords.size(); ++d) {
    std::string reg = "%r" + std::to_string(40 + d);
    s += "  mov.u32 " + reg + ", " + std::to_string(coords[d]) + ";\n";
    list += (d ? ", " : "") + reg;
  }
  return s + "  cp.async.bulk.tensor." + std::to_string(coords.size()) +
         "d.global.shared::cta.tile.bulk_group [%rd1, {" + list + "}], [%r2+" +
         std::to_string(offset) + "];\n  cp.async.bulk.commit_group;\n" + wait +
         "$L__stored:\n";
}

/// TMA stores (cp.async.bulk.tensor, shared to global, bulk groups): the
/// box read from shared memory as a load would have written it (densely,
/// swizzled per the map), and only its in-bound elements written, the rest
/// of the tensor left as it was; the ISA's description written out byte by
/// byte, as for the loads.
TEST(PtxEmu, TmaStoresTheInBoundPartOfTheBox) {
  struct Case {
    const char *name;
    int elementBytes, swizzle;
    std::vector<uint64_t> dims, strides;
    std::vector<uint16_t> box;
    std::vector<int> coords;
    int dst;
  };
  std::vector<Case> cases = {
      {"2d none", 2, 0, {40, 20}, {96}, {24, 6}, {-8, 17}, 128},
      {"2d 128B", 2, 3, {100, 30}, {208}, {64, 16}, {60, -3}, 384},
      {"2d 128B in", 2, 3, {100, 30}, {208}, {64, 16}, {8, 2}, 0},
      {"3d 64B", 4, 2, {20, 6, 5}, {96, 672}, {16, 4, 3}, {8, 3, -1}, 256},
      {"3d 32B", 2, 1, {16, 9, 4}, {48, 480}, {16, 5, 3}, {-4, 6, 2}, 128},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<uint8_t> tensor(8192 * 4);
    for (size_t i = 0; i < tensor.size(); ++i)
      tensor[i] = uint8_t(i * 7 + 3);
    std::vector<uint8_t> before = tensor;
    TensorMap map = tensorMap(tensor.data(), c.elementBytes, c.dims, c.strides,
                              c.box, c.swizzle);
    int count = 1;
    for (uint16_t b : c.box)
      count *= b;
    int bytes = count * c.elementBytes;
    int tileBytes = (c.dst + bytes + 1023) / 1024 * 1024;
    std::vector<uint8_t> tile(tileBytes, 0);
    Module m(
        tmaKernel(tileBytes, tmaStore(tileBytes, c.dst, c.coords,
                                      "  cp.async.bulk.wait_group.read 0;\n")));
    ASSERT_NE(m.module, nullptr) << m.error;
    ASSERT_EQ(runTmaMaps(m, {map}, tile), PTXEMU_OK);
    // Element e of the box (innermost fastest) came from tile byte
    // swizzle(dst + e * size + b); the word at byte w holds w + 1.
    std::vector<uint8_t> want = before;
    int span = c.swizzle ? 16 << c.swizzle : 0;
    int rank = int(c.dims.size());
    for (int e = 0; e < count; ++e) {
      int rest = e;
      bool inBounds = true;
      int64_t offset = 0;
      for (int d = 0; d < rank; ++d) {
        int64_t x = c.coords[d] + rest % c.box[d];
        rest /= c.box[d];
        inBounds = inBounds && x >= 0 && x < int64_t(c.dims[d]);
        offset += x * (d ? int64_t(c.strides[d - 1]) : c.elementBytes);
      }
      for (int b = 0; inBounds && b < c.elementBytes; ++b) {
        uint64_t at = swizzled(
            uint64_t(c.dst) + uint64_t(e) * c.elementBytes + uint64_t(b), span);
        uint32_t word = uint32_t(at / 4 * 4 + 1);
        want.at(size_t(offset + b)) = uint8_t(word >> (8 * (at % 4)));
      }
    }
    int bad = 0;
    for (size_t i = 0; i < tensor.size(); ++i)
      if (tensor[i] != want[i] && ++bad <= 5)
        ADD_FAILURE() << "tensor byte " << i << ": got " << int(tensor[i])
                      << ", want " << int(want[i]);
    EXPECT_EQ(bad, 0);
    EXPECT_NE(tensor, before);
  }
}

/// A TMA store reads shared memory until cp.async.bulk.wait_group[.read]
/// completes its group: the interpreter reads it there, so a tile
/// rewritten before the wait is what reaches global memory, and a store
/// still pending when its thread exits fails the launch. wait_group N
/// leaves the newest N groups pending.
TEST(PtxEmu, TmaStoreReadsSharedMemoryUntilItsWait) {
  std::vector<uint16_t> g(64 * 8, 0);
  TensorMap map = tensorMap(g.data(), 2, {64, 8}, {128}, {64, 8}, 3);
  auto run = [&](const std::string &wait, std::string *error = nullptr) {
    std::fill(g.begin(), g.end(), 0);
    std::vector<uint8_t> tile(1024, 0);
    Module m(tmaKernel(1024, tmaStore(1024, 0, {0, 0}, wait)));
    EXPECT_NE(m.module, nullptr) << m.error;
    return m.module ? runTmaMaps(m, {map}, tile, error) : -1;
  };
  // Tile word 0 (element 0 of the box, unswizzled at line 0) is rewritten
  // after the issue, before the wait.
  ASSERT_EQ(run("  mov.u32 %r30, 0x00070007;\n"
                "  st.shared.b32 [%r2], %r30;\n"
                "  cp.async.bulk.wait_group.read 0;\n"),
            PTXEMU_OK);
  EXPECT_EQ(g[0], 7);
  EXPECT_EQ(g[2], 5); // the word at byte 4 holds 5
  std::string error;
  EXPECT_EQ(run("", &error), PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("TMA store not waited for"), std::string::npos) << error;
  EXPECT_EQ(run("  cp.async.bulk.wait_group.read 1;\n", &error),
            PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("TMA store not waited for"), std::string::npos) << error;
  ASSERT_EQ(run("  cp.async.bulk.commit_group;\n"
                "  cp.async.bulk.wait_group 1;\n"),
            PTXEMU_OK); // the empty group is the newest
  EXPECT_EQ(g[0], 1);
}

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

//===-- wgmma on swizzled tiles that TMA wrote ----------------------------===//

/// A tensor of f16 `rows` x `cols` (row-major) with its values.
struct Tensor {
  int rows, cols;
  std::vector<uint16_t> bits;
  std::vector<float> values;
  Tensor(int rows, int cols, std::mt19937 &rng) : rows(rows), cols(cols) {
    Matrix m(rows, cols, Elem{false}, rng);
    bits = m.bits;
    values = m.values;
  }
  float at(int r, int c) const { return values[r * cols + c]; }
};

/// Kernel `tma` for a warpgroup: thread 0 loads `loads` (on the mbarrier,
/// `bytes` in all), every thread waits, runs `mmas` (fenced, one group),
/// then stores its N / 2 accumulators at tile offset `out` + 4 N/2 tid.
std::string wgmmaTmaKernel(int n, int tileBytes, int bytes,
                           const std::string &loads, const std::string &mmas,
                           int out, const std::string &aLoads = "") {
  std::string stores;
  for (int q = 0; q < n / 8; ++q) {
    std::string v = "{";
    for (int i = 0; i < 4; ++i)
      v += (i ? ", %r" : "%r") + std::to_string(200 + 4 * q + i);
    stores +=
        "  st.shared.v4.b32 [%r31+" + std::to_string(16 * q) + "], " + v + "}";
    stores += ";\n";
  }
  std::string body = loadAndWait(bytes, loads) + aLoads + fencedGroup(mmas) +
                     "  mul.lo.u32 %r30, %r9, " + std::to_string(2 * n) +
                     ";\n  add.u32 %r31, %r30, %r2;\n  add.u32 %r31, %r31, " +
                     std::to_string(out) + ";\n" + stores;
  return tmaKernel(tileBytes, body);
}

/// The wgmma descriptor in %rd<reg> of tile + `start`, LBO, SBO (bytes)
/// and the layout type (1 128-byte, 2 64-byte, 3 32-byte swizzle).
std::string swizzledDescriptor(const char *reg, int start, int lbo, int sbo,
                               int layout) {
  return descriptor(
      reg, SmemOperand{uint64_t(start), uint64_t(lbo), uint64_t(sbo), false},
      uint64_t(layout) << 62);
}

/// D (64 x n, f32 per thread register as wgmma's fragments lay it out) of
/// `steps` k16 products a(m, k) b(k, n), each summed exactly in double
/// and rounded to f32 onto D as one wgmma does.
template <typename A, typename B>
std::vector<float> chainReference(int n, int steps, A a, B b) {
  int regs = n / 2;
  std::vector<float> d(128 * regs, 0.0f);
  for (int tid = 0; tid < 128; ++tid)
    for (int i = 0; i < regs; ++i) {
      int lane = tid % 32, j = i % 4;
      int row = 16 * (tid / 32) + lane / 4 + 8 * (j / 2);
      int col = 8 * (i / 4) + 2 * (lane % 4) + j % 2;
      float acc = 0;
      for (int s = 0; s < steps; ++s) {
        double sum = acc;
        for (int k = 16 * s; k < 16 * s + 16; ++k)
          sum += double(a(row, k)) * double(b(k, col));
        acc = float(sum);
      }
      d[tid * regs + i] = acc;
    }
  return d;
}

const int kSwizzles[][2] = {{128, 1}, {64, 2}, {32, 3}}; // bytes, layout

/// S = Q K^T as tfc's attention computes it: Q (64 x 64) and K (n keys x
/// 64 head dims) loaded by TMA with a W-byte swizzle in boxes of W / 2
/// columns (one box for 128 bytes), both read K-major from shared memory
/// (SS), SBO 8 rows of W bytes, the start advanced by 32 bytes per k16
/// step within a box. N = 64 and 128; W = 128, 64, 32.
TEST(PtxEmu, WgmmaSwizzledKMajorFromTma) {
  for (const auto &swizzle : kSwizzles)
    for (int n : {64, 128}) {
      int w = swizzle[0], layout = swizzle[1];
      SCOPED_TRACE("swizzle " + std::to_string(w) + ", N " + std::to_string(n));
      std::mt19937 rng(100 + w + n);
      Tensor q(64, 64, rng), k(n, 64, rng);
      int cols = w / 2, boxes = 64 / cols;
      // Q's boxes first, then K's: box b of a tensor of r rows holds its
      // columns [b W/2, (b+1) W/2), r rows of W bytes.
      int qBytes = 64 * w, kBytes = n * w;
      TensorMap qMap = tensorMap(q.bits.data(), 2, {64, 64}, {128},
                                 {uint16_t(cols), 64}, 4 - layout);
      TensorMap kMap = tensorMap(k.bits.data(), 2, {64, uint64_t(n)}, {128},
                                 {uint16_t(cols), uint16_t(n)}, 4 - layout);
      std::string loads;
      for (int b = 0; b < boxes; ++b)
        loads += tmaLoad(b * qBytes, {b * cols, 0}) +
                 tmaLoad(boxes * qBytes + b * kBytes, {b * cols, 0}, "%rd7");
      loads = "  add.s64 %rd7, %rd1, 128;\n" + loads;
      int kBase = boxes * qBytes, out = kBase + boxes * kBytes;
      auto mmas = [&](int descLayout) {
        std::string s = "  mov.pred %p2, 0;\n";
        for (int step = 0; step < 4; ++step) {
          int box = step * 16 / cols, within = step * 16 % cols * 2;
          s += swizzledDescriptor("%rd20", box * qBytes + within, 16, 8 * w,
                                  descLayout) +
               swizzledDescriptor("%rd21", kBase + box * kBytes + within, 16,
                                  8 * w, descLayout) +
               mmaAsync(n, "f16", "%rd20, %rd21, %p2, 1, 1, 0, 0") +
               "  mov.pred %p2, 1;\n";
        }
        return s;
      };
      int tileBytes = out + 128 * 2 * n;
      std::vector<TensorMap> maps = {qMap, kMap};
      auto run = [&](int descLayout, std::vector<float> &d) {
        std::vector<uint8_t> tile(tileBytes, 0);
        std::string error;
        Module m(wgmmaTmaKernel(n, tileBytes, (qBytes + kBytes) * boxes, loads,
                                mmas(descLayout), out));
        int rc = runTmaMaps(m, maps, tile, &error);
        EXPECT_EQ(rc, PTXEMU_OK) << error;
        d.resize(128 * n / 2);
        std::memcpy(d.data(), &tile[out], d.size() * 4);
      };
      std::vector<float> d;
      run(layout, d);
      std::vector<float> want = chainReference(
          n, 4, [&](int m, int kk) { return q.at(m, kk); },
          [&](int kk, int j) { return k.at(j, kk); });
      EXPECT_EQ(d, want);
      // Read without the swizzle, the same tiles give other products.
      run(0, d);
      EXPECT_NE(d, want);
    }
}

/// O = P V as tfc's attention computes it: P (64 x 64 keys) from registers
/// (RS), V (64 keys x n head dims) loaded by TMA with a W-byte swizzle in
/// boxes of W / 2 columns, read MN-major (transposed): LBO the bytes
/// between the boxes (64 W), SBO 8 keys (8 W), the start advanced by 16
/// keys (16 W bytes, 2048 for W = 128) per k16 step. N = 64 and 128; W =
/// 128, 64, 32.
TEST(PtxEmu, WgmmaSwizzledMnMajorFromTma) {
  for (const auto &swizzle : kSwizzles)
    for (int n : {64, 128}) {
      int w = swizzle[0], layout = swizzle[1];
      SCOPED_TRACE("swizzle " + std::to_string(w) + ", N " + std::to_string(n));
      std::mt19937 rng(200 + w + n);
      std::vector<Matrix> p;
      for (int step = 0; step < 4; ++step)
        p.emplace_back(64, 16, Elem{false}, rng);
      Tensor v(64, n, rng);
      int cols = w / 2, boxes = n / cols, boxBytes = 64 * w;
      TensorMap vMap =
          tensorMap(v.bits.data(), 2, {uint64_t(n), 64}, {uint64_t(2 * n)},
                    {uint16_t(cols), 64}, 4 - layout);
      std::string loads;
      for (int b = 0; b < boxes; ++b)
        loads += tmaLoad(b * boxBytes, {b * cols, 0});
      // Thread t's A registers of step s: %r(100 + 4s).. from the extra
      // input, 16 words per thread.
      std::vector<uint32_t> frags(128 * 16);
      for (int step = 0; step < 4; ++step) {
        std::vector<uint32_t> f = aFragments(p[step]);
        for (int t = 0; t < 128; ++t)
          for (int r = 0; r < 4; ++r)
            frags[t * 16 + 4 * step + r] = f[t * 4 + r];
      }
      std::string aLoads =
          "  mul.wide.u32 %rd9, %r9, 64;\n  add.s64 %rd10, %rd8, %rd9;\n";
      for (int q = 0; q < 4; ++q)
        aLoads += "  ld.global.v4.b32 {%r" + std::to_string(100 + 4 * q) +
                  ", %r" + std::to_string(101 + 4 * q) + ", %r" +
                  std::to_string(102 + 4 * q) + ", %r" +
                  std::to_string(103 + 4 * q) + "}, [%rd10+" +
                  std::to_string(16 * q) + "];\n";
      auto mmas = [&](int descLayout) {
        std::string s = "  mov.pred %p2, 0;\n";
        for (int step = 0; step < 4; ++step) {
          std::string a = "{%r" + std::to_string(100 + 4 * step) + ", %r" +
                          std::to_string(101 + 4 * step) + ", %r" +
                          std::to_string(102 + 4 * step) + ", %r" +
                          std::to_string(103 + 4 * step) + "}";
          s += swizzledDescriptor("%rd21", step * 16 * w, boxBytes, 8 * w,
                                  descLayout) +
               mmaAsync(n, "f16", a + ", %rd21, %p2, 1, 1, 1") +
               "  mov.pred %p2, 1;\n";
        }
        return s;
      };
      int out = boxes * boxBytes, tileBytes = out + 128 * 2 * n;
      auto run = [&](int descLayout, std::vector<float> &d) {
        std::vector<uint8_t> tile(tileBytes, 0);
        std::string error;
        Module m(wgmmaTmaKernel(n, tileBytes, boxes * boxBytes, loads,
                                mmas(descLayout), out, aLoads));
        EXPECT_EQ(runTmaMaps(m, {vMap}, tile, &error, 128, frags), PTXEMU_OK)
            << error;
        d.resize(128 * n / 2);
        std::memcpy(d.data(), &tile[out], d.size() * 4);
      };
      std::vector<float> d;
      run(layout, d);
      std::vector<float> want = chainReference(
          n, 4, [&](int m, int k) { return p[k / 16].at(m, k % 16); },
          [&](int k, int j) { return v.at(k, j); });
      EXPECT_EQ(d, want);
      run(0, d);
      EXPECT_NE(d, want);
    }
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

//===-- Named barriers ----------------------------------------------------===//

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
