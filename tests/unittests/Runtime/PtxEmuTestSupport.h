//===- PtxEmuTestSupport.h - What the PtxEmu tests share --------*- C++ -*-===//
//
// A module of PTX text loaded into the interpreter and launched on one
// block, the operands of wgmma (16-bit matrices, shared-memory layouts,
// descriptors) and TMA (tensor maps and the kernels that load through
// them on an mbarrier), for the PtxEmu*Test.cpp files.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UNITTESTS_RUNTIME_PTXEMUTESTSUPPORT_H
#define TFC_UNITTESTS_RUNTIME_PTXEMUTESTSUPPORT_H

#include "ptxi/fake_tensor_map.h"
#include "ptxi/ptxemu.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace tfc::testing::ptxemu {

/// A module of `body` after the PTX header; null with `error` when it does
/// not load.
struct Module {
  ptxemu_module *module = nullptr;
  std::string error;
  explicit Module(const std::string &body);
  ~Module();
};

/// Launches `name` on one block of `threads` with pointer arguments that
/// are also the only device memory.
int launch(Module &m, const char *name, unsigned threads,
           std::vector<std::pair<void *, size_t>> buffers,
           std::string *error = nullptr);

/// launch() with PTXEMU_STATS set; `stats` gets what it printed.
int launchWithStats(Module &m, const char *name, unsigned threads,
                    std::vector<std::pair<void *, size_t>> buffers,
                    std::string *error, std::string *stats);

/// The f16 nearest to `x`, as bits.
uint16_t half(float x);

/// A word of `lo` in its low half and `hi` in its high half.
uint32_t pack(uint16_t lo, uint16_t hi);

/// "loaded" when a kernel of the one instruction `inst` loads, else the
/// interpreter's error.
std::string loadsOrError(const std::string &inst);

//===-- wgmma operands ----------------------------------------------------===//

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

/// Each thread's A registers for A (64 x 16): warp w's rows 16w.. as
/// mma.sync m16n8k16's A fragment (a0: row g, k 2t and 2t+1; a1: row g+8;
/// a2: k + 8; a3: both), lower k in the lower half.
std::vector<uint32_t> aFragments(const Matrix &a);

/// The accumulator list {%r200, ...} of m64nNk16.
std::string dRegs(int n);

/// One mma_async m64nNk16 of element type `t` into f32 on the accumulators
/// dRegs(n), `operands` after them (A, B, scale-d and the immediates).
std::string mmaAsync(int n, const std::string &t, const std::string &operands);

const char *const kFence = "  wgmma.fence.sync.aligned;\n";
const char *const kCommit = "  wgmma.commit_group.sync.aligned;\n";
const char *const kWait0 = "  wgmma.wait_group.sync.aligned 0;\n";

/// `mmas` fenced, committed as one group and waited for.
std::string fencedGroup(const std::string &mmas);

/// Builds descriptor `reg` (a b64 register) of the operand at byte
/// `offset` of the tile: address >> 4 in bits 0-13, LBO >> 4 in 16-29,
/// SBO >> 4 in 32-45, `high` (base offset, swizzle) or'ed in.
std::string descriptor(const char *reg, const SmemOperand &op,
                       uint64_t high = 0);

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
                    std::vector<uint16_t> box, int swizzle, int oobFill = 0);

/// The exact inline asm tfc emits to wait on the mbarrier at %r1 for the
/// phase of parity %r13, in its loop.
std::string waitLoop(const std::string &label, const std::string &bar = "%r1",
                     const std::string &parity = "%r13");

/// A TMA load of the map at %rd<mapReg> into tile + `offset`, on the
/// mbarrier at %r1, at `coords` (moved into %r40..).
std::string tmaLoad(int offset, const std::vector<int> &coords,
                    const std::string &map = "%rd1",
                    const std::string &bar = "%r1");

/// Kernel `tma` for `threads` threads: %rd1 the tensor maps (128 bytes
/// each), %rd2 the output, %rd8 the extra input, %r1 the mbarriers (`bar`,
/// 4 of them), %r2 the 1024-byte aligned `tile` of `tileBytes` bytes, first
/// filled with 0x5a; %r9 the thread, %p1 set in threads other than 0,
/// %r13 = 0. Runs `body`, then thread 0 copies the tile to the output.
std::string tmaKernel(int tileBytes, const std::string &body);

/// Thread 0 initialises the mbarrier at %r1 (count 1); after a barrier
/// (the init must be visible before other threads use it), it arrives
/// expecting `bytes` and issues `loads`; then every thread waits for phase
/// 0.
std::string loadAndWait(int bytes, const std::string &loads);

/// Runs kernel `tma` of `m` on `threads` threads: the tensor maps, the
/// tile's image as output, the extra input; these are the device memory,
/// with the tensors the maps describe (or `tensors` where given).
int runTmaMaps(Module &m, std::vector<TensorMap> maps,
               std::vector<uint8_t> &tile, std::string *error = nullptr,
               unsigned threads = 128, std::vector<uint32_t> extra = {0},
               const std::vector<ptxemu_range> *tensors = nullptr);

/// The same for one map.
int runTma(const std::string &ptx, const TensorMap &map,
           std::vector<uint8_t> &tile, unsigned threads = 1,
           std::string *error = nullptr);

/// Elements numbered from 1 (no 0x5a5a, no NaN pattern among them).
template <typename T> std::vector<T> numbered(size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = T(i + 1);
  return v;
}

} // namespace tfc::testing::ptxemu

#endif // TFC_UNITTESTS_RUNTIME_PTXEMUTESTSUPPORT_H
