//===- norms.cpp - Softmax and layer normalisation for the CPU ------------===//
//
// Each row is read from memory once and written once; the second and third
// sweeps over a row hit the cache. Rows run in parallel.
//
//===----------------------------------------------------------------------===//

#include "simd.h"
#include "ukernels.h"

#include <cmath>

using tfc::uk::MemRef;

namespace {

void softmaxRow(const float *x, float *y, int64_t n) {
#ifdef __AVX512F__
  using namespace tfc::uk;
  // Independent accumulators keep the max and sum chains off the critical
  // path; the row stays in L1 between the three sweeps.
  __m512 mx[4];
  for (auto &m : mx)
    m = _mm512_set1_ps(kNegInf);
  for (int64_t j = 0, v = 0; j < n; j += 16, v = (v + 1) & 3)
    mx[v] = _mm512_mask_max_ps(mx[v], firstLanes(n - j), mx[v],
                               _mm512_maskz_loadu_ps(firstLanes(n - j), x + j));
  __m512 m = _mm512_set1_ps(
      _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(mx[0], mx[1]),
                                         _mm512_max_ps(mx[2], mx[3]))) *
      kLog2e);
  __m512 log2e = _mm512_set1_ps(kLog2e);
  __m512 sum[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t j = 0, v = 0; j < n; j += 16, v ^= 1) {
    __mmask16 k = firstLanes(n - j);
    __m512 e = tfc::uk::exp2(
        _mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, x + j), log2e, m));
    e = _mm512_maskz_mov_ps(k, e);
    _mm512_mask_storeu_ps(y + j, k, e);
    sum[v] = _mm512_add_ps(sum[v], e);
  }
  __m512 inv = _mm512_set1_ps(
      1.0f / _mm512_reduce_add_ps(_mm512_add_ps(sum[0], sum[1])));
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = firstLanes(n - j);
    _mm512_mask_storeu_ps(y + j, k,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + j), inv));
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
                  int64_t bs, float *y, int64_t n, float eps) {
#ifdef __AVX512F__
  using namespace tfc::uk;
  if (gs == 1 && bs == 1) {
    // Two passes over the row (it stays in L1): the mean, then the centred
    // sum of squares, each with four independent vector accumulators.
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t j = 0, v = 0; j < n; j += 16, v = (v + 1) & 3)
      acc[v] = _mm512_add_ps(acc[v],
                             _mm512_maskz_loadu_ps(firstLanes(n - j), x + j));
    float mean =
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                           _mm512_add_ps(acc[2], acc[3]))) /
        float(n);
    __m512 m = _mm512_set1_ps(mean);
    for (auto &a : acc)
      a = _mm512_setzero_ps();
    for (int64_t j = 0, v = 0; j < n; j += 16, v = (v + 1) & 3) {
      __mmask16 k = firstLanes(n - j);
      __m512 c = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + j), m);
      acc[v] = _mm512_fmadd_ps(c, c, acc[v]);
    }
    float var =
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                           _mm512_add_ps(acc[2], acc[3]))) /
        float(n);
    __m512 rstd = _mm512_set1_ps(1.0f / std::sqrt(var + eps));
    for (int64_t j = 0; j < n; j += 16) {
      __mmask16 k = firstLanes(n - j);
      __m512 c = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), m);
      __m512 r = _mm512_fmadd_ps(_mm512_mul_ps(c, rstd),
                                 _mm512_maskz_loadu_ps(k, g + j),
                                 _mm512_maskz_loadu_ps(k, b + j));
      _mm512_mask_storeu_ps(y + j, k, r);
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

} // namespace

extern "C" void _mlir_ciface_tfc_uk_softmax_f32(MemRef<2> *in, MemRef<2> *out) {
  int64_t rows = in->sizes[0], n = in->sizes[1];
  if (n == 0)
    return;
  bool dense = in->strides[1] == 1 && out->strides[1] == 1;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = in->data() + r * in->strides[0];
    float *y = out->data() + r * out->strides[0];
    if (dense) {
      softmaxRow(x, y, n);
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
}

extern "C" void _mlir_ciface_tfc_uk_layer_norm_f32(MemRef<2> *in,
                                                   MemRef<1> *gamma,
                                                   MemRef<1> *beta,
                                                   MemRef<2> *out,
                                                   float epsilon) {
  int64_t rows = in->sizes[0], n = in->sizes[1];
  if (n == 0)
    return;
  if (in->strides[1] != 1 || out->strides[1] != 1) {
    // Strided rows: normalise a packed copy.
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      float *tmp = new float[2 * n];
      for (int64_t j = 0; j < n; ++j)
        tmp[j] = in->data()[r * in->strides[0] + j * in->strides[1]];
      layerNormRow(tmp, gamma->data(), gamma->strides[0], beta->data(),
                   beta->strides[0], tmp + n, n, epsilon);
      for (int64_t j = 0; j < n; ++j)
        out->data()[r * out->strides[0] + j * out->strides[1]] = tmp[n + j];
      delete[] tmp;
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    layerNormRow(in->data() + r * in->strides[0], gamma->data(),
                 gamma->strides[0], beta->data(), beta->strides[0],
                 out->data() + r * out->strides[0], n, epsilon);
}
