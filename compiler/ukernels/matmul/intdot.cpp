//===- intdot.cpp - Matmuls with int8 activations on integer dot products -===//
//
// TFC_UK_QUANTIZE_A8: A's rows quantized in blocks (QuantizedRows) times a
// weight quantized to int8 or int4 and packed for byte dot products
// (DotPanels), each block's sums exact in int32 and scaled once: with
// intdot.h's kernels (AVX2 or VNNI, 256 bits), with 512-bit VNNI where the
// kernels have it, on AMX tiles where this process may use them (amx.cpp).
//
//===----------------------------------------------------------------------===//

#include "matmul/matmul.h"

#include <omp.h>

#ifdef TFC_UK_VECTOR

namespace tfc::uk::matmul {
namespace {

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
    __mmask16 lanes = firstLanes(cols - h * kCols);
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
      withRows<kRows - 1>(rEnd - i, [&](auto height) {
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

} // namespace

/// Batch element `bt` of a product with A quantized too
/// (TFC_UK_QUANTIZE_A8): the threads split B's panels, and each runs all
/// rows of A through its panel, four at a time (with 512-bit VNNI:
/// matmulIntDotVnni512).
void matmulIntDot(const Matmul &p, int64_t bt, bool parallel) {
  DotPanels d(p);
  const auto *packed =
      static_cast<const uint8_t *>(packedWeight(p, bt, d.panels));
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

} // namespace tfc::uk::matmul

#endif // TFC_UK_VECTOR
