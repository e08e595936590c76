//===- matmul.h - Shared pieces of the CPU matmul kernels -------*- C++ -*-===//
//
// C[b] (+)= A[b] . B[b]. B is packed into two-vector panels (32 columns with
// AVX-512, 16 with AVX2; zero-padded); a KC-deep slice of a panel stays in
// L1 while the blocks of A rows stream through the shared register-blocked
// kernel (kMR rows x one panel of C in registers). The threads split the
// rows; each packs the A of its rows so that a block of kMR rows is one
// sequential stream (ARows::Packed). Products of few rows split the panels
// instead and read A in place. The packing buffers live across calls:
// after the first run, a model allocates nothing here. A weight may be
// quantized as it is packed (TFC_UK_QUANTIZE_I8, _I4): int8 panels with a
// scale per column or int4 panels with a scale per column and 128 rows, a
// quarter or an eighth of f32's bytes to stream. Its activations may be
// quantized too (TFC_UK_QUANTIZE_A8): then the products are integer dot
// products of int8 rows with the weight packed for them (intdot.h). A bf16
// B times an A of bf16 values (TFC_UK_A_BF16) runs on bf16 dot products
// where AVX-512 BF16 is (vdpbf16ps: twice the FMA's products per
// instruction), B packed in pairs of rows for them.
//
// The files: packing.cpp packs B (quantize.cpp quantizes B's groups and
// A's blocks), packed_weights.cpp keeps a weight's packed copy, gemm.cpp
// runs the f32 kernel on the panels (16-bit and quantized ones widened as
// it loads them), intdot.cpp the products with A quantized too,
// bf16dot.cpp the bf16 dot products, amx.cpp both of those on AMX tiles,
// and entry.cpp the entry points of ukernels.h and the scalar reference.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UKERNELS_MATMUL_MATMUL_H
#define TFC_UKERNELS_MATMUL_MATMUL_H

#include "amx.h"
#include "intdot.h"
#include "microkernel.h"
#include "ukernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace tfc::uk::matmul {

/// The element type of B (its packed panels keep it).
using BType = tfc::uk::BPanel;

/// Element i of the E elements at `base`, which may lie at any address: B
/// is read through these loads only, as a weight bound in place may lie at
/// any offset of its file (abi.h, tfc_model_weight_alignment). Copied from
/// a byte pointer, so the compiler assumes no alignment.
template <typename E> inline E loadUnaligned(const void *base, int64_t i) {
  E value;
  std::memcpy(&value, static_cast<const char *>(base) + i * int64_t(sizeof(E)),
              sizeof(E));
  return value;
}

/// Element i of a B of type T, as f32 (exact).
template <BType T> inline float loadB(const void *b, int64_t i) {
  if constexpr (T == BType::F32) {
    return loadUnaligned<float>(b, i);
  } else {
    uint16_t bits = loadUnaligned<uint16_t>(b, i);
    if constexpr (T == BType::F16) {
      _Float16 h;
      std::memcpy(&h, &bits, 2);
      return float(h);
    } else {
      return bf16Value(bits);
    }
  }
}

/// Calls f(std::integral_constant<BType, T>()) for the run-time type t (of
/// B, or of its packed panels: I8 is only ever the latter).
template <typename F> inline void withBType(BType t, F &&f) {
  switch (t) {
  case BType::F32:
    return f(std::integral_constant<BType, BType::F32>());
  case BType::F16:
    return f(std::integral_constant<BType, BType::F16>());
  case BType::BF16:
    return f(std::integral_constant<BType, BType::BF16>());
  case BType::I8:
    return f(std::integral_constant<BType, BType::I8>());
  case BType::I4:
    return f(std::integral_constant<BType, BType::I4>());
  case BType::BF16Dot:
    // Not a type of B: its bf16 dot products (bf16Dot) have panels of
    // their own (Bf16Panels).
    break;
  }
}

/// n rounded up to a multiple of `step`.
[[maybe_unused]] constexpr int64_t roundUp(int64_t n, int64_t step) {
  return (n + step - 1) / step * step;
}

/// How a constant B is quantized as it is packed (ukernels.h): symmetric,
/// in groups of `group` rows of a column (all K for int8), each group's
/// scale max|b| / qmax, each value round(b / scale) (to nearest, ties to
/// even) in [-qmax, qmax]; a group of zeros has scale 0 and values 0.
enum class Quant { None, I8, I4 };
constexpr int64_t kI4Group = 128;
/// Values of A per quantization block (TFC_UK_QUANTIZE_A8): an int4 B's
/// groups are its blocks.
constexpr int64_t kABlock = 128;
constexpr float kAMax = 127.0f;
static_assert(kABlock == intdot::kBlock && kABlock == kI4Group);
static_assert(kABlock == TFC_UK_QUANTIZE_BLOCK);

struct Matmul {
  bool accumulate; // C += A . B, else C = A . B
  bool constantB;  // B holds the same values on every call (a weight)
  Quant quant;     // of a constant B
  bool quantizeA;  // with quant: A quantized too (TFC_UK_QUANTIZE_A8)
  bool aBf16;      // A holds bf16 values (TFC_UK_A_BF16)
  BType btype;     // F32, F16 or BF16
  int64_t batch, m, n, k;
  const float *a; // null when A is stored as bf16 (aBits)
  const void *b;  // btype elements
  float *c;
  int64_t as[3], bs[3], cs[3]; // strides in elements, batch first
  /// A's bf16 bits, where A is stored as bf16 (the _bf16_bf16 entries; then
  /// aBf16 holds): the bf16 dot products read them as they are, every
  /// other path widens them first (withF32A).
  const uint16_t *aBits = nullptr;

  /// Batch element bt of B, as an element offset from b.
  int64_t bOffset(int64_t bt) const { return bt * bs[0]; }
  /// Element (l, j) of batch element bt of B, as f32.
  template <BType T> float bAt(int64_t bt, int64_t l, int64_t j) const {
    return loadB<T>(b, bOffset(bt) + l * bs[1] + j * bs[2]);
  }
  /// The type of B's packed panels.
  BType panelType() const {
    return quant == Quant::I8   ? BType::I8
           : quant == Quant::I4 ? BType::I4
                                : btype;
  }
  /// Rows of B per quantization group, and the groups of a column.
  int64_t group() const { return quant == Quant::I4 ? kI4Group : k; }
  int64_t groups() const { return (k + group() - 1) / group(); }
  float qmax() const { return quant == Quant::I4 ? 7.0f : 127.0f; }
};

/// b quantized with `scale`.
inline int quantized(float b, float scale, float qmax) {
  if (scale == 0)
    return 0;
  return int(std::clamp(std::nearbyint(b / scale), -qmax, qmax));
}

/// The product on the scalar reference loops (entry.cpp).
void matmulReference(const Matmul &p);

#ifdef TFC_UK_VECTOR

constexpr int64_t kNR = 2 * kLanes; // columns of a panel
constexpr int64_t kKC = 256;        // depth of a packed slice
constexpr int64_t kMC = 96;         // at most this many rows of A per task
constexpr size_t kL2Bytes = size_t(1) << 20; // L2 of one core

/// The packed panels of a B of type T: f32, the 16-bit values' bits (the
/// kernel widens them as it loads them), int8, or pairs of int4 in a byte.
template <BType T>
using PanelElement = std::conditional_t<
    T == BType::F32, float,
    std::conditional_t<T == BType::I8 || T == BType::I4, int8_t, uint16_t>>;

/// Elements per row of a packed panel of B of type T.
template <BType T> constexpr int64_t kPanelRow = T == BType::I4 ? kNR / 2 : kNR;

/// Bytes per row of a packed panel of B.
inline size_t panelRowBytes(BType t) {
  return t == BType::F32  ? 4 * kNR
         : t == BType::I8 ? kNR
         : t == BType::I4 ? kNR / 2
                          : 2 * kNR;
}

/// Bytes of B's packed panels: the elements, and a quantized B's scales
/// after all of them.
inline size_t packedBytes(const Matmul &p, int64_t panels) {
  size_t bytes = size_t(panels * p.k) * panelRowBytes(p.panelType());
  if (p.quant != Quant::None)
    bytes += size_t(panels * p.groups() * kNR) * sizeof(float);
  return bytes;
}

/// The scales of a quantized B's panels packed at `packed`: those of group
/// g of panel pn's columns at [(pn * groups + g) * kNR].
template <typename Byte>
auto *panelScales(const Matmul &p, int64_t panels, Byte *packed) {
  using F = std::conditional_t<std::is_const_v<Byte>, const float, float>;
  return reinterpret_cast<F *>(packed + size_t(panels * p.k) *
                                            panelRowBytes(p.panelType()));
}

/// The n values x[l * step] quantized symmetrically with `qmax` (as
/// groupScale and quantized define it: scale max|x| / qmax, each value
/// round(x / scale), to nearest with ties to even, in [-qmax, qmax]) into q,
/// each byte XORed with `flip` (0x80 stores a + 128 as unsigned); their
/// scale and the sum of the values (quantize.cpp).
void quantizeSymmetric(const void *x, int64_t step, int64_t n, float qmax,
                       int8_t *q, float &scale, int32_t &sum, uint8_t flip);

/// The layout of B packed for integer dot products (intdot.h): panels of
/// intdot::kCols columns, each K rounded up to whole blocks of kABlock rows
/// (padding rows 0), then the scales of every panel's groups, then in
/// intdot's VNNI form for an int8 weight the sums of each block's values of
/// each column (which take A's bias off).
struct DotPanels {
  int64_t panels, blocks;
  bool i4;
  bool sums; // the column sums are packed
  explicit DotPanels(const Matmul &p)
      : panels((p.n + intdot::kCols - 1) / intdot::kCols),
        blocks((p.k + kABlock - 1) / kABlock), i4(p.quant == Quant::I4),
        sums(intdot::kVnni && !i4) {}
  int64_t quadsPerBlock() const { return kABlock / 4; }
  size_t panelBytes() const {
    return size_t(blocks * quadsPerBlock() * intdot::quadBytes(i4));
  }
  size_t bytes(const Matmul &p) const {
    return size_t(panels) * panelBytes() +
           size_t(panels * p.groups() * intdot::kCols) * sizeof(float) +
           size_t(sums ? panels * blocks * intdot::kCols : 0) * sizeof(int32_t);
  }
  /// The scales, after the panels: those of group g of panel pn's columns
  /// at [(pn * groups + g) * kCols].
  template <typename Byte> auto *scales(const Matmul &p, Byte *packed) const {
    using F = std::conditional_t<std::is_const_v<Byte>, const float, float>;
    return reinterpret_cast<F *>(packed + size_t(panels) * panelBytes());
  }
  /// An int8 weight's column sums, after the scales: those of block g of
  /// panel pn at [(pn * blocks + g) * kCols].
  template <typename Byte>
  auto *columnSums(const Matmul &p, Byte *packed) const {
    using I = std::conditional_t<std::is_const_v<Byte>, const int32_t, int32_t>;
    return reinterpret_cast<I *>(scales(p, packed) +
                                 panels * p.groups() * intdot::kCols);
  }
};

#ifdef TFC_UK_BF16DOT
constexpr bool kBf16Dot = true;
#else
constexpr bool kBf16Dot = false;
#endif

/// Whether the product runs on bf16 dot products.
inline bool bf16Dot(const Matmul &p) {
  return kBf16Dot && p.aBf16 && p.btype == BType::BF16 &&
         p.quant == Quant::None;
}

/// The layout of B packed for bf16 dot products: panels of kDotCols
/// columns, K in pairs of rows (an odd K's last pair padded with 0, and
/// for the AMX kernel whole tiles of pairs: pairStep); pair kp
/// of panel pn is the 32-bit words [(pn * pairs + kp) * kDotCols, + kDotCols),
/// column j's holding rows 2kp (low half) and 2kp + 1 (high half).
struct Bf16Panels {
  static constexpr int64_t kDotCols = 16;
  int64_t panels, pairs;
  explicit Bf16Panels(const Matmul &p)
      : panels((p.n + kDotCols - 1) / kDotCols),
        pairs(roundUp((p.k + 1) / 2, pairStep())) {}
  /// Pairs a panel holds a multiple of (zero rows past K): an AMX tile's 16
  /// where the AMX kernel runs.
  static int64_t pairStep() {
#ifdef TFC_UK_AMX
    return amx::enabled() ? amx::kRows : 1;
#else
    return 1;
#endif
  }
  size_t bytes() const { return size_t(panels * pairs * kDotCols) * 4; }
};

// The packing of B (packing.cpp) for each layout.

/// Packs B of batch element bt into kNR-column panels, each holding all of
/// K with row stride kNR (columns past N are zero, which is +0 in every
/// type): a block of C reads its panel from start to end.
void packB(const Matmul &p, int64_t bt, int64_t panels, void *packed,
           bool parallel);
/// Packs B of batch element bt quantized into panels laid out as packB's:
/// int8 values, or int4 ones (two's complement nibbles) with column j of a
/// panel row in the low nibble of byte j and column j + kLanes in the high
/// one.
void packBQuantized(const Matmul &p, int64_t bt, int64_t panels, void *packed);
/// Packs B of batch element bt quantized as DotPanels lays it out: int8, or
/// int4 biased by intdot::kBias.
void packBDot(const Matmul &p, int64_t bt, void *packed);
/// Packs the bf16 B of batch element bt as Bf16Panels lays it out.
void packBBf16(const Matmul &p, int64_t bt, void *packed, bool parallel);

/// The packed copy of a constant B's batch element bt (of `panels`
/// kNR-column panels where packB lays it out), made on first use and kept
/// for the life of the process (packed_weights.cpp).
const void *packedWeight(const Matmul &p, int64_t bt, int64_t panels);

/// The threads' tasks over `m` rows: `count` of them (a multiple of the
/// threads), each a range of whole kernel blocks of `rows` rows (the last
/// one may end short) and at most about kMC rows. Under a static schedule
/// each thread takes consecutive tasks, and the threads' shares differ by
/// one kernel block at most (blocks of kMC rows rounded to the kernel's had
/// split 1024 rows 540 / 484 over two threads, 128 rows 66 / 62).
struct RowTasks {
  int64_t m, rows, blocks, count;
  RowTasks(int64_t m, int64_t threads, int64_t rows)
      : m(m), rows(rows), blocks((m + rows - 1) / rows) {
    int64_t perThread = (blocks + threads - 1) / threads;
    int64_t perTask = std::max<int64_t>(1, kMC / rows);
    count = threads * ((perThread + perTask - 1) / perTask);
  }
  /// The first row of task `j` (the end of task j - 1); j = count gives m.
  int64_t begin(int64_t j) const {
    return std::min(m, j * blocks / count * rows);
  }
};

/// The rows of A of batch element bt quantized in blocks (TFC_UK_QUANTIZE_A8):
/// row i's int8 values at values[i * stride] (64-byte aligned), each block
/// of kABlock values (the last one padded with zeros), its blocks' scales
/// at scales[i * blocks] and the sums of their values at sums[i * blocks].
/// `biased`: the values are stored as the unsigned bytes a + intdot::kABias
/// (the sums are not).
struct QuantizedRows {
  std::vector<float> storage; // 64-byte aligned through alignedFloats
  int8_t *values = nullptr;
  std::vector<float> scales;
  std::vector<int32_t> sums;
  int64_t blocks = 0, stride = 0;

  /// `rowStep`: the rows are padded with zero rows to a multiple of it (an
  /// AMX tile's loads read whole tiles of rows).
  void quantize(const Matmul &p, int64_t bt, bool parallel, bool biased,
                int64_t rowStep = 1);

  /// The n values a[l * step] quantized into q (biased: as a + kABias);
  /// their scale and sum.
  static void block(const float *a, int64_t step, int64_t n, int8_t *q,
                    float &scale, int32_t &sum, bool biased) {
    // Adding 128 to an int8 is flipping its top bit.
    static_assert(intdot::kABias == 0x80);
    quantizeSymmetric(a, step, n, kAMax, q, scale, sum, biased ? 0x80 : 0);
  }
};

/// Batch element `bt` of a product with A quantized too
/// (TFC_UK_QUANTIZE_A8; intdot.cpp), on the threads if `parallel`.
void matmulIntDot(const Matmul &p, int64_t bt, bool parallel);

#ifdef TFC_UK_BF16DOT
/// Batch element `bt` of a product on bf16 dot products (bf16Dot;
/// bf16dot.cpp), on the threads if `parallel`.
void matmulBf16Dot(const Matmul &p, int64_t bt, bool parallel);
#endif

#ifdef TFC_UK_AMX
/// Products of fewer rows than these stay on the AVX-512 kernels: a tile
/// computes 16 rows whatever the rows are, and a decode step's few rows are
/// bound by reading B. Measured on two threads, 768 x 2048 weights (ms,
/// AMX against AVX-512): int8 one row 0.032-0.037 against 0.024-0.025,
/// three rows level (0.035), four 0.042 against 0.044, eight 0.045
/// against 0.068; bf16 one row level (0.06), two 0.064 against 0.08, three
/// 0.06-0.08 against 0.09-0.11, eight 0.068 against 0.24. An int4 weight
/// is unpacked for the tiles on every product: four rows 0.065-0.071
/// against 0.045-0.049, eight 0.077-0.083 against 0.068-0.07, twelve
/// 0.085-0.089 against 0.107-0.124.
constexpr int64_t kAmxMinRowsInt8 = 4, kAmxMinRowsInt4 = 12,
                  kAmxMinRowsBf16 = 2;

/// matmulBf16Dot on AMX (amx.cpp): A's bf16 pairs (rows aStride words
/// apart, padded to whole tiles, pairs to Bf16Panels' pairs, with zeros) by
/// the panels, all of K summed in the tiles.
void matmulBf16Amx(const Matmul &p, const Bf16Panels &d, const uint32_t *aPairs,
                   int64_t aStride, const uint32_t *packed, float *cb,
                   bool parallel);

/// matmulIntDot on AMX (amx.cpp), for an int4 weight (I4) or an int8 one.
template <bool I4>
void matmulIntDotAmx(const Matmul &p, const DotPanels &d,
                     const QuantizedRows &qa, const uint8_t *packed,
                     const float *scales, float *cb, bool parallel);
#endif

/// The product on the packed kernels (gemm.cpp).
void matmulPacked(const Matmul &p);

#endif // TFC_UK_VECTOR

} // namespace tfc::uk::matmul

#endif // TFC_UKERNELS_MATMUL_MATMUL_H
