//===- quantize.cpp - Symmetric quantization of B's groups and A's blocks -===//
//
// The values a quantized matmul multiplies (TFC_UK_QUANTIZE_I8, _I4, _A8):
// each group of a weight's column, or block of a row of A, scaled by
// max|x| / qmax and rounded to nearest (ties to even), with the same bytes
// from the vector and the scalar forms.
//
//===----------------------------------------------------------------------===//

#include "matmul/matmul.h"

#ifdef TFC_UK_VECTOR

namespace tfc::uk::matmul {

void quantizeSymmetric(const void *values, int64_t step, int64_t n, float qmax,
                       int8_t *q, float &scale, int32_t &sum, uint8_t flip) {
  // A weight's column may lie at any address (loadUnaligned): the vectors
  // are unaligned loads, the scalars loadUnaligned.
  const auto *x = static_cast<const float *>(values);
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
    top = std::max(top, std::fabs(loadUnaligned<float>(values, l * step)));
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
    int v = quantized(loadUnaligned<float>(values, l * step), scale, qmax);
    q[l] = int8_t(uint8_t(v) ^ flip);
    sum += v;
  }
}

void QuantizedRows::quantize(const Matmul &p, int64_t bt, bool parallel,
                             bool biased, int64_t rowStep) {
  blocks = (p.k + kABlock - 1) / kABlock;
  stride = blocks * kABlock;
  int64_t rows = roundUp(p.m, rowStep);
  values = reinterpret_cast<int8_t *>(
      alignedFloats(storage, size_t(rows * stride + 3) / 4));
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

} // namespace tfc::uk::matmul

#endif // TFC_UK_VECTOR
