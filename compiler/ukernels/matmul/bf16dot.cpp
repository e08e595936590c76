//===- bf16dot.cpp - Matmuls of bf16 values on bf16 dot products ----------===//
//
// A bf16 B times an A of bf16 values (TFC_UK_A_BF16, or A stored as bf16)
// runs on bf16 dot products where AVX-512 BF16 is (vdpbf16ps: twice the
// FMA's products per instruction), B packed in pairs of rows for them
// (Bf16Panels), or on AMX tiles where this process may use them (amx.cpp).
//
//===----------------------------------------------------------------------===//

#include "matmul/matmul.h"

#include <omp.h>

#ifdef TFC_UK_BF16DOT

namespace tfc::uk::matmul {
namespace {

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

} // namespace

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
    packed = static_cast<const uint32_t *>(packedWeight(p, bt, 0));
  } else {
    void *scratch = alignedFloats(bStorage, d.bytes() / 4);
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
      alignedFloats(aStorage, size_t(aRows * d.pairs)));
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
          _mm512_mask_storeu_epi32(pairs + l / 2, firstLanes(d.pairs - l / 2),
                                   x);
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
        __m512 x0 = _mm512_maskz_loadu_ps(firstLanes(p.k - l), row + l);
        __m512 x1 =
            _mm512_maskz_loadu_ps(firstLanes(p.k - l - 16), row + l + 16);
        _mm512_mask_storeu_epi32(aPairs + i * d.pairs + l / 2,
                                 firstLanes(d.pairs - l / 2),
                                 bf16PairsInOrder(x0, x1));
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
    withRows<kRows - 1>(end - i, [&](auto r) { run(r, i); });
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

} // namespace tfc::uk::matmul

#endif // TFC_UK_BF16DOT
