//===- attention.h - Shared pieces of the CPU attention kernels -*- C++ -*-===//
//
// Flash attention for the CPU: one pass over the keys and values with an
// online softmax (running max, running sum, rescaled accumulator), never
// the Sq x Skv score matrix. The kernels, by the rows a call has and the
// ISA they were built for:
//   prefill_avx512.cpp  query blocks with the queries along the lanes
//                       (AVX-512), on bf16 dot products where Q, K and V
//                       hold bf16 values
//   prefill_amx.cpp     the same blocks' products on AMX tiles
//   avx2.cpp            query blocks with the queries as rows (AVX2)
//   decode.cpp          a few rows per K/V head, the keys split across
//                       tasks (either ISA)
//   common.cpp          the keys a call attends to; the scalar reference
//   entry.cpp           the entry points of ukernels.h, which pick one
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UKERNELS_ATTENTION_ATTENTION_H
#define TFC_UKERNELS_ATTENTION_ATTENTION_H

#include "amx.h"
#include "simd.h"
#include "ukernels.h"

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tfc::uk::attention {

/// Runs body(t) for every task t in [0, n) on the OpenMP threads, each
/// taking the next task when it finishes one (a dynamic schedule), from an
/// atomic counter. libomp's schedule(dynamic) costs about 0.3 us a task on
/// the build machines (LLVM 22's libomp formats a trace string in every
/// __kmpc_dispatch_next): a region of 96 trivial tasks on two threads took
/// 27-31 us, 2-3 us with the counter (0.96-0.99 us with a static schedule).
/// With `Tiles`, each thread configures its AMX tiles before its first
/// task and releases them after its last.
template <bool Tiles = false, typename Body>
void forEachTask(int64_t n, Body &&body) {
  std::atomic<int64_t> next{0};
#pragma omp parallel if (n > 1)
  {
#ifdef TFC_UK_AMX
    if constexpr (Tiles)
      amx::configure();
#endif
    for (int64_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < n;)
      body(t);
#ifdef TFC_UK_AMX
    if constexpr (Tiles)
      _tile_release();
#endif
  }
}

/// The element type of K and V: f32, or bf16 or f16 (their bits: the
/// entries with 16-bit K and V).
enum class KVType { F32, BF16, F16 };

/// Shapes and strides of one attention call, in elements.
struct Problem {
  int64_t B, Hq, Hkv, Sq, Skv, D, Dv;
  const float *q, *k, *v, *mask; // k, v: f32 K and V
  KVType kv = KVType::F32;
  const uint16_t *k16 = nullptr, *v16 = nullptr; // 16-bit K and V
  float *out;
  /// Q and the output stored as bf16 (the _bf16 entries; q and out null):
  /// only the query blocks on bf16 products read and write them.
  const uint16_t *q16 = nullptr;
  uint16_t *out16 = nullptr;
  int64_t qs[4], ks[4], vs[4], ms[4], os[4];
  float scale;
  float softcap; // > 0: scaled scores capped to softcap * tanh(s / softcap)
  bool causal;
  int64_t causalOffset; // key j visible to query i iff j <= i + offset
  int64_t window; // > 0: key j hidden from query i if j <= i + offset - window
  bool bf16;      // Q, K and V hold bf16 values (TFC_UK_ATTENTION_BF16)
};

/// Points `f32` at x when its elements are f32, else `bits` (16-bit
/// values' bits); the other one at nothing.
template <typename T, typename F, typename H>
inline void pointTo(T *x, F *&f32, H *&bits) {
  if constexpr (std::is_same_v<std::remove_const_t<T>, float>) {
    f32 = x;
    bits = nullptr;
  } else {
    f32 = nullptr;
    bits = x;
  }
}

/// No key is below the window of any query: windowStart without a window.
constexpr int64_t kNoWindow = std::numeric_limits<int64_t>::min() / 4;

/// The first key of query i's sliding window (keys before it are hidden),
/// or kNoWindow. Views of a call's later keys (partOf) move it with the
/// causal offset.
inline int64_t windowStart(const Problem &p, int64_t i) {
  return p.window > 0 ? i + p.causalOffset - p.window + 1 : kNoWindow;
}

/// A mask value at or below this hides its key: finfo(f32).min and
/// finfo(bf16).min (the masks transformers builds), -inf. Added to any
/// finite score, it leaves a weight of exactly 0 next to a visible key.
constexpr float kHiddenKey = -1e30f;

/// The keys a call's rows can attend to, as at most two ranges
/// [begin[s], end[s]): the keys a padding mask hides from every row of
/// every batch element are dropped where that changes no result. A
/// decoder's step over a fixed-size cache (`--position-ids`: the unused
/// slots hidden, the new token's key after them) attends to the used
/// slots and the new key only.
struct KeyRanges {
  int count = 1;
  int64_t begin[2] = {0, 0}, end[2] = {0, 0};
};

/// The keys of `p`'s rows that can see any visible key (a padding mask's
/// keys that every row sees hidden dropped where that changes no result),
/// none before row 0's sliding window.
KeyRanges keyRanges(const Problem &p);

/// Float reference used when a layout or size is outside the fast path.
void attentionReference(const Problem &p);

#ifdef TFC_UK_VECTOR
/// The largest D and Dv of the vector kernels.
constexpr int64_t kMaxDim = 256;

/// What the kernels that pre-scale Q multiply it by: scale * log2(e), which
/// leaves the dot products as scores in base 2; with a soft cap, scale /
/// softcap, which leaves them as the argument of the cap's tanh (capped()
/// then takes them to base 2).
inline float queryFactor(const Problem &p) {
  return p.softcap > 0 ? p.scale / p.softcap : p.scale * kLog2e;
}

/// Soft-capped scores factor * tanh(u) from u = scale * q.k / softcap:
/// in base 2 with factor = softcap * log2(e), else with factor = softcap.
inline VecF capped(VecF u, VecF factor) { return vmul(vtanh(u), factor); }

/// Query blocks of at most this many rows take attentionFewRows (one
/// thread, Skv = 4096: 10 rows 2.6 against 3.2 ms for the block kernel, 12
/// rows 3.1 against 3.4, 16 rows 4.0 against 3.4).
constexpr int64_t kFewRows = 12;

/// The keys and values of a call may lie in consecutive parts (a decoder's
/// cache and its new tokens, not concatenated): part s is a view of the call
/// whose keys [0, view.Skv) are the call's keys [first, first + view.Skv),
/// with its own K and V buffers and strides, and the mask and the causal
/// offset moved to match.
struct KVPart {
  Problem view;
  int64_t first;
};
constexpr int kMaxKVParts = 2;

/// The view of `p` whose keys 0.. are p's keys `first`.. in `k` and `v`
/// (of p's K/V type).
template <typename T>
KVPart partOf(const Problem &p, const MemRef<4, T> &k, const MemRef<4, T> &v,
              int64_t first) {
  KVPart part{p, first};
  Problem &view = part.view;
  pointTo(k.data(), view.k, view.k16);
  pointTo(v.data(), view.v, view.v16);
  view.Skv = k.sizes[2];
  for (int d = 0; d < 4; ++d) {
    view.ks[d] = k.strides[d];
    view.vs[d] = v.strides[d];
  }
  if (view.mask)
    view.mask += first * view.ms[3];
  view.causalOffset -= first;
  return part;
}

/// Few query rows per head (decode.cpp): the keys and values in `nparts`
/// consecutive parts (a decoder's cache and its new tokens), `keys` the
/// keys of p to attend to.
void attentionFewRows(const Problem &p, const KeyRanges &keys,
                      const KVPart *parts, int nparts);

/// Whether the vector kernels take `p`'s layout and sizes.
bool fastPathApplies(const Problem &p);
#endif

#ifdef __AVX512F__
/// Query blocks of 16 or 32 rows as tasks, on bf16 products when Q, K and V
/// hold bf16 values and the kernels have them (prefill_avx512.cpp).
void attentionQueryBlocks(const Problem &p);
#elif defined(TFC_UK_VECTOR)
/// Query blocks as tasks, on the packed panels of K and V (avx2.cpp).
void attentionPanels(const Problem &p);
#endif

} // namespace tfc::uk::attention

#endif // TFC_UKERNELS_ATTENTION_ATTENTION_H
