//===- gemm.cpp - The packed matmul on the register-blocked kernel --------===//
//
// C[b] (+)= A[b] . B[b] on microkernel.h's kernel: B packed into two-vector
// panels (f32, 16-bit or quantized values, widened as the kernel loads
// them); a KC-deep slice of a panel stays in L1 while the blocks of A rows
// stream through. The threads split the rows, each packing the A of its
// rows (ARows::Packed), or for few rows the panels, A read in place. The
// products with A quantized too and the bf16 dot products run their own
// kernels (intdot.cpp, bf16dot.cpp).
//
//===----------------------------------------------------------------------===//

#include "matmul/matmul.h"

#include <omp.h>

#ifdef TFC_UK_VECTOR

namespace tfc::uk::matmul {
namespace {

/// Products of fewer FLOPs than this run on one thread: a parallel region
/// costs more than it saves (waking a passive OpenMP runtime's workers
/// takes tens of microseconds; one query row's products are ~0.5 MFLOP).
constexpr double kParallelFlops = 4e6;

/// ... unless B has at least this many elements (512 KiB of f32): a
/// product of few rows then streams B from L3 or memory at one core's
/// bandwidth, and the threads together read faster. A LLaMA decode step
/// (hidden 768, 2 threads, AVX2) ran all its GEMVs on one thread before
/// (below 4 MFLOP each): f32 16.7 -> 10.5 ms (29 GB/s of weights, two
/// cores' read bandwidth), bf16 11.5 -> 8.7 ms. Elements, not bytes: a
/// 16-bit or quantized B has fewer bytes for the same work of widening and
/// multiplying, and int4 projections of 768 x 768 and 768 x 256 (295 and 98
/// KiB) ran on one thread when bytes counted (the same step with int4
/// weights and int8 activations, AVX-512: 5.9 -> 5.2 ms,
/// docs/performance/reports/2026-12-03-xeon-amx.md).
constexpr double kParallelElements = double(size_t(1) << 17);

/// Rows [0, kc) of a slice of a quantized panel (int8; int4 of one
/// group) times their columns' scales, as rows of kNR f32 at `to`: a
/// product of many rows runs the f32 kernel on it, block after block of
/// kMR rows, where each block would widen and scale the same values again
/// (LLaMA prefill, 128 tokens, int8 weights: 0.75x the f32 build's speed
/// before, docs/performance/reports/2026-12-03-xeon-amx.md). Each value
/// rounds once, where the widening kernel rounds each column's sum once
/// more: within the same bound.
template <BType T>
void dequantizeSlice(const int8_t *b, const float *scale, int64_t kc,
                     float *to) {
  using namespace tfc::uk;
  VecF s0 = vloadu(scale), s1 = vloadu(scale + kLanes);
  for (int64_t k = 0; k < kc; ++k) {
    VecF lo, hi;
    if constexpr (T == BType::I4) {
      vloadI4(reinterpret_cast<const uint8_t *>(b) + k * kLanes, lo, hi);
    } else {
      lo = vloadI8(b + k * kNR);
      hi = vloadI8(b + k * kNR + kLanes);
    }
    vstoreu(to + k * kNR, vmul(lo, s0));
    vstoreu(to + k * kNR + kLanes, vmul(hi, s1));
  }
}

/// Batch element `bt` of the product, on the threads if `parallel`.
void matmulOne(const Matmul &p, int64_t bt, bool parallel) {
  using namespace tfc::uk;
  if (p.quantizeA) {
    matmulIntDot(p, bt, parallel);
    return;
  }
#ifdef TFC_UK_BF16DOT
  if (bf16Dot(p)) {
    matmulBf16Dot(p, bt, parallel);
    return;
  }
#endif
  int64_t panels = (p.n + kNR - 1) / kNR;
  const float *ab = p.a + bt * p.as[0];
  float *cb = p.c + bt * p.cs[0];

  // The packing buffers live across calls (thread_local: a batch of small
  // products runs on several threads at once).
  static thread_local std::vector<float> bStorage;
  const void *packed;
  if (p.constantB) {
    packed = packedWeight(p, bt, panels);
  } else {
    float *scratch = alignedFloats(bStorage, size_t(panels * kNR * p.k));
    packB(p, bt, panels, scratch, parallel);
    packed = scratch;
  }
  withBType(p.panelType(), [&](auto type) {
    constexpr BType T = decltype(type)::value;
    using E = PanelElement<T>;
    const E *panels0 = static_cast<const E *>(packed);
    const float *scales =
        panelScales(p, panels, static_cast<const char *>(packed));
    // B larger than L2 streams from farther out: then the threads running
    // rows prefetch each next slice of B (the layout puts it right after
    // this one) while they run this one. Measured with AVX2 on one thread:
    // 128x768x2048 and 128x2048x768 went from 76 to 81 GFLOP/s, 83 with B
    // that stays in L2; 128x768x256 on two threads (B of 768 KiB) ran 5%
    // slower with it.
    constexpr int64_t row = kPanelRow<T>;
    const E *panelsEnd = panels0 + panels * row * p.k;
    bool prefetchB = size_t(panelsEnd - panels0) * sizeof(E) > kL2Bytes;
    // Slices of K: kKC deep, an int4 B's groups (its scales change from
    // one to the next).
    constexpr int64_t kSlice = T == BType::I4 ? kI4Group : kKC;
    // The kernel on rows [i0, i0 + rows) of C, panel pn, every K slice; A
    // of those rows at `a` (strided) or packed by packRows slice by slice
    // at `a + k0 * rows`.
    auto panel = [&](auto layout, const float *a, int64_t i0, int64_t rows,
                     int64_t pn) {
      constexpr ARows A = decltype(layout)::value;
      int64_t cols = std::min(kNR, p.n - pn * kNR);
      for (int64_t k0 = 0; k0 < p.k; k0 += kSlice) {
        int64_t kc = std::min(kSlice, p.k - k0);
        const E *b = panels0 + (pn * p.k + k0) * row;
        Tile<2> t{A == ARows::Packed ? a + k0 * rows : a + k0 * p.as[2],
                  p.as[1],
                  p.as[2],
                  nullptr,
                  kc,
                  cb + i0 * p.cs[1] + pn * kNR,
                  p.cs[1],
                  {firstLanes(cols), firstLanes(cols - kLanes)},
                  /*allCols=*/cols == kNR,
                  /*accumulate=*/p.accumulate || k0 > 0,
                  nullptr};
        // The next slice: this panel's, or the next panel's first.
        const E *next = b + kc * row;
        int64_t nextDepth =
            std::min(kSlice, k0 + kc < p.k ? p.k - k0 - kc : p.k);
        auto product = [&](auto panelType) {
          constexpr BType PT = decltype(panelType)::value;
          if (A == ARows::Packed && prefetchB && next < panelsEnd) {
            StoreCPrefetching::Run run{
                reinterpret_cast<const char *>(next),
                int64_t(nextDepth * row * sizeof(E) / 64)};
            blockProduct<2, 1, A, PT>(t, rows, StoreCPrefetching{&run});
          } else {
            blockProduct<2, 1, A, PT>(t, rows);
          }
        };
        using F32Panel = std::integral_constant<BType, BType::F32>;
        if constexpr (T == BType::F32) {
          t.b = b;
        } else if constexpr (T == BType::I8 || T == BType::I4) {
          const float *scale =
              scales + (pn * p.groups() + k0 / p.group()) * kNR;
          if (rows > kMR) {
            // More than one block of rows: the slice is widened and scaled
            // once, and every block runs the f32 kernel on it.
            static thread_local std::vector<float> sliceStorage;
            float *slice = alignedFloats(sliceStorage, size_t(kSlice * kNR));
            dequantizeSlice<T>(b, scale, kc, slice);
            t.b = slice;
            product(F32Panel());
            continue;
          }
          t.b8 = b;
          t.bScale = scale;
        } else {
          t.b16 = b;
        }
        product(type);
      }
    };
    using Strided = std::integral_constant<ARows, ARows::Strided>;
    using Packed = std::integral_constant<ARows, ARows::Packed>;

    int64_t threads = parallel ? omp_get_max_threads() : 1;
    if (p.m < 2 * kMR * threads) {
      // Few rows: the threads split the panels, and A is read in place.
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t pn = 0; pn < panels; ++pn)
        panel(Strided(), ab, 0, p.m, pn);
      return;
    }
    // The threads split the rows, in tasks of whole kernel blocks, at most
    // about kMC rows (RowTasks). Each packs the A of its task into its own
    // buffer and runs it against every panel: no
    // thread reads what another wrote (a transfer between cores costs more
    // than the packing), and B panels stay shared, read-only.
    RowTasks tasks(p.m, threads, kMR);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t j = 0; j < tasks.count; ++j) {
      int64_t i0 = tasks.begin(j), rows = tasks.begin(j + 1) - i0;
      static thread_local std::vector<float> aStorage;
      float *pa = alignedFloats(aStorage, size_t(rows * p.k));
      for (int64_t k0 = 0; k0 < p.k; k0 += kSlice)
        packRows(ab + i0 * p.as[1] + k0 * p.as[2], p.as[1], p.as[2], rows,
                 std::min(kSlice, p.k - k0), pa + k0 * rows);
      for (int64_t pn = 0; pn < panels; ++pn)
        panel(Packed(), pa, i0, rows, pn);
    }
  });
}

} // namespace

void matmulPacked(const Matmul &p) {
  double flops = 2.0 * double(p.m) * double(p.n) * double(p.k);
  double bElements = double(p.n) * double(p.k);
  // Whether `products` of them make enough work for the threads.
  auto worthThreads = [&](int64_t products) {
    return flops * double(products) >= kParallelFlops ||
           bElements * double(products) >= kParallelElements;
  };
  if (worthThreads(1) || p.batch == 1) {
    // Large products on all threads each; small lone ones on this one.
    for (int64_t bt = 0; bt < p.batch; ++bt)
      matmulOne(p, bt, worthThreads(1));
    return;
  }
  // Many small products: the batch elements spread over the threads when
  // there is enough work in all of them together.
#pragma omp parallel for schedule(static) if (worthThreads(p.batch))
  for (int64_t bt = 0; bt < p.batch; ++bt)
    matmulOne(p, bt, false);
}

} // namespace tfc::uk::matmul

#endif // TFC_UK_VECTOR
