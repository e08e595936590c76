//===- matmul.cpp - Packed f32 matmul for the CPU -------------------------===//
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
//===----------------------------------------------------------------------===//

#include "amx.h"
#include "intdot.h"
#include "microkernel.h"
#include "ukernels.h"

#include "tfc/runtime/abi.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

using tfc::uk::MemRef;
namespace intdot = tfc::uk::intdot;

namespace {

/// The element type of B (its packed panels keep it).
using BType = tfc::uk::BPanel;

/// Element i of a B of type T, as f32 (exact).
template <BType T> inline float loadB(const void *b, int64_t i) {
  if constexpr (T == BType::F32) {
    return static_cast<const float *>(b)[i];
  } else {
    uint16_t bits = static_cast<const uint16_t *>(b)[i];
    if constexpr (T == BType::F16) {
      _Float16 h;
      std::memcpy(&h, &bits, 2);
      return float(h);
    } else {
      return tfc::uk::bf16Value(bits);
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
static_assert(kABlock == tfc::uk::intdot::kBlock && kABlock == kI4Group);

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

/// The scale of group g of column j of batch element bt of B.
template <BType T>
float groupScale(const Matmul &p, int64_t bt, int64_t j, int64_t g) {
  float top = 0;
  for (int64_t l = g * p.group(); l < std::min(p.k, (g + 1) * p.group()); ++l)
    top = std::max(top, std::fabs(p.bAt<T>(bt, l, j)));
  return top / p.qmax();
}
/// b quantized with `scale`.
inline int quantized(float b, float scale, float qmax) {
  if (scale == 0)
    return 0;
  return int(std::clamp(std::nearbyint(b / scale), -qmax, qmax));
}

void matmulReference(const Matmul &p) {
  withBType(p.btype, [&](auto type) {
    constexpr BType T = decltype(type)::value;
    if constexpr (T != BType::I8 && T != BType::I4) {
      bool quantize = p.quant != Quant::None;
      // The rows of K summed before scaling: a group of B's or a block of
      // A's (which lies in one group of B's).
      int64_t step = p.quantizeA ? kABlock : quantize ? p.group() : p.k;
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t bt = 0; bt < p.batch; ++bt)
        for (int64_t j = 0; j < p.n; ++j)
          for (int64_t i = 0; i < p.m; ++i) {
            auto aAt = [&](int64_t l) {
              return p.a[bt * p.as[0] + i * p.as[1] + l * p.as[2]];
            };
            float sum = 0;
            for (int64_t l0 = 0; l0 < p.k; l0 += step) {
              int64_t l1 = std::min(p.k, l0 + step);
              float scale =
                  quantize ? groupScale<T>(p, bt, j, l0 / p.group()) : 1.0f;
              if (p.quantizeA) {
                float top = 0;
                for (int64_t l = l0; l < l1; ++l)
                  top = std::max(top, std::fabs(aAt(l)));
                float aScale = top / kAMax;
                int32_t dot = 0;
                for (int64_t l = l0; l < l1; ++l)
                  dot += quantized(aAt(l), aScale, kAMax) *
                         quantized(p.bAt<T>(bt, l, j), scale, p.qmax());
                sum += float(dot) * (aScale * scale);
                continue;
              }
              float acc = 0;
              for (int64_t l = l0; l < l1; ++l) {
                float b = p.bAt<T>(bt, l, j);
                acc += aAt(l) *
                       (quantize ? float(quantized(b, scale, p.qmax())) : b);
              }
              sum += acc * scale;
            }
            float &c = p.c[bt * p.cs[0] + i * p.cs[1] + j * p.cs[2]];
            c = p.accumulate ? c + sum : sum;
          }
    }
  });
}

#ifdef TFC_UK_VECTOR

constexpr int64_t kNR = 2 * tfc::uk::kLanes; // columns of a panel
constexpr int64_t kKC = 256;                 // depth of a packed slice
constexpr int64_t kMC = 96; // at most this many rows of A per task
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
size_t panelRowBytes(BType t) {
  return t == BType::F32  ? 4 * kNR
         : t == BType::I8 ? kNR
         : t == BType::I4 ? kNR / 2
                          : 2 * kNR;
}

/// Bytes of B's packed panels: the elements, and a quantized B's scales
/// after all of them.
size_t packedBytes(const Matmul &p, int64_t panels) {
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
/// scale and the sum of the values. Vectors over contiguous values: the
/// same division and rounding as the scalar form, so the same bytes.
void quantizeSymmetric(const float *x, int64_t step, int64_t n, float qmax,
                       int8_t *q, float &scale, int32_t &sum, uint8_t flip) {
#ifdef __AVX512BW__
  // A contiguous block of 128 values (A's blocks, an int4 weight's groups):
  // eight vectors, four packed to bytes at a time (two in-lane packs, one
  // permutation to put the lanes back in order).
  if (step == 1 && n == 128) {
    const __m512 magnitude = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 v[8], top = _mm512_setzero_ps();
    for (int j = 0; j < 8; ++j) {
      v[j] = _mm512_loadu_ps(x + 16 * j);
      top = _mm512_max_ps(top, _mm512_and_ps(v[j], magnitude));
    }
    scale = _mm512_reduce_max_ps(top) / qmax;
    if (scale == 0) {
      sum = 0;
      std::memset(q, flip, size_t(n)); // the values are 0
      return;
    }
    const __m512 scale16 = _mm512_set1_ps(scale);
    // packs leaves dword L * 4 + j of each 64 bytes holding vector j's
    // values 4L..4L+3; the permutation puts them at j * 4 + L.
    const __m512i order =
        _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    __m512i sum16 = _mm512_setzero_si512();
    for (int g = 0; g < 2; ++g) {
      __m512i w[4];
      for (int j = 0; j < 4; ++j) {
        // Clamped before the rounding in vcvtps2dq (to nearest, ties to
        // even, in the default rounding mode): qmax is an integer, so the
        // same as rounding first.
        __m512 t = _mm512_div_ps(v[4 * g + j], scale16);
        t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-qmax)),
                          _mm512_set1_ps(qmax));
        w[j] = _mm512_cvtps_epi32(t);
        sum16 = _mm512_add_epi32(sum16, w[j]);
      }
      __m512i bytes = _mm512_packs_epi16(_mm512_packs_epi32(w[0], w[1]),
                                         _mm512_packs_epi32(w[2], w[3]));
      bytes = _mm512_xor_si512(_mm512_permutexvar_epi32(order, bytes),
                               _mm512_set1_epi8(char(flip)));
      _mm512_storeu_si512(q + 64 * g, bytes);
    }
    sum = _mm512_reduce_add_epi32(sum16);
    return;
  }
#endif
  int64_t vectorEnd = step == 1 ? n / 8 * 8 : 0;
  __m256 top8 = _mm256_setzero_ps();
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t l = 0; l < vectorEnd; l += 8)
    top8 =
        _mm256_max_ps(top8, _mm256_and_ps(_mm256_loadu_ps(x + l), magnitude));
  float lanes[8];
  _mm256_storeu_ps(lanes, top8);
  float top = 0;
  for (float t : lanes)
    top = std::max(top, t);
  for (int64_t l = vectorEnd; l < n; ++l)
    top = std::max(top, std::fabs(x[l * step]));
  scale = top / qmax;
  sum = 0;
  if (scale == 0) {
    std::memset(q, flip, size_t(n)); // the values are 0
    return;
  }
  __m256 scale8 = _mm256_set1_ps(scale);
  __m256i sum8 = _mm256_setzero_si256();
  for (int64_t l = 0; l < vectorEnd; l += 8) {
    __m256 t = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + l), scale8),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-qmax)),
                      _mm256_set1_ps(qmax));
    __m256i v = _mm256_cvtps_epi32(t);
    sum8 = _mm256_add_epi32(sum8, v);
    __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(v),
                                    _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i *>(q + l),
                     _mm_xor_si128(_mm_packs_epi16(words, words),
                                   _mm_set1_epi8(char(flip))));
  }
  int32_t partial[8];
  _mm256_storeu_si256(reinterpret_cast<__m256i *>(partial), sum8);
  for (int32_t t : partial)
    sum += t;
  for (int64_t l = vectorEnd; l < n; ++l) {
    int v = quantized(x[l * step], scale, qmax);
    q[l] = int8_t(uint8_t(v) ^ flip);
    sum += v;
  }
}

/// B of batch element bt quantized (quantizeSymmetric, in groups of
/// p.group() rows) in panels of `cols` columns, the panels on the threads:
/// store(pn, l0, n, q, stride) for rows [l0, l0 + n) of panel pn (one group),
/// column j's values at q[j * stride, + n), and the scale of group g of
/// column j at scales[(pn * groups + g) * cols + j]. Columns past N hold 0
/// with scale 0.
template <typename Store>
void quantizePanels(const Matmul &p, int64_t bt, int64_t panels, int64_t cols,
                    float *scales, Store store) {
  withBType(p.btype, [&](auto type) {
    constexpr BType T = decltype(type)::value;
    if constexpr (T != BType::I8 && T != BType::I4) {
      int64_t groups = p.groups(), group = p.group();
#pragma omp parallel
      {
        // A group of a column as f32 where it is not one in place (16-bit
        // values, or rows apart in B), and the group's quantized values.
        std::vector<float> column(static_cast<size_t>(group));
        std::vector<int8_t> q(static_cast<size_t>(cols * group));
#pragma omp for schedule(static)
        for (int64_t pn = 0; pn < panels; ++pn)
          for (int64_t g = 0; g < groups; ++g) {
            int64_t l0 = g * group, n = std::min(p.k, l0 + group) - l0;
            for (int64_t j = 0; j < cols; ++j) {
              int64_t col = pn * cols + j;
              int8_t *qj = q.data() + j * group;
              float scale = 0;
              int32_t sum;
              if (col >= p.n) {
                std::fill_n(qj, n, int8_t(0));
              } else if (T == BType::F32 && p.bs[1] == 1) {
                quantizeSymmetric(static_cast<const float *>(p.b) +
                                      p.bOffset(bt) + l0 + col * p.bs[2],
                                  1, n, p.qmax(), qj, scale, sum, 0);
              } else {
                for (int64_t l = 0; l < n; ++l)
                  column[l] = p.bAt<T>(bt, l0 + l, col);
                quantizeSymmetric(column.data(), 1, n, p.qmax(), qj, scale, sum,
                                  0);
              }
              scales[(pn * groups + g) * cols + j] = scale;
            }
            store(pn, l0, n, q.data(), group);
          }
      }
    }
  });
}

/// t[i][j] becomes t[j][i]: a 16 x 16 block of bytes transposed in four
/// rounds of interleaving (bytes, then pairs, quads and halves of rows).
inline void transposeBytes16(__m128i t[16]) {
  __m128i a[16];
  for (int k = 0; k < 8; ++k) {
    a[2 * k] = _mm_unpacklo_epi8(t[2 * k], t[2 * k + 1]);
    a[2 * k + 1] = _mm_unpackhi_epi8(t[2 * k], t[2 * k + 1]);
  }
  // a[4m + h]: rows 4m, 4m + 1 (4m + 2, 4m + 3 at a[4m + 2 + h]) of columns
  // 8h..8h+7, in byte pairs.
  __m128i b[16];
  for (int m = 0; m < 4; ++m)
    for (int h = 0; h < 2; ++h) {
      b[4 * m + 2 * h] = _mm_unpacklo_epi16(a[4 * m + h], a[4 * m + 2 + h]);
      b[4 * m + 2 * h + 1] = _mm_unpackhi_epi16(a[4 * m + h], a[4 * m + 2 + h]);
    }
  // b[4m + c]: rows 4m..4m+3 of columns 4c..4c+3.
  __m128i c[16];
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 4; ++q) {
      c[8 * p + 2 * q] = _mm_unpacklo_epi32(b[8 * p + q], b[8 * p + 4 + q]);
      c[8 * p + 2 * q + 1] = _mm_unpackhi_epi32(b[8 * p + q], b[8 * p + 4 + q]);
    }
  // c[8p + e]: rows 8p..8p+7 of columns 2e, 2e + 1.
  for (int e = 0; e < 8; ++e) {
    t[2 * e] = _mm_unpacklo_epi64(c[e], c[8 + e]);
    t[2 * e + 1] = _mm_unpackhi_epi64(c[e], c[8 + e]);
  }
}

/// Packs B of batch element bt quantized into panels laid out as packB's:
/// int8 values, or int4 ones (two's complement nibbles) with column j of a
/// panel row in the low nibble of byte j and column j + kLanes in the high
/// one.
void packBQuantized(const Matmul &p, int64_t bt, int64_t panels, void *packed) {
  auto *bytes = static_cast<uint8_t *>(packed);
  bool i4 = p.quant == Quant::I4;
  size_t rowBytes = panelRowBytes(p.panelType());
  // Every byte of the panels is written (columns past N as 0).
  constexpr int64_t kHalf = tfc::uk::kLanes;
  static_assert(kNR % 16 == 0, "a panel is whole blocks of 16 columns");
  quantizePanels(
      p, bt, panels, kNR, panelScales(p, panels, bytes),
      [&](int64_t pn, int64_t l0, int64_t n, const int8_t *q, int64_t stride) {
        uint8_t *row = bytes + (pn * p.k + l0) * rowBytes;
        int64_t l = 0;
        // 16 rows at a time: each block of 16 columns transposed in
        // registers, then stored (int8) or joined in nibbles (int4:
        // columns j and j + kHalf in one byte).
        for (; l + 16 <= n; l += 16, row += 16 * rowBytes) {
          __m128i t[kNR / 16][16];
          for (int64_t h = 0; h < kNR / 16; ++h) {
            for (int64_t j = 0; j < 16; ++j)
              t[h][j] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(
                  q + (16 * h + j) * stride + l));
            transposeBytes16(t[h]);
          }
          const __m128i nibble = _mm_set1_epi8(15);
          for (int64_t r = 0; r < 16; ++r) {
            auto *out = reinterpret_cast<__m128i *>(row + r * rowBytes);
            if (!i4) {
              for (int64_t h = 0; h < kNR / 16; ++h)
                _mm_storeu_si128(out + h, t[h][r]);
              continue;
            }
            // The low nibbles' columns [0, kHalf), the high ones' after:
            // the second block of 16 (AVX-512), or the block's second
            // half (AVX2: 8 and 8).
            auto join = [&](__m128i lo, __m128i hi) {
              return _mm_or_si128(_mm_and_si128(lo, nibble),
                                  _mm_slli_epi16(_mm_and_si128(hi, nibble), 4));
            };
            if constexpr (kHalf == 16)
              _mm_storeu_si128(out, join(t[0][r], t[kNR / 16 - 1][r]));
            else
              _mm_storel_epi64(out, join(t[0][r], _mm_srli_si128(t[0][r], 8)));
          }
        }
        for (; l < n; ++l, row += rowBytes)
          for (int64_t j = 0; j < (i4 ? kHalf : kNR); ++j)
            row[j] = i4 ? uint8_t((q[j * stride + l] & 15) |
                                  (q[(j + kHalf) * stride + l] & 15) << 4)
                        : uint8_t(q[j * stride + l]);
      });
}

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

/// Packs B of batch element bt quantized (quantizePanels) as DotPanels lays
/// it out: int8, or int4 biased by intdot::kBias.
void packBDot(const Matmul &p, int64_t bt, void *packed) {
  DotPanels d(p);
  auto *bytes = static_cast<uint8_t *>(packed);
  int64_t quadBytes = intdot::quadBytes(d.i4);
  std::memset(bytes, 0, size_t(d.panels) * d.panelBytes());
  int32_t *sums = d.sums ? d.columnSums(p, bytes) : nullptr;
  if (sums)
    std::fill_n(sums, d.panels * d.blocks * intdot::kCols, 0);
  quantizePanels(
      p, bt, d.panels, intdot::kCols, d.scales(p, bytes),
      [&](int64_t pn, int64_t l0, int64_t n, const int8_t *q, int64_t stride) {
        // A group starts a quad (its rows are 128, or all K from 0).
        uint8_t *panel =
            bytes + size_t(pn) * d.panelBytes() + (l0 / 4) * quadBytes;
        // A quad's column j is 4 bytes (its 4 rows in order) at
        // (j % 8) * 4: an int8 weight's columns 8-15 32 bytes after 0-7,
        // an int4 weight's in the high nibbles of 0-7's bytes. Those are
        // 4 consecutive values of the column's group, moved as one word.
        static_assert(intdot::kBias == 8, "biased by flipping bit 3");
        for (int64_t l = 0; l < n; l += 4, panel += quadBytes) {
          int64_t rows = std::min<int64_t>(4, n - l);
          // Rows past K stay 0 (the panel was cleared).
          uint32_t mask = rows == 4 ? ~0u : (1u << (8 * rows)) - 1;
          auto word = [&](int64_t j) {
            uint32_t w = 0;
            if (rows == 4)
              std::memcpy(&w, q + j * stride + l, 4);
            else
              std::memcpy(&w, q + j * stride + l, size_t(rows));
            return w;
          };
          for (int64_t j = 0; j < (d.i4 ? 8 : 16); ++j) {
            uint32_t w = word(j);
            if (d.i4) {
              // q + 8 in [1, 15]: the low nibble with bit 3 flipped.
              constexpr uint32_t kLow = 0x0f0f0f0f, kBit3 = 0x08080808;
              w = (((w ^ kBit3) & kLow) | ((word(j + 8) ^ kBit3) & kLow) << 4) &
                  mask;
            }
            std::memcpy(panel + (j / 8) * 32 + (j % 8) * 4, &w, 4);
          }
        }
        // An int8 weight's column sums, block by block.
        if (sums)
          for (int64_t j = 0; j < 16; ++j)
            for (int64_t b = 0; b < n; b += kABlock) {
              int32_t sum = 0;
              for (int64_t l = b; l < std::min(n, b + kABlock); ++l)
                sum += q[j * stride + l];
              sums[(pn * d.blocks + (l0 + b) / kABlock) * intdot::kCols + j] +=
                  sum;
            }
      });
}

#ifdef TFC_UK_BF16DOT
constexpr bool kBf16Dot = true;
#else
constexpr bool kBf16Dot = false;
#endif

/// Whether the product runs on bf16 dot products.
bool bf16Dot(const Matmul &p) {
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
    return tfc::uk::amx::enabled() ? tfc::uk::amx::kRows : 1;
#else
    return 1;
#endif
  }
  size_t bytes() const { return size_t(panels * pairs * kDotCols) * 4; }
};

#ifdef __AVX512F__
/// dst[r * dstStride + c] = src[c * srcStride + r] for r, c in [0, 16): 16
/// runs of 16 32-bit words (strides in words) transposed in registers.
inline void transposeWords16(const void *src, int64_t srcStride, void *dst,
                             int64_t dstStride) {
  const auto *in = static_cast<const char *>(src);
  auto *out = static_cast<char *>(dst);
  __m512 r[16];
  for (int i = 0; i < 16; ++i)
    r[i] = _mm512_loadu_ps(in + i * srcStride * 4);
  tfc::uk::transpose16(r);
  for (int i = 0; i < 16; ++i)
    _mm512_storeu_ps(out + i * dstStride * 4, r[i]);
}
#endif

/// Packs the bf16 B of batch element bt as Bf16Panels lays it out.
void packBBf16(const Matmul &p, int64_t bt, void *packed, bool parallel) {
  Bf16Panels d(p);
  auto *words = static_cast<uint32_t *>(packed);
  const auto *src = static_cast<const uint16_t *>(p.b) + p.bOffset(bt);
  // A weight stored [N, K] of even K: a column's pairs are its 32-bit
  // words as they are.
  bool columnWords = p.bs[1] == 1 && p.k % 2 == 0;
  constexpr int64_t kCols = Bf16Panels::kDotCols;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t pn = 0; pn < d.panels; ++pn) {
    // Pairs [0, vectorPairs) of a whole panel: 16 x 16 blocks of words
    // transposed in registers.
    int64_t vectorPairs = 0;
#ifdef __AVX512F__
    static_assert(kCols == 16, "a panel is one block of columns");
    if (columnWords && (pn + 1) * kCols <= p.n)
      for (; vectorPairs + 16 <= p.k / 2; vectorPairs += 16)
        transposeWords16(src + pn * kCols * p.bs[2] + 2 * vectorPairs,
                         p.bs[2] / 2,
                         words + (pn * d.pairs + vectorPairs) * kCols, kCols);
#endif
    for (int64_t j = 0; j < kCols; ++j) {
      int64_t col = pn * kCols + j;
      uint32_t *to = words + pn * d.pairs * kCols + j;
      int64_t kp = vectorPairs;
      if (col < p.n && columnWords) {
        const uint16_t *column = src + col * p.bs[2];
        for (; kp < p.k / 2; ++kp) {
          uint32_t pair;
          std::memcpy(&pair, column + 2 * kp, 4);
          to[kp * kCols] = pair;
        }
      }
      auto at = [&](int64_t l) -> uint32_t {
        return col < p.n && l < p.k ? src[l * p.bs[1] + col * p.bs[2]] : 0;
      };
      for (; kp < d.pairs; ++kp)
        to[kp * kCols] = at(2 * kp) | at(2 * kp + 1) << 16;
    }
  }
}

/// Packs B of batch element bt into kNR-column panels, each holding all of
/// K with row stride kNR (columns past N are zero, which is +0 in every
/// type): a block of C reads its panel from start to end.
void packB(const Matmul &p, int64_t bt, int64_t panels, void *packed,
           bool parallel) {
  withBType(p.btype, [&](auto type) {
    constexpr BType T = decltype(type)::value;
    using E = PanelElement<T>;
    const E *src = static_cast<const E *>(p.b) + p.bOffset(bt);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t pn = 0; pn < panels; ++pn) {
      E *dst = static_cast<E *>(packed) + pn * kNR * p.k;
      int64_t cols = std::min(kNR, p.n - pn * kNR);
      if (p.bs[1] == 1) {
        // B is a transposed view (a weight stored [N, K]): read along K,
        // kRows rows of the panel at a time, which stay in L1 while its
        // columns are written (a whole f32 panel at K = 768, 96 KiB, did
        // not).
        int64_t l0 = 0;
#ifdef __AVX512F__
        // A whole f32 panel: 16 x 16 blocks transposed in registers.
        if constexpr (T == BType::F32)
          if (cols == kNR)
            for (; l0 + 16 <= p.k; l0 += 16)
              for (int64_t h = 0; h < kNR; h += 16)
                transposeWords16(src + (pn * kNR + h) * p.bs[2] + l0, p.bs[2],
                                 dst + l0 * kNR + h, kNR);
#endif
        constexpr int64_t kRows = 64;
        for (; l0 < p.k; l0 += kRows) {
          int64_t l1 = std::min(p.k, l0 + kRows);
          for (int64_t j = 0; j < kNR; ++j) {
            const E *column = src + (pn * kNR + j) * p.bs[2];
            for (int64_t l = l0; l < l1; ++l)
              dst[l * kNR + j] = j < cols ? column[l] : E(0);
          }
        }
      } else {
        for (int64_t l = 0; l < p.k; ++l)
          for (int64_t j = 0; j < kNR; ++j)
            dst[l * kNR + j] =
                j < cols ? src[l * p.bs[1] + (pn * kNR + j) * p.bs[2]] : E(0);
      }
    }
  });
}

/// Packed copies of constant B operands (weights), made on first use and
/// kept for the life of the process: a model's weights are immutable once
/// bound, so each is packed once, never per call. The runtime may also hand
/// over copies packed by an earlier process (adopt, abi.h "Packed
/// weights"), which stay the runtime's.
class PackedWeights {
public:
  const void *get(const Matmul &p, int64_t bt, int64_t panels) {
    Layout layout = layoutOf(p);
    Key key{static_cast<const char *>(p.b) +
                p.bOffset(bt) * (p.btype == BType::F32 ? 4 : 2),
            p.panelType(),
            layout,
            p.k,
            p.n,
            p.bs[1],
            p.bs[2]};
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end())
      return it->second.data.get();
    size_t bytes = packedSize(layout, p);
    std::unique_ptr<void, Free> buffer(
        std::aligned_alloc(64, (bytes + 63) / 64 * 64), Free(true));
    if (layout == Layout::IntDot)
      packBDot(p, bt, buffer.get());
    else if (layout == Layout::Bf16Dot)
      packBBf16(p, bt, buffer.get(), /*parallel=*/true);
    else if (p.quant != Quant::None)
      packBQuantized(p, bt, panels, buffer.get());
    else
      packB(p, bt, panels, buffer.get(), /*parallel=*/true);
    return cache.emplace(key, Entry{std::move(buffer), bytes})
        .first->second.data.get();
  }

  /// Up to `capacity` of the packed copies, into `out`; how many there are.
  int32_t list(tfc_packed_weight *out, int32_t capacity) {
    std::lock_guard<std::mutex> lock(mutex);
    int32_t i = 0;
    for (const auto &[key, entry] : cache) {
      if (out && i < capacity)
        out[i] = {key.b,
                  {int32_t(key.type), int32_t(key.layout)},
                  key.k,
                  key.n,
                  {key.s1, key.s2},
                  entry.data.get(),
                  entry.bytes};
      ++i;
    }
    return i;
  }

  /// Takes `w` as the packed copy of its key, without owning its bytes.
  /// False when no product of these kernels packs such a key into
  /// w.bytes bytes. A key packed already keeps its copy.
  bool adopt(const tfc_packed_weight &w) {
    int32_t type = w.kind[0], layout = w.kind[1];
    if (!w.source || !w.data || w.k <= 0 || w.n <= 0 || type < 0 ||
        type > int32_t(BType::I4) || layout < 0 ||
        layout > int32_t(Layout::Bf16Dot))
      return false;
    Matmul p{};
    p.k = w.k;
    p.n = w.n;
    auto t = BType(type);
    p.quant = t == BType::I8   ? Quant::I8
              : t == BType::I4 ? Quant::I4
                               : Quant::None;
    p.btype = p.quant == Quant::None ? t : BType::F32;
    auto l = Layout(layout);
    bool consistent = l == Layout::IntDot    ? p.quant != Quant::None
                      : l == Layout::Bf16Dot ? kBf16Dot && t == BType::BF16
                                             : true;
    if (!consistent || w.bytes != packedSize(l, p))
      return false;
    Key key{w.source, t, l, w.k, w.n, w.strides[0], w.strides[1]};
    std::lock_guard<std::mutex> lock(mutex);
    cache.emplace(key, Entry{std::unique_ptr<void, Free>(
                                 const_cast<void *>(w.data), Free{false}),
                             size_t(w.bytes)});
    return true;
  }

private:
  /// How B is packed: kNR-column panels, for integer dot products
  /// (DotPanels) or for bf16 ones (Bf16Panels).
  enum class Layout { Panels, IntDot, Bf16Dot };
  static Layout layoutOf(const Matmul &p) {
    return p.quantizeA  ? Layout::IntDot
           : bf16Dot(p) ? Layout::Bf16Dot
                        : Layout::Panels;
  }
  /// Bytes of B packed in `layout` (p's k, n, quant and btype).
  static size_t packedSize(Layout layout, const Matmul &p) {
    return layout == Layout::IntDot    ? DotPanels(p).bytes(p)
           : layout == Layout::Bf16Dot ? Bf16Panels(p).bytes()
                                       : packedBytes(p, (p.n + kNR - 1) / kNR);
  }
  struct Key {
    const void *b;
    BType type;
    Layout layout;
    int64_t k, n, s1, s2;
    bool operator==(const Key &o) const {
      return b == o.b && type == o.type && layout == o.layout && k == o.k &&
             n == o.n && s1 == o.s1 && s2 == o.s2;
    }
  };
  struct Hash {
    size_t operator()(const Key &k) const {
      return std::hash<const void *>()(k.b) ^ (size_t(k.k) * 31 + size_t(k.n));
    }
  };
  /// Frees what get() allocated; adopted bytes are the runtime's.
  struct Free {
    explicit Free(bool owned) : owned(owned) {}
    bool owned;
    void operator()(void *p) const {
      if (owned)
        std::free(p);
    }
  };
  struct Entry {
    std::unique_ptr<void, Free> data;
    size_t bytes;
  };
  std::mutex mutex;
  std::unordered_map<Key, Entry, Hash> cache;

public:
  void clear() {
    std::lock_guard<std::mutex> lock(mutex);
    cache.clear();
  }
};

PackedWeights packedWeights;

/// Products of fewer FLOPs than this run on one thread: a parallel region
/// costs more than it saves (waking a passive OpenMP runtime's workers
/// takes tens of microseconds; one query row's products are ~0.5 MFLOP).
constexpr double kParallelFlops = 4e6;

/// ... unless B has at least this many elements (512 KiB of f32): a
/// product of few rows then streams B from L3 or memory at one core's
/// bandwidth, and the threads together read faster. A LLaMA decode step
/// (hidden 768, 2 threads, AVX2) ran all its GEMVs on one thread before
/// (below 4 MFLOP each): f32 16.7 -> 10.5 ms (29 GB/s of weights, two
/// cores' read bandwidth), bf16 11.5 -> 8.7 ms. Elements, not bytes: a
/// 16-bit or quantized B has fewer bytes for the same work of widening and
/// multiplying, and int4 projections of 768 x 768 and 768 x 256 (295 and 98
/// KiB) ran on one thread when bytes counted (the same step with int4
/// weights and int8 activations, AVX-512: 5.9 -> 5.2 ms,
/// docs/performance/reports/2026-12-03-xeon-amx.md).
constexpr double kParallelElements = double(size_t(1) << 17);

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

/// A 64-byte aligned buffer of at least `floats` floats in `storage`.
float *alignedScratch(std::vector<float> &storage, size_t floats) {
  if (storage.size() < floats + 16)
    storage.resize(floats + 16);
  return reinterpret_cast<float *>(
      (reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t(63));
}

/// The rows of A of batch element bt quantized in blocks (TFC_UK_QUANTIZE_A8):
/// row i's int8 values at values[i * stride] (64-byte aligned), each block
/// of kABlock values (the last one padded with zeros), its blocks' scales
/// at scales[i * blocks] and the sums of their values at sums[i * blocks].
/// `biased`: the values are stored as the unsigned bytes a + intdot::kABias
/// (the sums are not).
struct QuantizedRows {
  std::vector<float> storage; // 64-byte aligned through alignedScratch
  int8_t *values = nullptr;
  std::vector<float> scales;
  std::vector<int32_t> sums;
  int64_t blocks = 0, stride = 0;

  /// `rowStep`: the rows are padded with zero rows to a multiple of it (an
  /// AMX tile's loads read whole tiles of rows).
  void quantize(const Matmul &p, int64_t bt, bool parallel, bool biased,
                int64_t rowStep = 1) {
    blocks = (p.k + kABlock - 1) / kABlock;
    stride = blocks * kABlock;
    int64_t rows = roundUp(p.m, rowStep);
    values = reinterpret_cast<int8_t *>(
        alignedScratch(storage, size_t(rows * stride + 3) / 4));
    std::memset(values + p.m * stride, 0, size_t((rows - p.m) * stride));
    scales.resize(size_t(p.m * blocks));
    sums.resize(size_t(p.m * blocks));
    const float *ab = p.a + bt * p.as[0];
#pragma omp parallel for schedule(static) if (parallel && p.m >= 16)
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t g = 0; g < blocks; ++g) {
        const float *a = ab + i * p.as[1] + g * kABlock * p.as[2];
        int64_t n = std::min(kABlock, p.k - g * kABlock);
        size_t at = size_t(i * blocks + g);
        block(a, p.as[2], n, values + i * stride + g * kABlock, scales[at],
              sums[at], biased);
      }
      std::memset(values + i * stride + p.k, 0, size_t(stride - p.k));
    }
  }

  /// The n values a[l * step] quantized into q (biased: as a + kABias);
  /// their scale and sum.
  static void block(const float *a, int64_t step, int64_t n, int8_t *q,
                    float &scale, int32_t &sum, bool biased) {
    // Adding 128 to an int8 is flipping its top bit.
    static_assert(intdot::kABias == 0x80);
    quantizeSymmetric(a, step, n, kAMax, q, scale, sum, biased ? 0x80 : 0);
  }
};

/// Rows [i0, i0 + R) of C for one panel of DotPanels d (its scales and an
/// int8 weight's column sums): each block's integer sums
/// (intdot::blockSums), less their bias, scaled and added up in order.
template <int R, bool I4>
void dotRows(const Matmul &p, const DotPanels &d, const QuantizedRows &qa,
             const uint8_t *panel, const float *bScales, const int32_t *bSums,
             float *c, int64_t i0, int64_t cols) {
  __m256 out[R][2];
  for (int r = 0; r < R; ++r)
    out[r][0] = out[r][1] = _mm256_setzero_ps();
  for (int64_t g = 0; g < d.blocks; ++g) {
    const int8_t *a[R];
    for (int r = 0; r < R; ++r)
      a[r] = qa.values + (i0 + r) * qa.stride + g * kABlock;
    int64_t quads = (std::min(kABlock, p.k - g * kABlock) + 3) / 4;
    __m256i sums[R][2];
    for (int r = 0; r < R; ++r)
      sums[r][0] = sums[r][1] = _mm256_setzero_si256();
    intdot::blockSums<R, I4>(
        a, panel + g * d.quadsPerBlock() * intdot::quadBytes(I4), quads, sums);
    const float *sb = bScales + (I4 ? g : 0) * intdot::kCols;
    // The bias in the sums: an int4 weight's kBias times A's block sum (a
    // row's); in the VNNI form, A's kABias times an int8 weight's (a
    // column's).
    __m256i columnBias[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    if constexpr (!I4 && intdot::kVnni)
      for (int h = 0; h < 2; ++h)
        columnBias[h] = _mm256_mullo_epi32(
            _mm256_set1_epi32(intdot::kABias),
            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(
                bSums + g * intdot::kCols + 8 * h)));
    for (int r = 0; r < R; ++r) {
      size_t at = size_t((i0 + r) * qa.blocks + g);
      __m256 sa = _mm256_set1_ps(qa.scales[at]);
      __m256i rowBias = _mm256_set1_epi32(I4 ? intdot::kBias * qa.sums[at] : 0);
      for (int h = 0; h < 2; ++h) {
        __m256i bias = _mm256_add_epi32(rowBias, columnBias[h]);
        __m256 dot = _mm256_cvtepi32_ps(_mm256_sub_epi32(sums[r][h], bias));
        __m256 scale = _mm256_mul_ps(sa, _mm256_loadu_ps(sb + 8 * h));
        out[r][h] = _mm256_add_ps(out[r][h], _mm256_mul_ps(dot, scale));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    float row[intdot::kCols];
    _mm256_storeu_ps(row, out[r][0]);
    _mm256_storeu_ps(row + 8, out[r][1]);
    float *cr = c + (i0 + r) * p.cs[1];
    for (int64_t j = 0; j < cols; ++j)
      cr[j] = p.accumulate ? cr[j] + row[j] : row[j];
  }
}

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
/// Rows [i0, i0 + R) of C for P (1 or 2) adjacent panels of an int8 or
/// int4 weight's DotPanels (the first at `panel`, its scales at bScales and
/// an int8 weight's column sums at bSums), with 512-bit VNNI: per quad of
/// K, each row's four A values are broadcast once (vpbroadcastd) into the
/// P panels' vpdpbusd. A 6 x 2 block keeps 12 independent sums, two loads
/// of B per 12 products; intdot's blockSums (dotRows: four rows, one
/// panel) broadcasts once per product. An int4 quad's 16 columns are unpacked
/// into one vector as blockSums does. The sums of each block of K, less their
/// bias, are scaled and added up in order as in dotRows.
template <int R, int P, bool I4>
void dotRowsVnni512(const Matmul &p, const DotPanels &d,
                    const QuantizedRows &qa, const uint8_t *panel,
                    const float *bScales, const int32_t *bSums, float *c,
                    int64_t i0, int64_t cols) {
  constexpr int64_t kCols = intdot::kCols;
  // Two sets of sums (even and odd quads) where one would leave fewer
  // than 8 independent vpdpbusd chains to cover their latency.
  constexpr int Sets = R * P >= 8 ? 1 : 2;
  static_assert(kCols == 16, "a panel's quad is one 512-bit vector");
  const size_t panelStride = d.panelBytes();
  const int64_t scaleStride = p.groups() * kCols, sumStride = d.blocks * kCols;
  // int4: a quad's 32 bytes in both halves, the upper half's 16-bit lanes
  // shifted right by 4 (the high nibbles: columns 8-15).
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i highShift =
      _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  __m512 out[R][P];
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < P; ++h)
      out[r][h] = _mm512_setzero_ps();
  for (int64_t g = 0; g < d.blocks; ++g) {
    const int8_t *a[R];
    for (int r = 0; r < R; ++r)
      a[r] = qa.values + (i0 + r) * qa.stride + g * kABlock;
    const uint8_t *b = panel + g * d.quadsPerBlock() * intdot::quadBytes(I4);
    int64_t quads = (std::min(kABlock, p.k - g * kABlock) + 3) / 4;
    __m512i acc[Sets][R][P];
    for (int s = 0; s < Sets; ++s)
      for (int r = 0; r < R; ++r)
        for (int h = 0; h < P; ++h)
          acc[s][r][h] = _mm512_setzero_si512();
    auto quad = [&](int64_t q, __m512i(&into)[R][P]) {
      __m512i bv[P];
      for (int h = 0; h < P; ++h) {
        const uint8_t *bq = b + h * panelStride + q * intdot::quadBytes(I4);
        if constexpr (I4) {
          __m512i v = _mm512_broadcast_i64x4(
              _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bq)));
          bv[h] = _mm512_and_si512(_mm512_srlv_epi16(v, highShift), nibble);
        } else {
          bv[h] = _mm512_loadu_si512(bq);
        }
      }
      for (int r = 0; r < R; ++r) {
        int32_t x;
        std::memcpy(&x, a[r] + 4 * q, 4);
        __m512i av = _mm512_set1_epi32(x);
        // The unsigned operand: A biased by kABias, or the int4 weight
        // biased by kBias.
        for (int h = 0; h < P; ++h)
          into[r][h] = I4 ? _mm512_dpbusd_epi32(into[r][h], bv[h], av)
                          : _mm512_dpbusd_epi32(into[r][h], av, bv[h]);
      }
    };
    int64_t q = 0;
    for (; q + Sets <= quads; q += Sets)
      for (int s = 0; s < Sets; ++s)
        quad(q + s, acc[s]);
    for (; q < quads; ++q)
      quad(q, acc[0]);
    for (int h = 0; h < P; ++h) {
      // The bias in the sums: A's kABias times an int8 weight's block
      // column sums, or an int4 weight's kBias times A's block sum (a
      // row's). An int4 weight's scales change from block to block.
      __m512i columnBias =
          I4 ? _mm512_setzero_si512()
             : _mm512_mullo_epi32(
                   _mm512_set1_epi32(intdot::kABias),
                   _mm512_loadu_si512(bSums + h * sumStride + g * kCols));
      __m512 sb =
          _mm512_loadu_ps(bScales + h * scaleStride + (I4 ? g * kCols : 0));
      for (int r = 0; r < R; ++r) {
        size_t at = size_t((i0 + r) * qa.blocks + g);
        __m512i sum = acc[0][r][h];
        if constexpr (Sets == 2)
          sum = _mm512_add_epi32(sum, acc[1][r][h]);
        __m512i bias =
            I4 ? _mm512_set1_epi32(intdot::kBias * qa.sums[at]) : columnBias;
        __m512 dot = _mm512_cvtepi32_ps(_mm512_sub_epi32(sum, bias));
        __m512 scale = _mm512_mul_ps(_mm512_set1_ps(qa.scales[at]), sb);
        out[r][h] = _mm512_add_ps(out[r][h], _mm512_mul_ps(dot, scale));
      }
    }
  }
  for (int h = 0; h < P; ++h) {
    __mmask16 lanes = tfc::uk::firstLanes(cols - h * kCols);
    for (int r = 0; r < R; ++r) {
      float *cr = c + (i0 + r) * p.cs[1] + h * kCols;
      __m512 v = out[r][h];
      if (p.accumulate)
        v = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, cr), v);
      _mm512_mask_storeu_ps(cr, lanes, v);
    }
  }
}

/// matmulIntDot with 512-bit VNNI: units of (a block of rows, two adjacent
/// panels), rows first, split evenly over the threads; each runs its rows
/// through the panels six at a time.
template <bool I4>
void matmulIntDotVnni512(const Matmul &p, const DotPanels &d,
                         const QuantizedRows &qa, const uint8_t *packed,
                         const float *scales, float *cb, bool parallel) {
  constexpr int64_t kCols = intdot::kCols;
  constexpr int kRows = 6; // of dotRowsVnni512's blocks
  const int32_t *sums = d.sums ? d.columnSums(p, packed) : nullptr;
  // Row tasks as the f32 kernel's (RowTasks): 128 rows in blocks of 96 and
  // 32 had left one thread a quarter of the work. Few rows (a decode step's
  // GEMVs, a short sentence) make one task, and the threads split its
  // panels, as the f32 kernel's do: a task per thread of rows would leave
  // some threads without rows (a GEMV all on one) and have every thread
  // read all of B.
  int64_t threads = parallel ? omp_get_max_threads() : 1;
  RowTasks tasks = p.m < 2 * kRows * threads
                       ? RowTasks(p.m, 1, std::max<int64_t>(p.m, 1))
                       : RowTasks(p.m, threads, kRows);
  int64_t pairs = (d.panels + 1) / 2;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t u = 0; u < tasks.count * pairs; ++u) {
    int64_t pn = 2 * (u % pairs), r0 = tasks.begin(u / pairs);
    int64_t rEnd = tasks.begin(u / pairs + 1);
    // Rows [r0, rEnd) against `P` panels from panel `first`.
    auto rows = [&](auto panels, int64_t first) {
      constexpr int P = decltype(panels)::value;
      const uint8_t *panel = packed + size_t(first) * d.panelBytes();
      const float *bScales = scales + first * p.groups() * kCols;
      const int32_t *bSums = sums ? sums + first * d.blocks * kCols : nullptr;
      float *c = cb + first * kCols;
      int64_t cols = std::min(P * kCols, p.n - first * kCols);
      int64_t i = r0;
      for (; i + kRows <= rEnd; i += kRows)
        dotRowsVnni512<kRows, P, I4>(p, d, qa, panel, bScales, bSums, c, i,
                                     cols);
      tfc::uk::withRows<kRows - 1>(rEnd - i, [&](auto height) {
        dotRowsVnni512<decltype(height)::value, P, I4>(p, d, qa, panel, bScales,
                                                       bSums, c, i, cols);
      });
    };
    using One = std::integral_constant<int, 1>;
    using Two = std::integral_constant<int, 2>;
    // Fewer rows than a block (a decode step's GEMV) are bound by reading B:
    // its panels go one after the other, one stream through memory. Two
    // panels at a time read two streams a panel apart, which the hardware
    // prefetchers followed worse: a LLaMA decode step with int4 weights
    // and int8 activations went from 1.2 to 1.9 ms.
    if (pn + 1 < d.panels && rEnd - r0 >= kRows) {
      rows(Two(), pn);
    } else {
      rows(One(), pn);
      if (pn + 1 < d.panels)
        rows(One(), pn + 1);
    }
  }
}
#endif

#ifdef TFC_UK_AMX
namespace amx = tfc::uk::amx;

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

/// The AMX kernels' unit (amx::UnitTiles): up to two tiles of rows (32) by
/// two 16-column panels.
constexpr int64_t kAmxUnitRows = 2 * amx::kRows;

/// Rows [0, rows) and columns [0, cols) of a unit's f32 results (row
/// stride `stride`) into C (row stride cStride), added to it when
/// `accumulate`.
void storeUnit(const float *out, int64_t stride, int64_t rows, int64_t cols,
               float *c, int64_t cStride, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h * 16 < cols; ++h) {
      __mmask16 lanes = tfc::uk::firstLanes(cols - h * 16);
      float *cr = c + r * cStride + h * 16;
      __m512 v = _mm512_loadu_ps(out + r * stride + h * 16);
      if (accumulate)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(lanes, cr));
      _mm512_mask_storeu_ps(cr, lanes, v);
    }
}

/// An int4 weight's panels unpacked for tdpbsud: each quad's 32 bytes
/// (intdot::quadBytes(true): column c's nibble in the low half of byte
/// 4c + r, column c + 8's in the high half) as an int8 quad's 64 (columns
/// 0-7, then 8-15), still biased by intdot::kBias. Each thread of a
/// product has its own and unpacks the two panels of its current units
/// once, running every block of rows against them (forEachUnit's
/// panelsFirst).
struct UnpackedPanels {
  std::vector<float> storage; // 64-byte aligned through alignedScratch
  int64_t pn = -1;            // the first panel unpacked
  uint8_t *bytes = nullptr;

  /// Panels pn and pn + 1 (if there is one) of `packed`, unpacked.
  const uint8_t *get(const DotPanels &d, const uint8_t *packed, int64_t pn) {
    if (pn == this->pn)
      return bytes;
    this->pn = pn;
    int64_t quads = d.blocks * d.quadsPerBlock();
    bytes = reinterpret_cast<uint8_t *>(
        alignedScratch(storage, size_t(2 * quads * amx::kRowBytes) / 4));
    const uint8_t *panel = packed + size_t(pn) * d.panelBytes();
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    for (int64_t h = 0; h < 2 && pn + h < d.panels; ++h)
      for (int64_t q = 0; q < quads; ++q) {
        __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(
            panel + h * d.panelBytes() + q * intdot::quadBytes(true)));
        uint8_t *to = bytes + (h * quads + q) * amx::kRowBytes;
        _mm256_store_si256(reinterpret_cast<__m256i *>(to),
                           _mm256_and_si256(v, nibble));
        _mm256_store_si256(reinterpret_cast<__m256i *>(to + 32),
                           _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
      }
    return bytes;
  }
};

/// A unit's scratch (forEachUnit): none for bf16, an int4 weight's
/// unpacked panels for integer dot products.
struct NoScratch {};
struct IntDotScratch {
  UnpackedPanels unpacked;
};

/// Runs unit(i0, pn, scratch) for the units of an m x (panels) product over
/// the threads when `parallel`, each thread's tiles configured and its
/// Scratch its own for the product: rows first (each thread's units run a
/// block of rows against panel after panel), or with `panelsFirst` a pair
/// of panels against block after block of rows.
template <typename Scratch, typename F>
void forEachUnit(int64_t m, int64_t panels, bool parallel, bool panelsFirst,
                 F &&unit) {
  int64_t rowUnits = (m + kAmxUnitRows - 1) / kAmxUnitRows;
  int64_t panelPairs = (panels + 1) / 2;
#pragma omp parallel if (parallel)
  {
    amx::configure();
    Scratch scratch;
#pragma omp for schedule(static)
    for (int64_t u = 0; u < rowUnits * panelPairs; ++u) {
      if (panelsFirst)
        unit((u % rowUnits) * kAmxUnitRows, 2 * (u / rowUnits), scratch);
      else
        unit((u / panelPairs) * kAmxUnitRows, 2 * (u % panelPairs), scratch);
    }
    _tile_release();
  }
}

/// matmulBf16Dot on AMX: A's bf16 pairs (rows aStride words apart, padded
/// to whole tiles, pairs to Bf16Panels' pairs, with zeros) by the panels,
/// all of K summed in the tiles.
void matmulBf16Amx(const Matmul &p, const Bf16Panels &d, const uint32_t *aPairs,
                   int64_t aStride, const uint32_t *packed, float *cb,
                   bool parallel) {
  constexpr int64_t kCols = Bf16Panels::kDotCols;
  static_assert(kCols * 4 == amx::kRowBytes, "a pair row is a tile row");
  forEachUnit<NoScratch>(
      p.m, d.panels, parallel, /*panelsFirst=*/false,
      [&](int64_t i0, int64_t pn, NoScratch &) {
        int64_t rows = std::min(kAmxUnitRows, p.m - i0);
        int64_t cols = std::min(2 * kCols, p.n - pn * kCols);
        alignas(64) float out[kAmxUnitRows * 2 * kCols];
        amx::withUnit(rows, cols, [&](auto tiles) {
          using T = decltype(tiles);
          T::zero();
          const uint32_t *a = aPairs + i0 * aStride;
          const uint32_t *b = packed + pn * d.pairs * kCols;
          for (int64_t kp = 0; kp < d.pairs; kp += amx::kRows) {
            T::load(a + kp, aStride * 4, b + kp * kCols, d.pairs * kCols * 4);
            T::template dot<amx::Product::Bf16>();
          }
          T::store(out);
        });
        storeUnit(out, cols > kCols ? 2 * kCols : kCols, rows, cols,
                  cb + i0 * p.cs[1] + pn * kCols, p.cs[1], p.accumulate);
      });
}

/// matmulIntDot on AMX: A's unbiased int8 rows (padded to whole tiles with
/// zeros) by the panels, a block of K (two tiles' 64 values) at a time;
/// each block's int32 sums, less an int4 weight's bias (kBias times the
/// block's sum of A), are scaled and added up in order as in
/// dotRowsVnni512. An int8 weight's quads are tile rows as packed (tdpbssd);
/// an int4 weight's are unpacked first (UnpackedPanels; tdpbsud, the
/// weight's biased nibbles unsigned).
template <bool I4>
void matmulIntDotAmx(const Matmul &p, const DotPanels &d,
                     const QuantizedRows &qa, const uint8_t *packed,
                     const float *scales, float *cb, bool parallel) {
  constexpr int64_t kCols = intdot::kCols;
  static_assert(intdot::quadBytes(false) == amx::kRowBytes &&
                    kABlock == 2 * amx::kRowBytes,
                "a quad is a tile row, a block two tiles of K");
  const int64_t quadsPerTile = amx::kRows;
  // The B each unit reads: its panels, and the distance between the two.
  const int64_t bStride =
      I4 ? d.blocks * d.quadsPerBlock() * amx::kRowBytes : d.panelBytes();
  forEachUnit<IntDotScratch>(
      p.m, d.panels, parallel, /*panelsFirst=*/I4,
      [&](int64_t i0, int64_t pn, IntDotScratch &scratch) {
        int64_t rows = std::min(kAmxUnitRows, p.m - i0);
        int64_t cols = std::min(2 * kCols, p.n - pn * kCols);
        int64_t stride = cols > kCols ? 2 * kCols : kCols;
        alignas(64) int32_t sums[kAmxUnitRows * 2 * kCols];
        alignas(64) float out[kAmxUnitRows * 2 * kCols];
        const uint8_t *panels = packed + size_t(pn) * d.panelBytes();
        if constexpr (I4)
          panels = scratch.unpacked.get(d, packed, pn);
        amx::withUnit(rows, cols, [&](auto tiles) {
          using T = decltype(tiles);
          for (int64_t g = 0; g < d.blocks; ++g) {
            T::zero();
            for (int64_t t = 0; t < 2; ++t) {
              const int8_t *a =
                  qa.values + i0 * qa.stride + g * kABlock + t * 64;
              const uint8_t *b =
                  panels +
                  (g * d.quadsPerBlock() + t * quadsPerTile) * amx::kRowBytes;
              T::load(a, qa.stride, b, bStride);
              T::template dot<I4 ? amx::Product::S8U8 : amx::Product::S8S8>();
            }
            T::store(sums);
            // The panels' scales: an int8 weight's one per column, an int4
            // weight's per column and block.
            __m512 sb[2];
            for (int h = 0; h < 2; ++h)
              sb[h] = pn + h < d.panels
                          ? _mm512_loadu_ps(
                                scales +
                                ((pn + h) * p.groups() + (I4 ? g : 0)) * kCols)
                          : _mm512_setzero_ps();
            for (int64_t r = 0; r < rows; ++r) {
              size_t at = size_t((i0 + r) * qa.blocks + g);
              __m512 sa = _mm512_set1_ps(qa.scales[at]);
              __m512i bias =
                  _mm512_set1_epi32(I4 ? intdot::kBias * qa.sums[at] : 0);
              for (int64_t h = 0; h * kCols < cols; ++h) {
                float *o = out + r * stride + h * kCols;
                __m512 dot = _mm512_cvtepi32_ps(_mm512_sub_epi32(
                    _mm512_load_si512(sums + r * stride + h * kCols), bias));
                __m512 scaled = _mm512_mul_ps(dot, _mm512_mul_ps(sa, sb[h]));
                _mm512_store_ps(
                    o,
                    g == 0 ? scaled : _mm512_add_ps(_mm512_load_ps(o), scaled));
              }
            }
          }
        });
        storeUnit(out, stride, rows, cols, cb + i0 * p.cs[1] + pn * kCols,
                  p.cs[1], p.accumulate);
      });
}
#endif

/// Batch element `bt` of a product with A quantized too
/// (TFC_UK_QUANTIZE_A8): the threads split B's panels, and each runs all
/// rows of A through its panel, four at a time (with 512-bit VNNI:
/// matmulIntDotVnni512).
void matmulIntDot(const Matmul &p, int64_t bt, bool parallel) {
  DotPanels d(p);
  const auto *packed =
      static_cast<const uint8_t *>(packedWeights.get(p, bt, d.panels));
  const float *scales = d.scales(p, packed);
  // This thread's buffer (a batch of small products runs on several
  // threads at once), read by all the threads below.
  static thread_local QuantizedRows rows;
#ifdef TFC_UK_AMX
  if (p.m >= (d.i4 ? kAmxMinRowsInt4 : kAmxMinRowsInt8) && amx::enabled()) {
    rows.quantize(p, bt, parallel, /*biased=*/false, amx::kRows);
    float *cb = p.c + bt * p.cs[0];
    if (d.i4)
      matmulIntDotAmx<true>(p, d, rows, packed, scales, cb, parallel);
    else
      matmulIntDotAmx<false>(p, d, rows, packed, scales, cb, parallel);
    return;
  }
#endif
  rows.quantize(p, bt, parallel, intdot::kVnni && !d.i4);
  const QuantizedRows &qa = rows;
  float *cb = p.c + bt * p.cs[0];
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if (d.i4)
    matmulIntDotVnni512<true>(p, d, qa, packed, scales, cb, parallel);
  else
    matmulIntDotVnni512<false>(p, d, qa, packed, scales, cb, parallel);
#else
  auto run = [&](auto i4) {
    constexpr bool I4 = decltype(i4)::value;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t pn = 0; pn < d.panels; ++pn) {
      const uint8_t *panel = packed + size_t(pn) * d.panelBytes();
      const float *bScales = scales + pn * p.groups() * intdot::kCols;
      const int32_t *bSums =
          d.sums ? d.columnSums(p, packed) + pn * d.blocks * intdot::kCols
                 : nullptr;
      float *c = cb + pn * intdot::kCols;
      int64_t cols = std::min(intdot::kCols, p.n - pn * intdot::kCols);
      int64_t i0 = 0;
      for (; i0 + 4 <= p.m; i0 += 4)
        dotRows<4, I4>(p, d, qa, panel, bScales, bSums, c, i0, cols);
      switch (p.m - i0) {
      case 3:
        dotRows<3, I4>(p, d, qa, panel, bScales, bSums, c, i0, cols);
        break;
      case 2:
        dotRows<2, I4>(p, d, qa, panel, bScales, bSums, c, i0, cols);
        break;
      case 1:
        dotRows<1, I4>(p, d, qa, panel, bScales, bSums, c, i0, cols);
        break;
      }
    }
  };
  if (d.i4)
    run(std::true_type());
  else
    run(std::false_type());
#endif
}

#ifdef TFC_UK_BF16DOT
using tfc::uk::dpbf16;

/// R rows of C for P (1 or 2) adjacent panels of Bf16Panels over `n` of
/// their pairs: A's rows as bf16 pairs from `a` (row stride `aStride`
/// words), the first panel's pairs from `b` and the second's `bStride`
/// words after them, into C's rows from `c` (stride `cStride`, the panels'
/// first `cols` columns), added to them when `accumulate`. Two sets of sums
/// (two panels, or one panel's even and odd pairs): enough independent
/// vdpbf16ps chains, and two panels take two loads of B per 2R products.
template <int R, int P>
void bf16Rows(const uint32_t *a, int64_t aStride, const uint32_t *b,
              int64_t bStride, int64_t n, float *c, int64_t cStride,
              int64_t cols, bool accumulate) {
  constexpr int64_t kCols = Bf16Panels::kDotCols;
  __m512 acc[2][R];
  for (int r = 0; r < R; ++r)
    acc[0][r] = acc[1][r] = _mm512_setzero_ps();
  if constexpr (P == 2) {
    for (int64_t kp = 0; kp < n; ++kp) {
      __m512i b0 = _mm512_loadu_si512(b + kp * kCols);
      __m512i b1 = _mm512_loadu_si512(b + bStride + kp * kCols);
      for (int r = 0; r < R; ++r) {
        __m512i av = _mm512_set1_epi32(int(a[r * aStride + kp]));
        acc[0][r] = dpbf16(acc[0][r], av, b0);
        acc[1][r] = dpbf16(acc[1][r], av, b1);
      }
    }
  } else {
    auto pair = [&](int64_t kp, __m512(&into)[R]) {
      __m512i bv = _mm512_loadu_si512(b + kp * kCols);
      for (int r = 0; r < R; ++r)
        into[r] =
            dpbf16(into[r], _mm512_set1_epi32(int(a[r * aStride + kp])), bv);
    };
    int64_t kp = 0;
    for (; kp + 2 <= n; kp += 2) {
      pair(kp, acc[0]);
      pair(kp + 1, acc[1]);
    }
    if (kp < n)
      pair(kp, acc[0]);
    for (int r = 0; r < R; ++r)
      acc[0][r] = _mm512_add_ps(acc[0][r], acc[1][r]);
  }
  for (int h = 0; h < P; ++h) {
    int64_t hc = std::min(kCols, cols - h * kCols);
    __mmask16 mask = __mmask16((1u << hc) - 1);
    for (int r = 0; r < R; ++r) {
      float *cr = c + r * cStride + h * kCols;
      __m512 sum = acc[h][r];
      if (accumulate)
        sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mask, cr));
      _mm512_mask_storeu_ps(cr, mask, sum);
    }
  }
}

/// Batch element `bt` of a product on bf16 dot products (bf16Dot): A's rows
/// as bf16 pairs (its values are bf16: their high halves), then as the f32
/// kernel splits the work: few rows, the threads split B's panels; else
/// they split the rows in blocks, each running its block against every
/// panel, K in slices that stay in L1. Rows six at a time.
void matmulBf16Dot(const Matmul &p, int64_t bt, bool parallel) {
  Bf16Panels d(p);
  static thread_local std::vector<float> bStorage;
  const uint32_t *packed;
  if (p.constantB) {
    packed = static_cast<const uint32_t *>(packedWeights.get(p, bt, 0));
  } else {
    void *scratch = alignedScratch(bStorage, d.bytes() / 4);
    packBBf16(p, bt, scratch, parallel);
    packed = static_cast<const uint32_t *>(scratch);
  }
#ifdef TFC_UK_AMX
  bool amxRun = p.m >= kAmxMinRowsBf16 && amx::enabled();
  // A's bf16 rows are the tiles' pairs as they are where they fill whole
  // tiles: rows in place, whole tiles of rows and of K (32 values).
  if (amxRun && p.aBits && p.as[2] == 1 && p.as[1] % 2 == 0 &&
      p.m % amx::kRows == 0 && p.k % (2 * amx::kRows) == 0) {
    const uint16_t *a = p.aBits + bt * p.as[0];
    matmulBf16Amx(p, d, reinterpret_cast<const uint32_t *>(a), p.as[1] / 2,
                  packed, p.c + bt * p.cs[0], parallel);
    return;
  }
#else
  constexpr bool amxRun = false;
#endif
  // For AMX whole tiles of rows (zero rows after A's; each row fills its
  // pairs, those past K with zeros).
  int64_t aRows = amxRun ? roundUp(p.m, 16) : p.m;
  static thread_local std::vector<float> aStorage;
  auto *aPairs = reinterpret_cast<uint32_t *>(
      alignedScratch(aStorage, size_t(aRows * d.pairs)));
  std::memset(aPairs + p.m * d.pairs, 0, size_t((aRows - p.m) * d.pairs) * 4);
  // On the threads for many rows only: a parallel region costs more than a
  // few rows' conversion.
#pragma omp parallel for schedule(static) if (parallel && p.m >= 64)
  for (int64_t i = 0; i < p.m; ++i) {
    uint32_t *pairs = aPairs + i * d.pairs;
    if (p.aBits) {
      // A's bf16 bits: in order, a row's pairs are its words (an odd K's
      // last one, and those after K, zero in the high half).
      const uint16_t *row = p.aBits + bt * p.as[0] + i * p.as[1];
      if (p.as[2] == 1) {
        for (int64_t l = 0; l < 2 * d.pairs; l += 32) {
          int64_t n = std::clamp<int64_t>(p.k - l, 0, 32);
          __m512i x = _mm512_maskz_loadu_epi16(
              __mmask32(n == 32 ? ~0u : (1u << n) - 1), row + l);
          _mm512_mask_storeu_epi32(pairs + l / 2,
                                   tfc::uk::firstLanes(d.pairs - l / 2), x);
        }
        continue;
      }
      for (int64_t kp = 0; kp < d.pairs; ++kp) {
        auto bits = [&](int64_t l) -> uint32_t {
          return l < p.k ? row[l * p.as[2]] : 0;
        };
        pairs[kp] = bits(2 * kp) | bits(2 * kp + 1) << 16;
      }
      continue;
    }
    const float *ab = p.a + bt * p.as[0];
    const float *row = ab + i * p.as[1];
    if (p.as[2] == 1) {
      // Rows in place: 32 values (16 pairs) at a time.
      for (int64_t l = 0; l < p.k; l += 32) {
        __m512 x0 =
            _mm512_maskz_loadu_ps(tfc::uk::firstLanes(p.k - l), row + l);
        __m512 x1 = _mm512_maskz_loadu_ps(tfc::uk::firstLanes(p.k - l - 16),
                                          row + l + 16);
        _mm512_mask_storeu_epi32(aPairs + i * d.pairs + l / 2,
                                 tfc::uk::firstLanes(d.pairs - l / 2),
                                 tfc::uk::bf16PairsInOrder(x0, x1));
      }
      continue;
    }
    for (int64_t kp = 0; kp < d.pairs; ++kp) {
      auto bits = [&](int64_t l) -> uint32_t {
        if (l >= p.k)
          return 0;
        uint32_t x;
        std::memcpy(&x, ab + i * p.as[1] + l * p.as[2], 4);
        return x >> 16;
      };
      aPairs[i * d.pairs + kp] = bits(2 * kp) | bits(2 * kp + 1) << 16;
    }
  }
  float *cb = p.c + bt * p.cs[0];
#ifdef TFC_UK_AMX
  if (amxRun) {
    matmulBf16Amx(p, d, aPairs, d.pairs, packed, cb, parallel);
    return;
  }
#endif
  constexpr int64_t kCols = Bf16Panels::kDotCols;
  // Eight rows by two panels: 16 independent vdpbf16ps chains. Its latency
  // is 6 cycles on a Zen 5 at two a cycle, which 12 chains (six rows)
  // barely cover: eight ran the bf16 GEMM 8-12% faster on one thread and
  // 10-25% on two (760-850 GFLOP/s, about 90% of the vdpbf16ps peak).
  constexpr int kRows = 8;
  // Rows [i0, i0 + rows) of panels pn and pn + 1 (when there is one) over
  // pairs [kp0, kp0 + n).
  auto block = [&](int64_t i0, int64_t rows, int64_t pn, int64_t kp0, int64_t n,
                   bool accumulate) {
    const uint32_t *b = packed + (pn * d.pairs + kp0) * kCols;
    int64_t cols = std::min(2 * kCols, p.n - pn * kCols);
    auto run = [&](auto r, int64_t i) {
      auto go = [&](auto panels) {
        bf16Rows<decltype(r)::value, decltype(panels)::value>(
            aPairs + i * d.pairs + kp0, d.pairs, b, d.pairs * kCols, n,
            cb + i * p.cs[1] + pn * kCols, p.cs[1], cols, accumulate);
      };
      if (cols > kCols)
        go(std::integral_constant<int, 2>());
      else
        go(std::integral_constant<int, 1>());
    };
    int64_t i = i0, end = i0 + rows;
    for (; i + kRows <= end; i += kRows)
      run(std::integral_constant<int, kRows>(), i);
    tfc::uk::withRows<kRows - 1>(end - i, [&](auto r) { run(r, i); });
  };
  int64_t threads = parallel ? omp_get_max_threads() : 1;
  if (p.m < 2 * kRows * threads) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t pn = 0; pn < d.panels; pn += 2)
      block(0, p.m, pn, 0, d.pairs, p.accumulate);
    return;
  }
  // Row tasks as the f32 kernel's; slices of 128 pairs: 8 KiB of a panel.
  constexpr int64_t kSlicePairs = 128;
  RowTasks tasks(p.m, threads, kRows);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t j = 0; j < tasks.count; ++j) {
    int64_t i0 = tasks.begin(j), rows = tasks.begin(j + 1) - i0;
    for (int64_t pn = 0; pn < d.panels; pn += 2)
      for (int64_t kp0 = 0; kp0 < d.pairs; kp0 += kSlicePairs)
        block(i0, rows, pn, kp0, std::min(kSlicePairs, d.pairs - kp0),
              p.accumulate || kp0 > 0);
  }
}
#endif

/// Rows [0, kc) of a slice of a quantized panel (int8; int4 of one
/// group) times their columns' scales, as rows of kNR f32 at `to`: a
/// product of many rows runs the f32 kernel on it, block after block of
/// kMR rows, where each block would widen and scale the same values again
/// (LLaMA prefill, 128 tokens, int8 weights: 0.75x the f32 build's speed
/// before, docs/performance/reports/2026-12-03-xeon-amx.md). Each value
/// rounds once, where the widening kernel rounds each column's sum once
/// more: within the same bound.
template <BType T>
void dequantizeSlice(const int8_t *b, const float *scale, int64_t kc,
                     float *to) {
  using namespace tfc::uk;
  VecF s0 = vloadu(scale), s1 = vloadu(scale + kLanes);
  for (int64_t k = 0; k < kc; ++k) {
    VecF lo, hi;
    if constexpr (T == BType::I4) {
      vloadI4(reinterpret_cast<const uint8_t *>(b) + k * kLanes, lo, hi);
    } else {
      lo = vloadI8(b + k * kNR);
      hi = vloadI8(b + k * kNR + kLanes);
    }
    vstoreu(to + k * kNR, vmul(lo, s0));
    vstoreu(to + k * kNR + kLanes, vmul(hi, s1));
  }
}

/// Batch element `bt` of the product, on the threads if `parallel`.
void matmulOne(const Matmul &p, int64_t bt, bool parallel) {
  using namespace tfc::uk;
  if (p.quantizeA) {
    matmulIntDot(p, bt, parallel);
    return;
  }
#ifdef TFC_UK_BF16DOT
  if (bf16Dot(p)) {
    matmulBf16Dot(p, bt, parallel);
    return;
  }
#endif
  int64_t panels = (p.n + kNR - 1) / kNR;
  const float *ab = p.a + bt * p.as[0];
  float *cb = p.c + bt * p.cs[0];

  // The packing buffers live across calls (thread_local: a batch of small
  // products runs on several threads at once).
  static thread_local std::vector<float> bStorage;
  const void *packed;
  if (p.constantB) {
    packed = packedWeights.get(p, bt, panels);
  } else {
    float *scratch = alignedScratch(bStorage, size_t(panels * kNR * p.k));
    packB(p, bt, panels, scratch, parallel);
    packed = scratch;
  }
  withBType(p.panelType(), [&](auto type) {
    constexpr BType T = decltype(type)::value;
    using E = PanelElement<T>;
    const E *panels0 = static_cast<const E *>(packed);
    const float *scales =
        panelScales(p, panels, static_cast<const char *>(packed));
    // B larger than L2 streams from farther out: then the threads running
    // rows prefetch each next slice of B (the layout puts it right after
    // this one) while they run this one. Measured with AVX2 on one thread:
    // 128x768x2048 and 128x2048x768 went from 76 to 81 GFLOP/s, 83 with B
    // that stays in L2; 128x768x256 on two threads (B of 768 KiB) ran 5%
    // slower with it.
    constexpr int64_t row = kPanelRow<T>;
    const E *panelsEnd = panels0 + panels * row * p.k;
    bool prefetchB = size_t(panelsEnd - panels0) * sizeof(E) > kL2Bytes;
    // Slices of K: kKC deep, an int4 B's groups (its scales change from
    // one to the next).
    constexpr int64_t kSlice = T == BType::I4 ? kI4Group : kKC;
    // The kernel on rows [i0, i0 + rows) of C, panel pn, every K slice; A
    // of those rows at `a` (strided) or packed by packRows slice by slice
    // at `a + k0 * rows`.
    auto panel = [&](auto layout, const float *a, int64_t i0, int64_t rows,
                     int64_t pn) {
      constexpr ARows A = decltype(layout)::value;
      int64_t cols = std::min(kNR, p.n - pn * kNR);
      for (int64_t k0 = 0; k0 < p.k; k0 += kSlice) {
        int64_t kc = std::min(kSlice, p.k - k0);
        const E *b = panels0 + (pn * p.k + k0) * row;
        Tile<2> t{A == ARows::Packed ? a + k0 * rows : a + k0 * p.as[2],
                  p.as[1],
                  p.as[2],
                  nullptr,
                  kc,
                  cb + i0 * p.cs[1] + pn * kNR,
                  p.cs[1],
                  {firstLanes(cols), firstLanes(cols - kLanes)},
                  /*allCols=*/cols == kNR,
                  /*accumulate=*/p.accumulate || k0 > 0,
                  nullptr};
        // The next slice: this panel's, or the next panel's first.
        const E *next = b + kc * row;
        int64_t nextDepth =
            std::min(kSlice, k0 + kc < p.k ? p.k - k0 - kc : p.k);
        auto product = [&](auto panelType) {
          constexpr BType PT = decltype(panelType)::value;
          if (A == ARows::Packed && prefetchB && next < panelsEnd) {
            StoreCPrefetching::Run run{
                reinterpret_cast<const char *>(next),
                int64_t(nextDepth * row * sizeof(E) / 64)};
            blockProduct<2, 1, A, PT>(t, rows, StoreCPrefetching{&run});
          } else {
            blockProduct<2, 1, A, PT>(t, rows);
          }
        };
        using F32Panel = std::integral_constant<BType, BType::F32>;
        if constexpr (T == BType::F32) {
          t.b = b;
        } else if constexpr (T == BType::I8 || T == BType::I4) {
          const float *scale =
              scales + (pn * p.groups() + k0 / p.group()) * kNR;
          if (rows > kMR) {
            // More than one block of rows: the slice is widened and scaled
            // once, and every block runs the f32 kernel on it.
            static thread_local std::vector<float> sliceStorage;
            float *slice = alignedScratch(sliceStorage, size_t(kSlice * kNR));
            dequantizeSlice<T>(b, scale, kc, slice);
            t.b = slice;
            product(F32Panel());
            continue;
          }
          t.b8 = b;
          t.bScale = scale;
        } else {
          t.b16 = b;
        }
        product(type);
      }
    };
    using Strided = std::integral_constant<ARows, ARows::Strided>;
    using Packed = std::integral_constant<ARows, ARows::Packed>;

    int64_t threads = parallel ? omp_get_max_threads() : 1;
    if (p.m < 2 * kMR * threads) {
      // Few rows: the threads split the panels, and A is read in place.
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t pn = 0; pn < panels; ++pn)
        panel(Strided(), ab, 0, p.m, pn);
      return;
    }
    // The threads split the rows, in tasks of whole kernel blocks, at most
    // about kMC rows (RowTasks). Each packs the A of its task into its own
    // buffer and runs it against every panel: no
    // thread reads what another wrote (a transfer between cores costs more
    // than the packing), and B panels stay shared, read-only.
    RowTasks tasks(p.m, threads, kMR);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t j = 0; j < tasks.count; ++j) {
      int64_t i0 = tasks.begin(j), rows = tasks.begin(j + 1) - i0;
      static thread_local std::vector<float> aStorage;
      float *pa = alignedScratch(aStorage, size_t(rows * p.k));
      for (int64_t k0 = 0; k0 < p.k; k0 += kSlice)
        packRows(ab + i0 * p.as[1] + k0 * p.as[2], p.as[1], p.as[2], rows,
                 std::min(kSlice, p.k - k0), pa + k0 * rows);
      for (int64_t pn = 0; pn < panels; ++pn)
        panel(Packed(), pa, i0, rows, pn);
    }
  });
}

void matmulPacked(const Matmul &p) {
  double flops = 2.0 * double(p.m) * double(p.n) * double(p.k);
  double bElements = double(p.n) * double(p.k);
  // Whether `products` of them make enough work for the threads.
  auto worthThreads = [&](int64_t products) {
    return flops * double(products) >= kParallelFlops ||
           bElements * double(products) >= kParallelElements;
  };
  if (worthThreads(1) || p.batch == 1) {
    // Large products on all threads each; small lone ones on this one.
    for (int64_t bt = 0; bt < p.batch; ++bt)
      matmulOne(p, bt, worthThreads(1));
    return;
  }
  // Many small products: the batch elements spread over the threads when
  // there is enough work in all of them together.
#pragma omp parallel for schedule(static) if (worthThreads(p.batch))
  for (int64_t bt = 0; bt < p.batch; ++bt)
    matmulOne(p, bt, false);
}

#endif // TFC_UK_VECTOR

/// p with A's bf16 bits (aBits) widened to f32 in `storage`, [batch, m, k]
/// in order.
Matmul withF32A(const Matmul &p, std::vector<float> &storage) {
  Matmul q = p;
  int64_t size = p.batch * p.m * p.k;
  storage.resize(size_t(size));
  float *a = storage.data();
#pragma omp parallel for collapse(2) schedule(static) if (size >= (1 << 16))
  for (int64_t bt = 0; bt < p.batch; ++bt)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t l = 0; l < p.k; ++l)
        a[(bt * p.m + i) * p.k + l] = tfc::uk::bf16Value(
            p.aBits[bt * p.as[0] + i * p.as[1] + l * p.as[2]]);
  q.a = a;
  q.aBits = nullptr;
  q.as[0] = p.m * p.k;
  q.as[1] = p.k;
  q.as[2] = 1;
  return q;
}

void run(const Matmul &p) {
  if (p.m == 0 || p.n == 0 || p.k == 0 || p.batch == 0)
    return;
#ifdef TFC_UK_VECTOR
  if (p.cs[2] == 1) {
    // Only the bf16 dot products read A's bf16 bits as they are.
    if (p.aBits && !bf16Dot(p)) {
      static thread_local std::vector<float> wide;
      matmulPacked(withF32A(p, wide));
    } else {
      matmulPacked(p);
    }
    return;
  }
#endif
  if (p.aBits) {
    std::vector<float> wide;
    matmulReference(withF32A(p, wide));
    return;
  }
  matmulReference(p);
}

} // namespace

extern "C" void tfc_uk_forget_packed_weights(void) {
#ifdef TFC_UK_VECTOR
  packedWeights.clear();
#endif
}

extern "C" const char *tfc_uk_packed_format(void) {
#ifdef TFC_UK_VECTOR
  // Everything that decides the bytes a key packs into: the panels' width,
  // the integer dot products' form (VNNI's panels carry column sums), and
  // whether bf16 pairs are padded to AMX tiles. Bump the version with any
  // change to a packing routine or to quantizeSymmetric.
  static const std::string format =
      "tfc-packed-1 lanes=" + std::to_string(tfc::uk::kLanes) +
      " vnni=" + std::to_string(int(intdot::kVnni)) +
      " bf16dot=" + std::to_string(int(kBf16Dot)) +
      " amx=" + std::to_string(int(tfc_uk_uses_amx() != 0));
  return format.c_str();
#else
  return "";
#endif
}

extern "C" int32_t tfc_uk_packed_weights(tfc_packed_weight *out,
                                         int32_t capacity) {
#ifdef TFC_UK_VECTOR
  return packedWeights.list(out, capacity);
#else
  return 0;
#endif
}

extern "C" int32_t tfc_uk_adopt_packed_weight(const tfc_packed_weight *w) {
#ifdef TFC_UK_VECTOR
  return w && packedWeights.adopt(*w) ? 0 : -1;
#else
  return -1;
#endif
}

extern "C" int32_t tfc_uk_uses_amx(void) {
#ifdef TFC_UK_AMX
  return tfc::uk::amx::enabled() ? 1 : 0;
#else
  return 0;
#endif
}

/// The product of memref descriptors a, b, c (rank 2 or 3; rank 2 is a
/// batch of one) with B's elements of type `btype`.
template <int Rank, typename AElement, typename BElement>
void runDescriptors(MemRef<Rank, AElement> *a, MemRef<Rank, BElement> *b,
                    MemRef<Rank> *c, int32_t flags, BType btype) {
  // A of f32, or of bf16 bits (whose values are then bf16 values).
  constexpr bool aBits = std::is_same_v<AElement, uint16_t>;
  constexpr int d = Rank - 2; // the first matrix dimension
  bool constantB = (flags & TFC_UK_CONSTANT_B) != 0;
  Quant quant = !constantB                          ? Quant::None
                : (flags & TFC_UK_QUANTIZE_I8) != 0 ? Quant::I8
                : (flags & TFC_UK_QUANTIZE_I4) != 0 ? Quant::I4
                                                    : Quant::None;
  Matmul p{(flags & TFC_UK_ACCUMULATE) != 0,
           constantB,
           quant,
           quant != Quant::None && (flags & TFC_UK_QUANTIZE_A8) != 0,
           aBits || (flags & TFC_UK_A_BF16) != 0,
           btype,
           Rank == 3 ? c->sizes[0] : 1,
           c->sizes[d],
           c->sizes[d + 1],
           a->sizes[d + 1],
           nullptr,
           b->data(),
           c->data(),
           {},
           {},
           {}};
  if constexpr (aBits)
    p.aBits = a->data();
  else
    p.a = a->data();
  for (int i = 0; i < Rank; ++i) {
    p.as[3 - Rank + i] = a->strides[i];
    p.bs[3 - Rank + i] = b->strides[i];
    p.cs[3 - Rank + i] = c->strides[i];
  }
  run(p);
}

// The entry points of ukernels.h: rank 3 (a batch) or 2, A of f32 or bf16
// and B of f32, f16 or bf16 (16-bit elements as their bits, uint16_t).
#define TFC_MATMUL_ENTRY(NAME, RANK, A_ELEMENT, B_ELEMENT, B_TYPE)             \
  extern "C" void _mlir_ciface_##NAME(MemRef<RANK, A_ELEMENT> *a,              \
                                      MemRef<RANK, B_ELEMENT> *b,              \
                                      MemRef<RANK> *c, int32_t flags) {        \
    runDescriptors(a, b, c, flags, BType::B_TYPE);                             \
  }
TFC_MATMUL_ENTRY(tfc_uk_batch_matmul_f32, 3, float, float, F32)
TFC_MATMUL_ENTRY(tfc_uk_matmul_f32, 2, float, float, F32)
TFC_MATMUL_ENTRY(tfc_uk_batch_matmul_f32_f16, 3, float, uint16_t, F16)
TFC_MATMUL_ENTRY(tfc_uk_matmul_f32_f16, 2, float, uint16_t, F16)
TFC_MATMUL_ENTRY(tfc_uk_batch_matmul_f32_bf16, 3, float, uint16_t, BF16)
TFC_MATMUL_ENTRY(tfc_uk_matmul_f32_bf16, 2, float, uint16_t, BF16)
TFC_MATMUL_ENTRY(tfc_uk_batch_matmul_bf16_bf16, 3, uint16_t, uint16_t, BF16)
TFC_MATMUL_ENTRY(tfc_uk_matmul_bf16_bf16, 2, uint16_t, uint16_t, BF16)
#undef TFC_MATMUL_ENTRY
