//===- PtxEmuTest.cpp - The PTX interpreter of the fake CUDA driver -------===//
//
// The interpreter (runtime/tests/fixtures/ptx_emu.h) checks tfc's GPU
// kernels without a GPU, so its warp-wide instructions are checked here
// against the fragment layouts of the PTX ISA, written out independently:
// mma.sync m16n8k16 (section "Matrix Fragments for mma.m16n8k16"), ldmatrix
// and shfl.sync; wgmma (sm_90a) against the accumulator and A fragments
// of the ISA ("Register Fragments and Shared Memory Matrix Layouts" of
// wgmma) and the shared-memory layouts without swizzle as CUTLASS's
// canonical GMMA layouts write them (cute/atom/mma_traits_sm90_gmma.hpp).
// Then what it reports: illegal addresses, warps that diverge at a
// warp-wide instruction, PTX it does not implement, and reads of a cp.async
// destination before the wait or of a wgmma accumulator before its
// wait_group.
//
//===----------------------------------------------------------------------===//

#include "ptx_emu.h"

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

/// What a launch reports: a swizzled descriptor, a wgmma never waited for,
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
  EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), body(bOp, 1ull << 62, wait0)),
                     aFragments(a), img, c, d, nullptr, &error),
            PTXEMU_LAUNCH_FAILED);
  EXPECT_NE(error.find("wgmma.mma_async"), std::string::npos) << error;
  EXPECT_NE(error.find("the B descriptor"), std::string::npos) << error;
  EXPECT_NE(error.find("128-byte swizzle (bits 62-63 = 1): only no swizzle"),
            std::string::npos)
      << error;
  EXPECT_EQ(runWgmma(wgmmaKernel(8, img.chunks(), body(bOp, 1ull << 49, wait0)),
                     aFragments(a), img, c, d, nullptr, &error),
            PTXEMU_LAUNCH_FAILED);
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

TEST(PtxEmu, WgmmaRejectsFormsItDoesNotImplement) {
  auto load = [](const std::string &inst) {
    Module m(R"(
.visible .entry k(.param .u64 p)
{
  .reg .pred %p<2>;
  .reg .b32 %r<300>;
  .reg .b64 %rd<4>;
  )" + inst + R"(
  ret;
}
)");
    return m.module ? std::string("loaded") : m.error;
  };
  std::string d8 = dRegs(8), a = ", {%r10, %r11, %r12, %r13}, %rd1, %p1, ";
  EXPECT_EQ(load("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 " + d8 + a +
                 "1, 1, 0;"),
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
               ", {%r10, %r11, %r12, %r13}, %rd1, 1, 1, 1, 0;",
           std::string("wgmma.wait_group.sync.aligned %r1;"),
           std::string("fence.sc.gpu;"),
       }) {
    std::string error = load(bad);
    EXPECT_NE(error, "loaded") << bad;
    EXPECT_NE(error.find("line 10:"), std::string::npos) << error;
  }
}

} // namespace
