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
#include <type_traits>
#include <vector>

namespace tfc::uk {
/// The element type of B and of its packed panels: f32, or the bits of bf16
/// or f16 values, widened to f32 as the kernel loads them (a panel of a
/// 16-bit weight holds half the bytes); or int8 or int4 values with scales
/// (a weight quantized when packed: a quarter or an eighth of the bytes),
/// each call's column sums multiplied by the call's column scales at the
/// end. An int4 panel row holds column j in the low nibble of byte j and
/// column j + kLanes in its high nibble (two vectors, NV = 2), each a
/// two's complement nibble. BF16Dot: bf16 dot products (simd.h's dpbf16,
/// where TFC_UK_BF16DOT is): the k index counts pairs, A's elements and B's
/// panel elements are 32-bit words each holding two bf16 values (k's pair),
/// and each product is the sum of the two pairs' products.
enum class BPanel { F32, BF16, F16, I8, I4, BF16Dot };
} // namespace tfc::uk

#ifdef TFC_UK_VECTOR

namespace tfc::uk {

/// Rows of a register block. With AVX-512, 12 x 2 accumulators would fit the
/// 32 zmm registers, but 6 x 2 ran the packed GEMM 5-10% faster on a Zen 4
/// (one 512-bit FMA per cycle: 12 independent accumulators cover its latency;
/// 1024^3 went from 23.7 to 21.3 ms, 12x2048x64x2048 from 89 to 85 ms), and
/// the attention kernel's products run at the same rate either way. On a
/// Zen 5 (two 512-bit FMA pipes) 6 x 2 runs at 97% of the FMA peak with A
/// and B in L1, and 8 or 12 rows (their loops forced to unroll, which
/// blocks of more than 6 rows need to keep their sums in registers) ran the
/// GEMM no faster. With
/// AVX2, 6 x 2 accumulators, two B vectors and a broadcast fill 15 of the 16
/// ymm registers (the classic 6 x 16 sgemm kernel).
constexpr int kMR = 6;

/// One call of the kernel:
///   C[r][0:NV*kLanes] = (accumulate ? C[r] * alpha : 0)
///                       + sum_t A[r * lda + t * astep] * B[t][0:NV*kLanes]
/// for r < MR rows and t < n. B has row stride NV*kLanes (a packed panel; at
/// b, or at b16 for a 16-bit BPanel); C has row stride ldc and only the
/// lanes in `cols` are loaded and stored.
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
  // 5-10% (128x768x256 on one thread: 76 GFLOP/s, 84 with plain ones).
  bool allCols;
  bool accumulate;
  const VecF *alpha;             // per-lane scale of C, or null
  const uint16_t *b16 = nullptr; // a 16-bit B panel
  const int8_t *b8 = nullptr;    // an int8 or int4 B panel ...
  const float *bScale = nullptr; // ... and its NV*kLanes column scales
};

/// Row k of the tile's packed B panel, as NV vectors of f32.
template <BPanel P, int NV>
inline void loadPanelRow(const Tile<NV> &t, int64_t k, VecF (&bv)[NV]) {
  if constexpr (P == BPanel::I4) {
    static_assert(NV == 2, "an int4 panel row holds two vectors");
    vloadI4(reinterpret_cast<const uint8_t *>(t.b8) + k * kLanes, bv[0], bv[1]);
    return;
  }
  for (int v = 0; v < NV; ++v) {
    int64_t offset = k * NV * kLanes + v * kLanes;
    if constexpr (P == BPanel::F32 || P == BPanel::BF16Dot)
      bv[v] = vload(t.b + offset);
    else if constexpr (P == BPanel::BF16)
      bv[v] = vloadBF16(t.b16 + offset);
    else if constexpr (P == BPanel::F16)
      bv[v] = vloadF16(t.b16 + offset);
    else
      bv[v] = vloadI8(t.b8 + offset);
  }
}

/// Side work of an epilogue that has none. Every side work says whether it
/// runs vector instructions (kVectorWork): the k loop then takes its
/// broadcasts folded into the FMAs (below).
struct NoSideWork {
  static constexpr bool kVectorWork = false;
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

/// StoreC that also prefetches a run of cache lines into L2 in the k loop's
/// shadow, one line per step; what is left of the run passes from one block
/// to the next. The packed GEMM fetches the B slice it runs next while it
/// runs this one when B does not stay in L2.
struct StoreCPrefetching {
  struct Run {
    static constexpr bool kVectorWork = false;
    const char *next;
    int64_t lines;
    void operator()(int) {
      if (lines > 0) {
        prefetchL2(next);
        next += 64;
        --lines;
      }
    }
  };
  Run *run;
  Run sideWork() const { return *run; }
  template <int MR, int NV>
  void operator()(VecF (&acc)[MR][NV], const Tile<NV> &t, Run &side) const {
    *run = side;
    NoSideWork none;
    StoreC()(acc, t, none);
  }
};

/// How the kernel reads the rows of A.
enum class ARows {
  /// A[r * lda + t * astep] (Tile's comment).
  Strided,
  /// Packed by packRows: a block of h rows holds A[r][t] at a[t * h + r],
  /// and the blocks of a row range follow one another (lda, astep unused).
  /// One sequential stream per block instead of h strided ones.
  Packed,
};

/// Sets of accumulators of an MR x NV block: at least 8 accumulators in
/// all. One row of 768x2048 on one thread (AVX2, B in L3; tfc-bench, two
/// alternating runs): bf16 panels 0.148 and 0.140 -> 0.075 and 0.077 ms,
/// f32 0.140 and 0.153 -> 0.125 and 0.130.
template <int MR, int NV>
constexpr int kPhases = (MR * NV >= 8) ? 1 : (8 + MR * NV - 1) / (MR * NV);

/// The k loop of microKernel: step(acc[s], k) for k in [0, n), its groups
/// of NV * Unroll steps taking turns over the Phases sets of accumulators,
/// side(v) after every Unroll steps (v cycling through 0..NV-1); the steps
/// past the last whole round of groups go to acc[0]. Always inlined: the
/// accumulators must stay in registers (a call of its own kept them in
/// memory, and a GEMV on int8 or f16 panels ran 3-4x slower).
template <int Phases, int NV, int Unroll, typename Acc, typename Side,
          typename Step>
__attribute__((always_inline)) inline void kLoop(int64_t n, Acc (&acc)[Phases],
                                                 Side &side, Step &&step) {
  int64_t k = 0;
  for (; k + Phases * NV * Unroll <= n;)
#pragma clang loop unroll(full)
    for (int s = 0; s < Phases; ++s)
#pragma clang loop unroll(full)
      for (int v = 0; v < NV; ++v) {
        for (int u = 0; u < Unroll; ++u, ++k)
          step(acc[s], k);
        side(v);
      }
  for (; k < n; ++k)
    step(acc[0], k);
}

/// One MR x NV*kLanes block; `epilogue(acc, t, side)` consumes the
/// accumulators. `side = epilogue.sideWork()` is called as side(v) after every
/// `Unroll` steps of the k loop, v cycling through 0..NV-1: work the
/// out-of-order core runs in the FMAs' shadow. The epilogue finishes what the
/// loop left. The k loop is unrolled `Unroll` times: worth it for short
/// contractions (attention's D = 64: 1-2%), not for the GEMM's 256-deep slices.
/// A block of few rows has too few accumulators to cover the FMA latency
/// (one row: two chains, each FMA waiting 4 cycles for the last): it keeps
/// kPhases sets of them, the k loop's groups of NV * Unroll steps taking
/// turns, and adds them up at the end. A quantized panel's sums start at zero
/// and meet C (scaled by alpha) after their column scales.
template <int MR, int NV, int Unroll, ARows A, BPanel P, typename Epilogue>
inline void microKernel(const Tile<NV> &t, Epilogue &epilogue) {
  constexpr int Phases = kPhases<MR, NV>;
  constexpr bool scaled = P == BPanel::I8 || P == BPanel::I4;
  VecF acc[Phases][MR][NV];
  auto loadC = [&](int r, int v) {
    VecF c = t.allCols ? vloadu(t.c + r * t.ldc + v * kLanes)
                       : vloadLanes(t.c + r * t.ldc + v * kLanes, t.cols[v]);
    return t.alpha ? vmul(c, t.alpha[v]) : c;
  };
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      acc[0][r][v] = t.accumulate && !scaled ? loadC(r, v) : vzero();
      for (int s = 1; s < Phases; ++s)
        acc[s][r][v] = vzero();
    }
  auto side = epilogue.sideWork();
  // With AVX-512, A's broadcasts are folded into the FMAs' memory operands
  // ({1to16}) when the k loop carries vector side work: a separate
  // vbroadcastss takes a slot on the vector pipes, and with folded ones the
  // side work of attention's score product (6-8 vector instructions per 12
  // FMAs) runs in the FMAs' shadow. A loop of FMAs alone runs faster with one
  // vbroadcastss per row of A feeding its NV FMAs: on a Zen 5 (two 512-bit
  // FMA pipes) the 6 x 2 block went from 70% to 97% of the FMA peak with A
  // and B in L1, the packed GEMM from 75-90% to 89-123% of oneDNN's sgemm.
  constexpr bool foldBroadcasts = decltype(side)::kVectorWork;
#ifdef __AVX512F__
  constexpr bool onePointer = true;
#else
  // With AVX2, strided rows take one pointer each (below).
  constexpr bool onePointer = A == ARows::Packed;
#endif
  if constexpr (onePointer) {
    constexpr bool packed = A == ARows::Packed;
    const int64_t lda = packed ? 1 : t.lda, astep = packed ? MR : t.astep;
    const float *a = t.a;
    auto step = [&](VecF(&acc)[MR][NV], int64_t k) {
      VecF bv[NV];
      loadPanelRow<P>(t, k, bv);
      for (int r = 0; r < MR; ++r) {
#ifdef TFC_UK_BF16DOT
        if constexpr (P == BPanel::BF16Dot) {
          // A broadcast of its own, once per row: folded into vdpbf16ps
          // ({1to16}) the bf16 GEMM ran 10-20% slower on a Zen 5.
          __m512i av = _mm512_castps_si512(vset1(a[r * lda]));
          for (int v = 0; v < NV; ++v)
            acc[r][v] = dpbf16(acc[r][v], av, _mm512_castps_si512(bv[v]));
          continue;
        }
#endif
        if constexpr (foldBroadcasts) {
          for (int v = 0; v < NV; ++v)
            acc[r][v] = fmaddBroadcast(a + r * lda, bv[v], acc[r][v]);
        } else {
          VecF av = vset1(a[r * lda]);
          for (int v = 0; v < NV; ++v)
            acc[r][v] = vfmadd(av, bv[v], acc[r][v]);
        }
      }
      a += astep;
    };
    kLoop<Phases, NV, Unroll>(t.n, acc, side, step);
  } else {
    static_assert(P != BPanel::BF16Dot, "bf16 dot products need AVX-512");
    // With AVX2, one pointer per row of A, each advanced on its own; the
    // asm keeps LLVM from deriving them from one another, as it does above
    // (a chain of MR dependent adds per step, as long as the step's 6 x 2
    // FMAs take at two a cycle): 128x768x2048 went from 3.4-3.8 to 2.7-3.3
    // ms on 2 threads. The AVX-512 step takes twice as long and hides the
    // chain.
    const float *a[MR];
    for (int r = 0; r < MR; ++r)
      a[r] = t.a + r * t.lda;
    auto step = [&](VecF(&acc)[MR][NV], int64_t k) {
      VecF bv[NV];
      loadPanelRow<P>(t, k, bv);
      for (int r = 0; r < MR; ++r) {
        for (int v = 0; v < NV; ++v)
          acc[r][v] = fmaddBroadcast(a[r], bv[v], acc[r][v]);
        a[r] += t.astep;
        asm("" : "+r"(a[r]));
      }
    };
    kLoop<Phases, NV, Unroll>(t.n, acc, side, step);
  }
  for (int s = 1; s < Phases; ++s)
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v)
        acc[0][r][v] = vadd(acc[0][r][v], acc[s][r][v]);
  if constexpr (scaled)
    for (int v = 0; v < NV; ++v) {
      VecF scale = vloadu(t.bScale + v * kLanes);
      for (int r = 0; r < MR; ++r)
        acc[0][r][v] =
            vfmadd(acc[0][r][v], scale, t.accumulate ? loadC(r, v) : vzero());
    }
  epilogue(acc[0], t, side);
}

/// Calls f(first, height) for the blocks `rows` rows are computed in: blocks
/// of kMR, and a short remainder (at most kMR / 2 rows) merged with the last
/// full block into two blocks of about equal height (a block of few rows has
/// too few independent accumulators to keep the FMA units busy).
template <typename F> inline void forEachRowBlock(int64_t rows, F &&f) {
  int64_t rest = rows % kMR, full = rows / kMR, i = 0;
  bool merge = full > 0 && rest > 0 && rest <= kMR / 2;
  for (int64_t b = 0; b < full - (merge ? 1 : 0); ++b, i += kMR)
    f(i, int64_t(kMR));
  if (merge) {
    int64_t first = (kMR + rest + 1) / 2;
    f(i, first);
    f(i + first, kMR + rest - first);
  } else if (rest > 0) {
    f(i, rest);
  }
}

/// Calls f(std::integral_constant<int, H>()) for the run-time row count
/// h in [1, Max] (by default [1, kMR], the heights of forEachRowBlock's
/// blocks), nothing for others: the kernels take their row counts as
/// template parameters.
template <int Max = kMR, int H = 1, typename F>
inline void withRows(int64_t h, F &&f) {
  if constexpr (H <= Max) {
    if (h == H)
      f(std::integral_constant<int, H>());
    else
      withRows<Max, H + 1>(h, f);
  }
}

/// Packs `rows` rows of A (element [r][t] at a[r * lda + t * astep], t <
/// depth) for ARows::Packed, in the blocks forEachRowBlock makes: the block
/// at row i starts at dst + i * depth.
inline void packRows(const float *a, int64_t lda, int64_t astep, int64_t rows,
                     int64_t depth, float *dst) {
  forEachRowBlock(rows, [&](int64_t i, int64_t h) {
    withRows(h, [&](auto height) {
      constexpr int H = decltype(height)::value;
      const float *src = a + i * lda;
      float *block = dst + i * depth;
      for (int64_t t = 0; t < depth; ++t)
        for (int r = 0; r < H; ++r)
          block[t * H + r] = src[r * lda + t * astep];
    });
  });
}

/// Runs the kernel on the next `rows` (at most kMR) rows of `t` and advances
/// it.
template <int NV, int Unroll, ARows A, BPanel P, typename Epilogue>
inline void rowBlock(Tile<NV> &t, int64_t rows, Epilogue &epilogue) {
  withRows(rows, [&](auto height) {
    microKernel<decltype(height)::value, NV, Unroll, A, P>(t, epilogue);
  });
  t.a += A == ARows::Packed ? rows * t.n : rows * t.lda;
  t.c += rows * t.ldc;
}

/// Runs the kernel over `rows` rows of A and C in the blocks of
/// forEachRowBlock.
template <int NV, int Unroll = 1, ARows A = ARows::Strided,
          BPanel P = BPanel::F32, typename Epilogue = StoreC>
inline void blockProduct(Tile<NV> t, int64_t rows, Epilogue &&epilogue = {}) {
  forEachRowBlock(rows, [&](int64_t, int64_t h) {
    rowBlock<NV, Unroll, A, P>(t, h, epilogue);
  });
}

/// A 64-byte aligned buffer of at least `floats` floats in `storage`.
inline float *alignedFloats(std::vector<float> &storage, size_t floats) {
  if (storage.size() < floats + 16)
    storage.resize(floats + 16);
  return reinterpret_cast<float *>(
      (reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t(63));
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
