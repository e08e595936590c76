//===- microkernel.h - Register-blocked broadcast-FMA kernel ----*- C++ -*-===//
//
// The one inner product kernel of the CPU micro-kernels (attention's two
// block products and the packed matmul): an MR x (NV*16) block of C held in
// zmm registers, A read by scalar broadcast, B by vector loads from a packed
// panel.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UKERNELS_MICROKERNEL_H
#define TFC_UKERNELS_MICROKERNEL_H

#include "simd.h"

#include <cstdint>

#ifdef __AVX512F__

namespace tfc::uk {

/// Rows of a register block: 12 x 2 accumulators + 2 B vectors + 1 broadcast
/// fit the 32 zmm registers.
constexpr int kMR = 12;

/// One call of the kernel:
///   C[r][0:NV*16] = (accumulate ? C[r] * alpha : 0)
///                   + sum_t A[r * lda + t * astep] * B[t][0:NV*16]
/// for r < MR rows and t < n. B has row stride NV*16 (a packed panel); C has
/// row stride ldc and only the lanes in `cols` are loaded and stored.
template <int NV> struct Tile {
  const float *a;
  int64_t lda, astep;
  const float *b;
  int64_t n;
  float *c;
  int64_t ldc;
  __mmask16 cols[NV];
  bool accumulate;
  const __m512 *alpha; // per-lane scale of C, or null
};

template <int MR, int NV> inline void microKernel(const Tile<NV> &t) {
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      if (t.accumulate) {
        acc[r][v] = _mm512_maskz_loadu_ps(t.cols[v], t.c + r * t.ldc + v * 16);
        if (t.alpha)
          acc[r][v] = _mm512_mul_ps(acc[r][v], t.alpha[v]);
      } else {
        acc[r][v] = _mm512_setzero_ps();
      }
    }
  const float *a = t.a;
  for (int64_t k = 0; k < t.n; ++k, a += t.astep) {
    __m512 bv[NV];
    for (int v = 0; v < NV; ++v)
      bv[v] = _mm512_load_ps(t.b + k * NV * 16 + v * 16);
    for (int r = 0; r < MR; ++r) {
      __m512 av = _mm512_set1_ps(a[r * t.lda]);
      for (int v = 0; v < NV; ++v)
        acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v)
      _mm512_mask_storeu_ps(t.c + r * t.ldc + v * 16, t.cols[v], acc[r][v]);
}

/// Runs the kernel over `rows` rows of A and C in blocks of kMR, remainder
/// included.
template <int NV> inline void blockProduct(Tile<NV> t, int64_t rows) {
  int64_t r = 0;
  for (; r + kMR <= rows; r += kMR) {
    microKernel<kMR, NV>(t);
    t.a += kMR * t.lda;
    t.c += kMR * t.ldc;
  }
  switch (rows - r) {
#define TFC_REMAINDER(M)                                                       \
  case M:                                                                      \
    microKernel<M, NV>(t);                                                     \
    break;
    TFC_REMAINDER(1)
    TFC_REMAINDER(2)
    TFC_REMAINDER(3)
    TFC_REMAINDER(4)
    TFC_REMAINDER(5)
    TFC_REMAINDER(6)
    TFC_REMAINDER(7)
    TFC_REMAINDER(8)
    TFC_REMAINDER(9)
    TFC_REMAINDER(10)
    TFC_REMAINDER(11)
#undef TFC_REMAINDER
  default:
    break;
  }
}

/// A dense tile (C row stride NV*16, all lanes) as attention uses it.
template <int NV>
inline Tile<NV> packedTile(const float *a, int64_t lda, int64_t astep,
                           const float *b, int64_t n, float *c, bool accumulate,
                           const __m512 *alpha) {
  Tile<NV> t{a, lda, astep, b, n, c, NV * 16, {}, accumulate, alpha};
  for (int v = 0; v < NV; ++v)
    t.cols[v] = 0xffff;
  return t;
}

} // namespace tfc::uk

#endif // __AVX512F__

#endif // TFC_UKERNELS_MICROKERNEL_H
