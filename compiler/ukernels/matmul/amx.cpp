//===- amx.cpp - The matmul's dot products on AMX tiles -------------------===//
//
// Where the kernels are built with AMX (amx.h) and this process may use
// them, the bf16 dot products (bf16dot.cpp) and the int8 activations times
// int8 or int4 weights (intdot.cpp) of enough rows run on tiles: units of
// up to two tiles of rows by two 16-column panels.
//
//===----------------------------------------------------------------------===//

#include "matmul/matmul.h"

#ifdef TFC_UK_AMX

namespace tfc::uk::matmul {
namespace {

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
      __mmask16 lanes = firstLanes(cols - h * 16);
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
  std::vector<float> storage; // 64-byte aligned through alignedFloats
  int64_t pn = -1;            // the first panel unpacked
  uint8_t *bytes = nullptr;

  /// Panels pn and pn + 1 (if there is one) of `packed`, unpacked.
  const uint8_t *get(const DotPanels &d, const uint8_t *packed, int64_t pn) {
    if (pn == this->pn)
      return bytes;
    this->pn = pn;
    int64_t quads = d.blocks * d.quadsPerBlock();
    bytes = reinterpret_cast<uint8_t *>(
        alignedFloats(storage, size_t(2 * quads * amx::kRowBytes) / 4));
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

} // namespace

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

template void matmulIntDotAmx<false>(const Matmul &, const DotPanels &,
                                     const QuantizedRows &, const uint8_t *,
                                     const float *, float *, bool);
template void matmulIntDotAmx<true>(const Matmul &, const DotPanels &,
                                    const QuantizedRows &, const uint8_t *,
                                    const float *, float *, bool);

} // namespace tfc::uk::matmul

#endif // TFC_UK_AMX
