//===- PtxEmuTmaTest.cpp - TMA in the PTX interpreter ---------------------===//
//
// TMA loads and stores (cp.async.bulk.tensor) in the PTX interpreter
// against the box, out-of-bound fill or clipping and swizzle of the ISA and
// cuTensorMapEncodeTiled, written out byte by byte; and wgmma reading the
// swizzled tiles TMA wrote, in the configurations of tfc's attention.
//
//===----------------------------------------------------------------------===//

#include "PtxEmuTestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace tfc::testing::ptxemu;

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

} // namespace
