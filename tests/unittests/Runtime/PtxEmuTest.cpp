//===- PtxEmuTest.cpp - The PTX interpreter of the fake CUDA driver -------===//
//
// The interpreter (runtime/tests/fixtures/ptx_emu.h) checks tfc's GPU
// kernels without a GPU, so its warp-wide instructions are checked here
// against the fragment layouts of the PTX ISA, written out independently:
// mma.sync m16n8k16 (section "Matrix Fragments for mma.m16n8k16"), ldmatrix
// and shfl.sync. Then what it reports: illegal addresses, warps that
// diverge at a warp-wide instruction, PTX it does not implement, and reads
// of a cp.async destination before the wait.
//
//===----------------------------------------------------------------------===//

#include "ptx_emu.h"

#include <gtest/gtest.h>

#include <cstring>
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

TEST(PtxEmu, LdmatrixFollowsTheIsaFragments) {
  Module m(R"(
.visible .entry ldm(.param .u64 pin, .param .u64 pout, .param .u64 ptrans)
{
  .shared .align 16 .b8 tile[512];
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
  st.shared.v4.b32 [%rd7], {%r2, %r3, %r4, %r5};
  bar.sync 0;
  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r6, %r7, %r8, %r9}, [%rd7];
  ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r10, %r11, %r12, %r13}, [%rd7];
  add.s64 %rd8, %rd2, %rd4;
  st.global.v4.b32 [%rd8], {%r6, %r7, %r8, %r9};
  add.s64 %rd9, %rd3, %rd4;
  st.global.v4.b32 [%rd9], {%r10, %r11, %r12, %r13};
  ret;
}
)");
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
