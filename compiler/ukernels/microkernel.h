//===- microkernel.h - Register-blocked broadcast-FMA kernel ----*- C++ -*-===//
//
// The one inner product kernel of the CPU micro-kernels (attention's two
// block products and the packed matmul): an MR x (NV*kLanes) block of C
// held in vector registers, A read by scalar broadcast, B by vector loads
// from a packed panel (simd.h: AVX-512 or AVX2). The epilogue may hand the k
// loop independent vector work to run between its FMAs (attention exponentiates
// the previous block's scores there).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UKERNELS_MICROKERNEL_H
#define TFC_UKERNELS_MICROKERNEL_H

#include "simd.h"

#include <cstdint>

#ifdef TFC_UK_VECTOR

namespace tfc::uk {

/// Rows of a register block. With AVX-512, 12 x 2 accumulators would fit the
/// 32 zmm registers, but 6 x 2 runs the packed GEMM 5-10% faster on a Zen 5
/// (one 512-bit FMA per cycle: 12 independent accumulators cover its latency;
/// 1024^3 went from 23.7 to 21.3 ms, 12x2048x64x2048 from 89 to 85 ms), and
/// the attention kernel's products run at the same rate either way. With
/// AVX2, 6 x 2 accumulators, two B vectors and a broadcast fill 15 of the 16
/// ymm registers (the classic 6 x 16 sgemm kernel).
constexpr int kMR = 6;

/// One call of the kernel:
///   C[r][0:NV*kLanes] = (accumulate ? C[r] * alpha : 0)
///                       + sum_t A[r * lda + t * astep] * B[t][0:NV*kLanes]
/// for r < MR rows and t < n. B has row stride NV*kLanes (a packed panel); C
/// has row stride ldc and only the lanes in `cols` are loaded and stored.
template <int NV> struct Tile {
  const float *a;
  int64_t lda, astep;
  const float *b;
  int64_t n;
  float *c;
  int64_t ldc;
  LaneMask cols[NV];
  // Every lane of `cols` is set: C takes plain loads and stores. AVX2's
  // masked ones (vmaskmovps) are slow on AMD cores: with them, the 6 x 16
  // GEMM kernel's 12 loads and 12 stores of C per 256-deep slice cost it
  // 5-10% (128x768x768 on one thread: 77 GFLOP/s, 83 with plain ones).
  bool allCols;
  bool accumulate;
  const VecF *alpha; // per-lane scale of C, or null
};

/// Side work of an epilogue that has none.
struct NoSideWork {
  void operator()(int) {}
};

/// The default epilogue: C = acc on the lanes in `cols`.
struct StoreC {
  NoSideWork sideWork() const { return {}; }
  template <int MR, int NV>
  void operator()(VecF (&acc)[MR][NV], const Tile<NV> &t, NoSideWork &) const {
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) {
        float *c = t.c + r * t.ldc + v * kLanes;
        if (t.allCols)
          vstoreu(c, acc[r][v]);
        else
          vstoreLanes(c, t.cols[v], acc[r][v]);
      }
  }
};

/// One MR x NV*kLanes block; `epilogue(acc, t, side)` consumes the
/// accumulators. `side = epilogue.sideWork()` is called as side(v) after every
/// `Unroll` steps of the k loop, v cycling through 0..NV-1: work the
/// out-of-order core runs in the FMAs' shadow. The epilogue finishes what the
/// loop left. The k loop is unrolled `Unroll` times: worth it for short
/// contractions (attention's D = 64: 1-2%), not for the GEMM's 256-deep slices.
template <int MR, int NV, int Unroll, typename Epilogue>
inline void microKernel(const Tile<NV> &t, Epilogue &epilogue) {
  VecF acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      if (t.accumulate) {
        acc[r][v] = t.allCols
                        ? vloadu(t.c + r * t.ldc + v * kLanes)
                        : vloadLanes(t.c + r * t.ldc + v * kLanes, t.cols[v]);
        if (t.alpha)
          acc[r][v] = vmul(acc[r][v], t.alpha[v]);
      } else {
        acc[r][v] = vzero();
      }
    }
#ifdef __AVX512F__
  auto step = [&](const float *a, int64_t k) {
    VecF bv[NV];
    for (int v = 0; v < NV; ++v)
      bv[v] = vload(t.b + k * NV * kLanes + v * kLanes);
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v)
        acc[r][v] = fmaddBroadcast(a + r * t.lda, bv[v], acc[r][v]);
  };
  auto side = epilogue.sideWork();
  const float *a = t.a;
  int64_t k = 0;
  for (; k + NV * Unroll <= t.n;)
#pragma clang loop unroll(full)
    for (int v = 0; v < NV; ++v) {
      for (int u = 0; u < Unroll; ++u, ++k, a += t.astep)
        step(a, k);
      side(v);
    }
  for (; k < t.n; ++k, a += t.astep)
    step(a, k);
#else
  // With AVX2, one pointer per row of A, each advanced on its own; the asm
  // keeps LLVM from deriving them from one another, as it does above (a
  // chain of MR dependent adds per step, as long as the step's 6 x 2 FMAs
  // take at two a cycle): 128x768x2048 went from 3.4-3.8 to 2.7-3.3 ms on
  // 2 threads. The AVX-512 step takes twice as long and hides the chain.
  const float *a[MR];
  for (int r = 0; r < MR; ++r)
    a[r] = t.a + r * t.lda;
  auto step = [&](int64_t k) {
    VecF bv[NV];
    for (int v = 0; v < NV; ++v)
      bv[v] = vload(t.b + k * NV * kLanes + v * kLanes);
    for (int r = 0; r < MR; ++r) {
      for (int v = 0; v < NV; ++v)
        acc[r][v] = fmaddBroadcast(a[r], bv[v], acc[r][v]);
      a[r] += t.astep;
      asm("" : "+r"(a[r]));
    }
  };
  auto side = epilogue.sideWork();
  int64_t k = 0;
  for (; k + NV * Unroll <= t.n;)
#pragma clang loop unroll(full)
    for (int v = 0; v < NV; ++v) {
      for (int u = 0; u < Unroll; ++u, ++k)
        step(k);
      side(v);
    }
  for (; k < t.n; ++k)
    step(k);
#endif
  epilogue(acc, t, side);
}

/// Runs the kernel on the next `rows` (< 2 kMR) rows of `t` and advances it.
template <int NV, int Unroll, typename Epilogue>
inline void rowBlock(Tile<NV> &t, int64_t rows, Epilogue &epilogue) {
  switch (rows) {
#define TFC_ROWS(M)                                                            \
  case M:                                                                      \
    microKernel<M, NV, Unroll>(t, epilogue);                                   \
    break;
    TFC_ROWS(1)
    TFC_ROWS(2)
    TFC_ROWS(3)
    TFC_ROWS(4)
    TFC_ROWS(5)
    TFC_ROWS(6)
    TFC_ROWS(7)
    TFC_ROWS(8)
    TFC_ROWS(9)
    TFC_ROWS(10)
    TFC_ROWS(11)
    TFC_ROWS(12)
#undef TFC_ROWS
  default:
    break;
  }
  t.a += rows * t.lda;
  t.c += rows * t.ldc;
}

/// Runs the kernel over `rows` rows of A and C in blocks of kMR. A short
/// remainder (at most kMR / 2 rows) is merged with the last full block into
/// two blocks of about equal height: a block of few rows has too few
/// independent accumulators to keep the FMA units busy.
template <int NV, int Unroll = 1, typename Epilogue = StoreC>
inline void blockProduct(Tile<NV> t, int64_t rows, Epilogue &&epilogue = {}) {
  int64_t rest = rows % kMR, full = rows / kMR;
  bool merge = full > 0 && rest > 0 && rest <= kMR / 2;
  for (int64_t b = 0; b < full - (merge ? 1 : 0); ++b)
    rowBlock<NV, Unroll>(t, kMR, epilogue);
  if (merge) {
    int64_t first = (kMR + rest + 1) / 2;
    rowBlock<NV, Unroll>(t, first, epilogue);
    rowBlock<NV, Unroll>(t, kMR + rest - first, epilogue);
  } else if (rest > 0) {
    rowBlock<NV, Unroll>(t, rest, epilogue);
  }
}

/// A dense tile (C row stride NV*kLanes, all lanes) as attention uses it.
template <int NV>
inline Tile<NV> packedTile(const float *a, int64_t lda, int64_t astep,
                           const float *b, int64_t n, float *c, bool accumulate,
                           const VecF *alpha) {
  Tile<NV> t{
      a,          lda,  astep, b, n, c, NV * kLanes, {}, /*allCols=*/true,
      accumulate, alpha};
  for (int v = 0; v < NV; ++v)
    t.cols[v] = firstLanes(kLanes);
  return t;
}

} // namespace tfc::uk

#endif // TFC_UK_VECTOR

#endif // TFC_UKERNELS_MICROKERNEL_H
