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

#ifdef __AVX512F__
inline void storeLanes(float *y, __mmask16 k, __m512 v, bool stream) {
  if (stream && k == 0xffff && reinterpret_cast<uintptr_t>(y) % 64 == 0)
    _mm512_stream_ps(y, v);
  else
    _mm512_mask_storeu_ps(y, k, v);
}

/// Prefetches line `j` (in floats) of the next row into L2: while the last
/// sweeps over a row run from cache, memory would otherwise sit idle (a
/// long row outruns the hardware prefetcher's lookahead).
inline void prefetchNext(const float *next, int64_t j) {
  if (next)
    _mm_prefetch(reinterpret_cast<const char *>(next + j), _MM_HINT_T1);
}
#endif

void softmaxRow(const float *x, float *y, int64_t n, bool stream,
                const float *next) {
#ifdef __AVX512F__
  using namespace tfc::uk;
  // Independent accumulators keep the max and sum chains off the critical
  // path; the row stays in L1 between the three sweeps.
  __m512 mx[4];
  for (auto &m : mx)
    m = _mm512_set1_ps(kNegInf);
  // Whole groups of four vectors (the accumulators stay in registers), then
  // the masked tail.
  int64_t j0 = 0;
  for (; j0 + 64 <= n; j0 += 64)
    for (int v = 0; v < 4; ++v)
      mx[v] = _mm512_max_ps(mx[v], _mm512_loadu_ps(x + j0 + 16 * v));
  for (int64_t j = j0; j < n; j += 16)
    mx[0] = _mm512_mask_max_ps(mx[0], firstLanes(n - j), mx[0],
                               _mm512_maskz_loadu_ps(firstLanes(n - j), x + j));
  __m512 m = _mm512_set1_ps(
      _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(mx[0], mx[1]),
                                         _mm512_max_ps(mx[2], mx[3]))) *
      kLog2e);
  __m512 log2e = _mm512_set1_ps(kLog2e);
  __m512 sum[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
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
  for (int64_t j = 0; j < n; j += 32)
    for (int v = 0; v < 2; ++v) {
      prefetchNext(next, j + 16 * v);
      __mmask16 k = firstLanes(n - j - 16 * v);
      __m512 ej = tfc::uk::exp2(
          _mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, x + j + 16 * v), log2e, m));
      ej = _mm512_maskz_mov_ps(k, ej);
      _mm512_mask_storeu_ps(e + j + 16 * v, k, ej);
      sum[v] = _mm512_add_ps(sum[v], ej);
    }
  __m512 inv = _mm512_set1_ps(
      1.0f / _mm512_reduce_add_ps(_mm512_add_ps(sum[0], sum[1])));
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = firstLanes(n - j);
    storeLanes(y + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, e + j), inv),
               stream);
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

void layerNormRow(const float *x, const float *g, int64_t gs, const float *b,
                  int64_t bs, float *y, int64_t n, float eps, bool stream,
                  const float *next) {
#ifdef __AVX512F__
  using namespace tfc::uk;
  if (gs == 1 && bs == 1) {
    // One pass for the statistics: sums of (x - x[0]) and of its square,
    // shifted by the first element so that a large mean does not cancel the
    // variance away, in four independent vector accumulators each. A
    // second pass normalises: x is read twice, gamma, beta and y once.
    __m512 shift = _mm512_set1_ps(x[0]);
    __m512 s1[4], s2[4];
    for (int v = 0; v < 4; ++v)
      s1[v] = s2[v] = _mm512_setzero_ps();
    // Whole groups of four vectors (the accumulators stay in registers),
    // then the masked tail.
    int64_t j0 = 0;
    for (; j0 + 64 <= n; j0 += 64)
      for (int v = 0; v < 4; ++v) {
        __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + j0 + 16 * v), shift);
        s1[v] = _mm512_add_ps(s1[v], d);
        s2[v] = _mm512_fmadd_ps(d, d, s2[v]);
      }
    for (int64_t j = j0; j < n; j += 16) {
      __mmask16 k = firstLanes(n - j);
      __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + j), shift);
      s1[0] = _mm512_add_ps(s1[0], d);
      s2[0] = _mm512_fmadd_ps(d, d, s2[0]);
    }
    auto total = [](const __m512 *acc) {
      return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                                _mm512_add_ps(acc[2], acc[3])));
    };
    float meanShifted = total(s1) / float(n);
    float mean = x[0] + meanShifted;
    float var =
        std::max(total(s2) / float(n) - meanShifted * meanShifted, 0.0f);
    __m512 m = _mm512_set1_ps(mean);
    __m512 rstd = _mm512_set1_ps(1.0f / std::sqrt(var + eps));
    for (int64_t j = 0; j < n; j += 16) {
      prefetchNext(next, j);
      __mmask16 k = firstLanes(n - j);
      __m512 c = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), m);
      __m512 r = _mm512_fmadd_ps(_mm512_mul_ps(c, rstd),
                                 _mm512_maskz_loadu_ps(k, g + j),
                                 _mm512_maskz_loadu_ps(k, b + j));
      storeLanes(y + j, k, r, stream);
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

void rmsNormRow(const float *x, const float *g, int64_t gs, float *y, int64_t n,
                float eps, bool stream, const float *next) {
#ifdef __AVX512F__
  using namespace tfc::uk;
  if (gs == 1) {
    // Sum of squares in four independent vector accumulators, then
    // y = (x * rms) * gamma in the reference's order.
    __m512 acc[4];
    for (int v = 0; v < 4; ++v)
      acc[v] = _mm512_setzero_ps();
    int64_t j0 = 0;
    for (; j0 + 64 <= n; j0 += 64)
      for (int v = 0; v < 4; ++v) {
        __m512 a = _mm512_loadu_ps(x + j0 + 16 * v);
        acc[v] = _mm512_fmadd_ps(a, a, acc[v]);
      }
    for (int64_t j = j0; j < n; j += 16) {
      __m512 a = _mm512_maskz_loadu_ps(firstLanes(n - j), x + j);
      acc[0] = _mm512_fmadd_ps(a, a, acc[0]);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(
        _mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
    __m512 r = _mm512_set1_ps(1.0f / std::sqrt(sum / float(n) + eps));
    for (int64_t j = 0; j < n; j += 16) {
      prefetchNext(next, j);
      __mmask16 k = firstLanes(n - j);
      __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), r);
      storeLanes(y + j, k, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, g + j)),
                 stream);
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

/// Runs `row(x, y, stream, next)` on every row of `in`, writing `out`, rows
/// in parallel: strided rows go through a packed copy; large outputs are
/// streamed (`next` is the following row, to prefetch).
template <typename RowFn>
void forEachRow(MemRef<2> *in, MemRef<2> *out, RowFn row) {
  int64_t rows = in->sizes[0], n = in->sizes[1];
  if (n == 0)
    return;
  if (in->strides[1] != 1 || out->strides[1] != 1) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> tmp(2 * n);
      for (int64_t j = 0; j < n; ++j)
        tmp[j] = in->data()[r * in->strides[0] + j * in->strides[1]];
      row(tmp.data(), tmp.data() + n, /*stream=*/false, /*next=*/nullptr);
      for (int64_t j = 0; j < n; ++j)
        out->data()[r * out->strides[0] + j * out->strides[1]] = tmp[n + j];
    }
    return;
  }
  bool stream = rows * n * 4 >= kStreamBytes;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    row(in->data() + r * in->strides[0], out->data() + r * out->strides[0],
        stream, r + 1 < rows ? in->data() + (r + 1) * in->strides[0] : nullptr);
#ifdef __AVX512F__
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
#ifdef __AVX512F__
  if (stream)
    _mm_sfence(); // order the streamed stores before the next kernel's reads
#endif
}

extern "C" void _mlir_ciface_tfc_uk_layer_norm_f32(MemRef<2> *in,
                                                   MemRef<1> *gamma,
                                                   MemRef<1> *beta,
                                                   MemRef<2> *out,
                                                   float epsilon) {
  int64_t n = in->sizes[1];
  forEachRow(in, out,
             [&](const float *x, float *y, bool stream, const float *next) {
               layerNormRow(x, gamma->data(), gamma->strides[0], beta->data(),
                            beta->strides[0], y, n, epsilon, stream, next);
             });
}

extern "C" void _mlir_ciface_tfc_uk_rms_norm_f32(MemRef<2> *in,
                                                 MemRef<1> *gamma,
                                                 MemRef<2> *out,
                                                 float epsilon) {
  int64_t n = in->sizes[1];
  forEachRow(in, out,
             [&](const float *x, float *y, bool stream, const float *next) {
               rmsNormRow(x, gamma->data(), gamma->strides[0], y, n, epsilon,
                          stream, next);
             });
}
