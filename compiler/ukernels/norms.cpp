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
  __m512 mx = _mm512_set1_ps(kNegInf);
  for (int64_t j = 0; j < n; j += 16)
    mx = _mm512_mask_max_ps(mx, firstLanes(n - j), mx,
                            _mm512_maskz_loadu_ps(firstLanes(n - j), x + j));
  __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx) * kLog2e);
  __m512 log2e = _mm512_set1_ps(kLog2e), sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    __mmask16 k = firstLanes(n - j);
    __m512 e = tfc::uk::exp2(
        _mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, x + j), log2e, m));
    e = _mm512_maskz_mov_ps(k, e);
    _mm512_mask_storeu_ps(y + j, k, e);
    sum = _mm512_add_ps(sum, e);
  }
  __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
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
  // Sums in double: a row of a few thousand floats stays exact enough for a
  // 1e-12 epsilon.
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
  if (gs == 1 && bs == 1) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      y[j] = (x[j] - mean) * rstd * g[j] + b[j];
  } else {
    for (int64_t j = 0; j < n; ++j)
      y[j] = (x[j] - mean) * rstd * g[j * gs] + b[j * bs];
  }
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
