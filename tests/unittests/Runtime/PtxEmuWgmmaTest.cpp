//===- PtxEmuWgmmaTest.cpp - wgmma in the PTX interpreter -----------------===//
//
// wgmma (sm_90a) in the PTX interpreter against the accumulator and A
// fragments of the ISA ("Register Fragments and Shared Memory Matrix
// Layouts" of wgmma) and the shared-memory layouts without swizzle as
// CUTLASS's canonical GMMA layouts write them
// (cute/atom/mma_traits_sm90_gmma.hpp), written out independently; reads of
// a wgmma accumulator before its wait_group, what a launch reports, and the
// forms that load.
//
//===----------------------------------------------------------------------===//

#include "PtxEmuTestSupport.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace tfc::testing::ptxemu;

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

} // namespace
