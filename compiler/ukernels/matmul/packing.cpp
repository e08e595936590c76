//===- packing.cpp - B packed into panels for the matmul kernels ----------===//
//
// Every layout of B the kernels read: kNR-column panels of f32, 16-bit or
// quantized values (packB, packBQuantized), the panels of the integer dot
// products (packBDot) and the pairs of rows of the bf16 dot products
// (packBBf16). A weight is packed once (packed_weights.cpp), any other B
// on every call.
//
//===----------------------------------------------------------------------===//

#include "matmul/matmul.h"

#ifdef TFC_UK_VECTOR

namespace tfc::uk::matmul {
namespace {

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
                quantizeSymmetric(static_cast<const char *>(p.b) +
                                      (p.bOffset(bt) + l0 + col * p.bs[2]) *
                                          int64_t(sizeof(float)),
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
  transpose16(r);
  for (int i = 0; i < 16; ++i)
    _mm512_storeu_ps(out + i * dstStride * 4, r[i]);
}
#endif

} // namespace

void packBQuantized(const Matmul &p, int64_t bt, int64_t panels, void *packed) {
  auto *bytes = static_cast<uint8_t *>(packed);
  bool i4 = p.quant == Quant::I4;
  size_t rowBytes = panelRowBytes(p.panelType());
  // Every byte of the panels is written (columns past N as 0).
  constexpr int64_t kHalf = kLanes;
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

void packBBf16(const Matmul &p, int64_t bt, void *packed, bool parallel) {
  Bf16Panels d(p);
  auto *words = static_cast<uint32_t *>(packed);
  // B's bits, at any address (loadUnaligned).
  const char *src = static_cast<const char *>(p.b) +
                    p.bOffset(bt) * int64_t(sizeof(uint16_t));
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
        transposeWords16(src + (pn * kCols * p.bs[2] + 2 * vectorPairs) * 2,
                         p.bs[2] / 2,
                         words + (pn * d.pairs + vectorPairs) * kCols, kCols);
#endif
    for (int64_t j = 0; j < kCols; ++j) {
      int64_t col = pn * kCols + j;
      uint32_t *to = words + pn * d.pairs * kCols + j;
      int64_t kp = vectorPairs;
      if (col < p.n && columnWords) {
        const char *column = src + col * p.bs[2] * 2;
        for (; kp < p.k / 2; ++kp)
          to[kp * kCols] = loadUnaligned<uint32_t>(column, kp);
      }
      auto at = [&](int64_t l) -> uint32_t {
        return col < p.n && l < p.k
                   ? loadUnaligned<uint16_t>(src, l * p.bs[1] + col * p.bs[2])
                   : 0;
      };
      for (; kp < d.pairs; ++kp)
        to[kp * kCols] = at(2 * kp) | at(2 * kp + 1) << 16;
    }
  }
}

void packB(const Matmul &p, int64_t bt, int64_t panels, void *packed,
           bool parallel) {
  withBType(p.btype, [&](auto type) {
    constexpr BType T = decltype(type)::value;
    using E = PanelElement<T>;
    // B at any address (loadUnaligned).
    const char *src =
        static_cast<const char *>(p.b) + p.bOffset(bt) * int64_t(sizeof(E));
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
                transposeWords16(src + ((pn * kNR + h) * p.bs[2] + l0) *
                                           int64_t(sizeof(E)),
                                 p.bs[2], dst + l0 * kNR + h, kNR);
#endif
        constexpr int64_t kRows = 64;
        for (; l0 < p.k; l0 += kRows) {
          int64_t l1 = std::min(p.k, l0 + kRows);
          for (int64_t j = 0; j < kNR; ++j) {
            const char *column =
                src + (pn * kNR + j) * p.bs[2] * int64_t(sizeof(E));
            for (int64_t l = l0; l < l1; ++l)
              dst[l * kNR + j] = j < cols ? loadUnaligned<E>(column, l) : E(0);
          }
        }
      } else {
        for (int64_t l = 0; l < p.k; ++l)
          for (int64_t j = 0; j < kNR; ++j)
            dst[l * kNR + j] =
                j < cols ? loadUnaligned<E>(src, l * p.bs[1] +
                                                     (pn * kNR + j) * p.bs[2])
                         : E(0);
      }
    }
  });
}

} // namespace tfc::uk::matmul

#endif // TFC_UK_VECTOR
