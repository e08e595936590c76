//===- norms.cpp - Softmax, layer and RMS normalisation for the CPU -------===//
//
// Each row is read from memory once and written once; the second and third
// sweeps over a row hit the cache. Rows run in parallel.
//
//===----------------------------------------------------------------------===//

#include "simd.h"
#include "ukernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

using tfc::uk::MemRef;

namespace {

/// Outputs at least this large are written with non-temporal stores: they
/// cannot stay in cache anyway, and streaming skips reading each line before
/// writing it (as memcpy does), a third of the memory traffic.
constexpr int64_t kStreamBytes = 4 << 20;

#ifdef TFC_UK_VECTOR
using namespace tfc::uk;

/// The lanes `k` of a vector at x; `whole` (all lanes) takes a plain load:
/// AVX2's masked loads and stores (vmaskmovps) are slow on AMD cores.
inline VecF loadLanes(const float *x, LaneMask k, bool whole) {
  return whole ? vloadu(x) : vloadLanes(x, k);
}

/// Stores the lanes `k` of v at y; a whole aligned vector is streamed when
/// `stream` is set.
inline void storeLanes(float *y, LaneMask k, bool whole, VecF v, bool stream) {
  if (stream && whole &&
      reinterpret_cast<uintptr_t>(y) % (sizeof(float) * kLanes) == 0)
    vstream(y, v);
  else if (whole)
    vstoreu(y, v);
  else
    vstoreLanes(y, k, v);
}

/// Prefetches line `j` (in floats) of the next row into L2: while the last
/// sweeps over a row run from cache, memory would otherwise sit idle (a
/// long row outruns the hardware prefetcher's lookahead).
inline void prefetchNext(const float *next, int64_t j) {
  if (next)
    _mm_prefetch(reinterpret_cast<const char *>(next + j), _MM_HINT_T1);
}

/// The sum of the lanes of four accumulators.
inline float total(const VecF *acc) {
  return vreduceAdd(vadd(vadd(acc[0], acc[1]), vadd(acc[2], acc[3])));
}
#endif

/// The softmax of row x of n values into y: `stream` streams y's whole
/// aligned vectors; `next` (the following row, or null) is prefetched into
/// L2 meanwhile.
void softmaxRow(const float *x, float *y, int64_t n, bool stream,
                const float *next) {
#ifdef TFC_UK_VECTOR
  // Independent accumulators keep the max and sum chains off the critical
  // path; the row stays in L1 between the three sweeps.
  VecF mx[4];
  for (auto &m : mx)
    m = vset1(kNegInf);
  // Whole groups of four vectors (the accumulators stay in registers), then
  // the masked tail.
  int64_t j0 = 0;
  for (; j0 + 4 * kLanes <= n; j0 += 4 * kLanes)
    for (int v = 0; v < 4; ++v)
      mx[v] = vmax(mx[v], vloadu(x + j0 + kLanes * v));
  for (int64_t j = j0; j < n; j += kLanes) {
    LaneMask k = firstLanes(n - j);
    mx[0] = vselect(k, vmax(mx[0], vloadLanes(x + j, k)), mx[0]);
  }
  VecF negM = vset1(
      -(vreduceMax(vmax(vmax(mx[0], mx[1]), vmax(mx[2], mx[3]))) * kLog2e));
  VecF log2e = vset1(kLog2e);
  VecF sum[2] = {vzero(), vzero()};
  // Streaming: the exponentials wait in a row of scratch, not in y.
  static thread_local std::vector<float> scratch;
  float *e = y;
  if (stream) {
    // Half a page away from x in the cache's set index, so that the row and
    // its exponentials do not evict each other from L1 (rows of 4 KiB
    // multiples would otherwise map onto the same sets).
    if (scratch.size() < size_t(n) + 1024)
      scratch.resize(size_t(n) + 1024);
    uintptr_t gap = (reinterpret_cast<uintptr_t>(x) + 2048 -
                     reinterpret_cast<uintptr_t>(scratch.data())) %
                    4096;
    e = scratch.data() + gap / sizeof(float);
  }
  for (int64_t j = 0; j < n; j += 2 * kLanes)
    for (int v = 0; v < 2; ++v) {
      int64_t at = j + kLanes * v;
      prefetchNext(next, at);
      LaneMask k = firstLanes(n - at);
      bool whole = n - at >= kLanes;
      VecF ej = vexp2(vfmadd(loadLanes(x + at, k, whole), log2e, negM));
      if (!whole)
        ej = vselect(k, ej, vzero());
      storeLanes(e + at, k, whole, ej, /*stream=*/false);
      sum[v] = vadd(sum[v], ej);
    }
  VecF inv = vset1(1.0f / vreduceAdd(vadd(sum[0], sum[1])));
  for (int64_t j = 0; j < n; j += kLanes) {
    LaneMask k = firstLanes(n - j);
    bool whole = n - j >= kLanes;
    storeLanes(y + j, k, whole, vmul(loadLanes(e + j, k, whole), inv), stream);
  }
#else
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j)
    mx = std::fmax(mx, x[j]);
  float sum = 0;
  for (int64_t j = 0; j < n; ++j)
    sum += (y[j] = std::exp(x[j] - mx));
  for (int64_t j = 0; j < n; ++j)
    y[j] /= sum;
#endif
}

/// Row x of n values normalised into y (gamma g and beta b, gs and bs
/// apart); `stream` and `next` as softmaxRow's.
void layerNormRow(const float *x, float *y, int64_t n, bool stream,
                  const float *next, float eps, const float *g, int64_t gs,
                  const float *b, int64_t bs) {
#ifdef TFC_UK_VECTOR
  if (gs == 1 && bs == 1) {
    // One pass for the statistics: sums of (x - x[0]) and of its square,
    // shifted by the first element so that a large mean does not cancel the
    // variance away, in four independent vector accumulators each. A
    // second pass normalises: x is read twice, gamma, beta and y once.
    VecF shift = vset1(x[0]);
    VecF s1[4], s2[4];
    for (int v = 0; v < 4; ++v)
      s1[v] = s2[v] = vzero();
    // Whole groups of four vectors (the accumulators stay in registers),
    // then the masked tail.
    int64_t j0 = 0;
    for (; j0 + 4 * kLanes <= n; j0 += 4 * kLanes)
      for (int v = 0; v < 4; ++v) {
        VecF d = vsub(vloadu(x + j0 + kLanes * v), shift);
        s1[v] = vadd(s1[v], d);
        s2[v] = vfmadd(d, d, s2[v]);
      }
    for (int64_t j = j0; j < n; j += kLanes) {
      LaneMask k = firstLanes(n - j);
      VecF d = vselect(k, vsub(vloadLanes(x + j, k), shift), vzero());
      s1[0] = vadd(s1[0], d);
      s2[0] = vfmadd(d, d, s2[0]);
    }
    float meanShifted = total(s1) / float(n);
    float mean = x[0] + meanShifted;
    float var =
        std::max(total(s2) / float(n) - meanShifted * meanShifted, 0.0f);
    VecF m = vset1(mean);
    VecF rstd = vset1(1.0f / std::sqrt(var + eps));
    for (int64_t j = 0; j < n; j += kLanes) {
      prefetchNext(next, j);
      LaneMask k = firstLanes(n - j);
      bool whole = n - j >= kLanes;
      VecF c = vsub(loadLanes(x + j, k, whole), m);
      VecF r = vfmadd(vmul(c, rstd), loadLanes(g + j, k, whole),
                      loadLanes(b + j, k, whole));
      storeLanes(y + j, k, whole, r, stream);
    }
    return;
  }
#endif
  double sum = 0;
  for (int64_t j = 0; j < n; ++j)
    sum += x[j];
  float mean = float(sum / double(n));
  double sq = 0;
  for (int64_t j = 0; j < n; ++j) {
    float c = x[j] - mean;
    sq += double(c) * c;
  }
  float rstd = float(1.0 / std::sqrt(sq / double(n) + double(eps)));
  for (int64_t j = 0; j < n; ++j)
    y[j] = (x[j] - mean) * rstd * g[j * gs] + b[j * bs];
}

/// Row x of n values normalised into y (gamma g, gs apart); `stream` and
/// `next` as softmaxRow's.
void rmsNormRow(const float *x, float *y, int64_t n, bool stream,
                const float *next, float eps, const float *g, int64_t gs) {
#ifdef TFC_UK_VECTOR
  if (gs == 1) {
    // Sum of squares in four independent vector accumulators, then
    // y = (x * rms) * gamma in the reference's order.
    VecF acc[4];
    for (int v = 0; v < 4; ++v)
      acc[v] = vzero();
    int64_t j0 = 0;
    for (; j0 + 4 * kLanes <= n; j0 += 4 * kLanes)
      for (int v = 0; v < 4; ++v) {
        VecF a = vloadu(x + j0 + kLanes * v);
        acc[v] = vfmadd(a, a, acc[v]);
      }
    for (int64_t j = j0; j < n; j += kLanes) {
      VecF a = vloadLanes(x + j, firstLanes(n - j));
      acc[0] = vfmadd(a, a, acc[0]);
    }
    VecF r = vset1(1.0f / std::sqrt(total(acc) / float(n) + eps));
    for (int64_t j = 0; j < n; j += kLanes) {
      prefetchNext(next, j);
      LaneMask k = firstLanes(n - j);
      bool whole = n - j >= kLanes;
      VecF v = vmul(loadLanes(x + j, k, whole), r);
      storeLanes(y + j, k, whole, vmul(v, loadLanes(g + j, k, whole)), stream);
    }
    return;
  }
#endif
  double sq = 0;
  for (int64_t j = 0; j < n; ++j)
    sq += double(x[j]) * x[j];
  float r = float(1.0 / std::sqrt(sq / double(n) + double(eps)));
  for (int64_t j = 0; j < n; ++j)
    y[j] = x[j] * r * g[j * gs];
}

/// Runs `row(x, y, n, stream, next, params...)` on every row of `in`,
/// writing `out`, rows in parallel: strided rows go through a packed copy;
/// large outputs are streamed (`next` is the following row, to prefetch).
template <typename RowFn, typename... Params>
void forEachRow(MemRef<2> *in, MemRef<2> *out, RowFn row, Params... params) {
  int64_t rows = in->sizes[0], n = in->sizes[1];
  if (n == 0)
    return;
  if (in->strides[1] != 1 || out->strides[1] != 1) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> tmp(2 * n);
      for (int64_t j = 0; j < n; ++j)
        tmp[j] = in->data()[r * in->strides[0] + j * in->strides[1]];
      row(tmp.data(), tmp.data() + n, n, /*stream=*/false, /*next=*/nullptr,
          params...);
      for (int64_t j = 0; j < n; ++j)
        out->data()[r * out->strides[0] + j * out->strides[1]] = tmp[n + j];
    }
    return;
  }
  bool stream = rows * n * 4 >= kStreamBytes;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    row(in->data() + r * in->strides[0], out->data() + r * out->strides[0], n,
        stream, r + 1 < rows ? in->data() + (r + 1) * in->strides[0] : nullptr,
        params...);
#ifdef TFC_UK_VECTOR
  if (stream)
    _mm_sfence(); // order the streamed stores before the next kernel's reads
#endif
}

} // namespace

extern "C" void _mlir_ciface_tfc_uk_softmax_f32(MemRef<2> *in, MemRef<2> *out) {
  int64_t rows = in->sizes[0], n = in->sizes[1];
  if (n == 0)
    return;
  bool dense = in->strides[1] == 1 && out->strides[1] == 1;
  bool stream = dense && rows * n * 4 >= kStreamBytes;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = in->data() + r * in->strides[0];
    float *y = out->data() + r * out->strides[0];
    if (dense) {
      softmaxRow(x, y, n, stream, r + 1 < rows ? x + in->strides[0] : nullptr);
      continue;
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j)
      mx = std::fmax(mx, x[j * in->strides[1]]);
    float sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += (y[j * out->strides[1]] = std::exp(x[j * in->strides[1]] - mx));
    for (int64_t j = 0; j < n; ++j)
      y[j * out->strides[1]] /= sum;
  }
#ifdef TFC_UK_VECTOR
  if (stream)
    _mm_sfence(); // order the streamed stores before the next kernel's reads
#endif
}

extern "C" void _mlir_ciface_tfc_uk_layer_norm_f32(MemRef<2> *in,
                                                   MemRef<1> *gamma,
                                                   MemRef<1> *beta,
                                                   MemRef<2> *out,
                                                   float epsilon) {
  forEachRow(in, out, layerNormRow, epsilon, gamma->data(), gamma->strides[0],
             beta->data(), beta->strides[0]);
}

extern "C" void _mlir_ciface_tfc_uk_layer_norm_bf16(MemRef<2, uint16_t> *in,
                                                    MemRef<1, uint16_t> *gamma,
                                                    MemRef<1, uint16_t> *beta,
                                                    MemRef<2, uint16_t> *out,
                                                    float epsilon) {
  int64_t rows = in->sizes[0], n = in->sizes[1];
  if (n == 0)
    return;
  // Gamma and beta widened once; each row widened into a row of f32
  // scratch, normalised by the f32 kernel into another and rounded.
  std::vector<float> gb(size_t(2 * n));
  for (int64_t j = 0; j < n; ++j) {
    gb[j] = tfc::uk::bf16Value(gamma->data()[j * gamma->strides[0]]);
    gb[n + j] = tfc::uk::bf16Value(beta->data()[j * beta->strides[0]]);
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    static thread_local std::vector<float> scratch;
    if (scratch.size() < size_t(2 * n))
      scratch.resize(size_t(2 * n));
    float *x = scratch.data(), *y = x + n;
    const uint16_t *from = in->data() + r * in->strides[0];
    for (int64_t j = 0; j < n; ++j)
      x[j] = tfc::uk::bf16Value(from[j * in->strides[1]]);
    layerNormRow(x, y, n, /*stream=*/false, /*next=*/nullptr, epsilon,
                 gb.data(), 1, gb.data() + n, 1);
    uint16_t *to = out->data() + r * out->strides[0];
    for (int64_t j = 0; j < n; ++j)
      to[j * out->strides[1]] = tfc::uk::bf16Bits(y[j]);
  }
}

extern "C" void _mlir_ciface_tfc_uk_rms_norm_f32(MemRef<2> *in,
                                                 MemRef<1> *gamma,
                                                 MemRef<2> *out,
                                                 float epsilon) {
  forEachRow(in, out, rmsNormRow, epsilon, gamma->data(), gamma->strides[0]);
}
