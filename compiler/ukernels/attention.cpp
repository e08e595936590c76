//===- attention.cpp - Flash attention for the CPU ------------------------===//
//
// One task computes a block of Br queries of one (batch, head): it walks the
// key/value blocks once with an online softmax (running max, running sum,
// rescaled accumulator) and never forms the Sq x Skv score matrix.
//
// The block is held transposed: scores St[key][query] and the accumulator
// Ot[channel][query] keep queries along the vector lanes, so the per-query
// softmax state (max, sum, rescale factor) is one vector per 16 queries and
// every row reduction is a vertical vector operation. Both products are
// register-blocked broadcast-FMA kernels (kMR rows x Br lanes):
//   St = K_blk . Qt          (K read in place, Q packed once per task)
//   Ot = Ot * alpha + Vt . P (V read in place)
// Scores are kept in base 2 (scale * log2 e folded into Q), so exp is exp2.
// The score product's epilogue adds a mask shared by all queries (padding),
// takes the block's max and, for blocks nothing else masks, writes P
// against the running max directly; the max moves only when a block
// exceeds it by more than kRescaleThreshold (lazy rescaling).
// The exponentials of one register block run in the next one's k loop.
// Causal blocks past the diagonal, and with a sliding window the blocks
// before it, are skipped; grouped-query heads share their K/V head without a
// copy.
//
// Q, K and V of bf16 values (TFC_UK_ATTENTION_BF16) take both products on
// bf16 pairs: on AMX tiles where the kernels have them (amx.h), St and Ot
// as 16 x 16 tiles of f32 sums (K's rows and Vt's by Qt's and P's pairs),
// each K/V head packed once for the tiles (packHeadTiles) and the score
// epilogue run over the stored scores; else on vdpbf16ps in the same
// register blocks as f32.
//
// Query blocks of at most kFewRows rows (decode) take attendRows instead:
// the head dimension along the lanes, the rows that share a K/V head taken
// together so that each K/V block is read once for all of them, and the
// keys split across tasks whose partial results are then merged (split-KV).
//
//===----------------------------------------------------------------------===//

#include "amx.h"
#include "microkernel.h"
#include "simd.h"
#include "ukernels.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

using tfc::uk::kLog2e;
using tfc::uk::kNegInf;
using tfc::uk::MemRef;
#ifdef __AVX512F__
using tfc::uk::ARows;
using tfc::uk::blockProduct;
using tfc::uk::exp2;
using tfc::uk::firstLanes;
using tfc::uk::packedTile;
#endif

namespace {

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
      tfc::uk::amx::configure();
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

/// How a query block's two products run: f32 FMAs; bf16 dot products
/// (vdpbf16ps) on pairs of bf16 values; or AMX tiles (tdpbf16ps) on the
/// same pairs.
enum class Products { F32, Bf16Dot, Tiles };

/// One (batch, K/V head)'s K and V as bf16 pairs, for products on bf16
/// values (packHeadPairs, packHeadTiles); null for f32 products. K's rows
/// are kStride words apart; with Tiles, V is transposed, its channels
/// vStride bf16 values apart.
struct HeadPairs {
  const uint32_t *k = nullptr, *v = nullptr;
  int64_t kStride = 0, vStride = 0;
};

/// No key is below the window of any query: windowStart without a window.
constexpr int64_t kNoWindow = std::numeric_limits<int64_t>::min() / 4;

/// The first key of query i's sliding window (keys before it are hidden),
/// or kNoWindow. Views of a call's later keys (partOf) move it with the
/// causal offset.
inline int64_t windowStart(const Problem &p, int64_t i) {
  return p.window > 0 ? i + p.causalOffset - p.window + 1 : kNoWindow;
}

#ifdef TFC_UK_VECTOR
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
  if constexpr (std::is_same_v<T, float>) {
    view.k = k.data();
    view.v = v.data();
  } else {
    view.k16 = k.data();
    view.v16 = v.data();
  }
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
#endif

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

/// Keys shorter than this between two used ranges are walked anyway.
constexpr int64_t kMinGap = 32;

/// The ranges for `p`. Only a mask that is the same for every query head and
/// row (a padding mask) is looked at. A hidden key adds exactly 0 to a row
/// that sees a visible key, so dropping it changes nothing there; a row
/// that sees none averages over what it sees and must keep it all. So:
/// keys past the last visible one (over the batch) go whenever every
/// batch element has a visible key (a causal row that sees past a batch
/// element's last visible key sees that key); leading keys and the
/// longest hidden run between visible ones go as well when every row sees
/// a visible key (causal: each batch element's first visible key is within
/// row 0's reach). With a sliding window a row sees the keys of its window
/// only: every key dropped needs every row to see a visible key there.
KeyRanges paddingKeyRanges(const Problem &p) {
  KeyRanges r;
  r.end[0] = p.Skv;
  if (!p.mask || (p.ms[1] != 0 && p.Hq > 1) || (p.ms[2] != 0 && p.Sq > 1) ||
      p.Skv == 0)
    return r;
  // hiddenAll[j]: key j is hidden in every batch element.
  static thread_local std::vector<char> hiddenAll;
  hiddenAll.assign(size_t(p.Skv), 1);
  // seen[j]: visible keys before key j in the batch element (windows only).
  static thread_local std::vector<int64_t> seen;
  bool rowsSeeVisible = true;
  int64_t last = -1;
  for (int64_t b = 0; b < p.B; ++b) {
    const float *m = p.mask + b * p.ms[0];
    int64_t first = -1;
    if (p.window > 0)
      seen.assign(size_t(p.Skv + 1), 0);
    for (int64_t j = 0; j < p.Skv; ++j) {
      bool visible = !(m[j * p.ms[3]] <= kHiddenKey); // NaN counts as visible
      if (visible) {
        hiddenAll[size_t(j)] = 0;
        if (first < 0)
          first = j;
        last = std::max(last, j);
      }
      if (p.window > 0)
        seen[size_t(j + 1)] = seen[size_t(j)] + visible;
    }
    if (first < 0)
      return r; // a batch element whose rows see no visible key
    if (p.causal && first > p.causalOffset)
      rowsSeeVisible = false;
    for (int64_t i = 0; p.window > 0 && rowsSeeVisible && i < p.Sq; ++i) {
      int64_t lo = std::clamp<int64_t>(windowStart(p, i), 0, p.Skv);
      int64_t hi = p.causal
                       ? std::clamp<int64_t>(i + p.causalOffset + 1, 0, p.Skv)
                       : p.Skv;
      rowsSeeVisible = hi > lo && seen[size_t(hi)] > seen[size_t(lo)];
    }
  }
  if (p.window > 0 && !rowsSeeVisible)
    return r; // a row that sees only hidden keys of its window
  r.end[0] = last + 1;
  if (!rowsSeeVisible)
    return r;
  int64_t first = 0;
  while (hiddenAll[size_t(first)])
    ++first;
  r.begin[0] = first;
  // The longest hidden run in [first, last]; both ends are visible.
  int64_t gapBegin = 0, gapEnd = 0;
  for (int64_t j = first; j <= last;) {
    if (!hiddenAll[size_t(j)]) {
      ++j;
      continue;
    }
    int64_t k = j;
    while (hiddenAll[size_t(k)])
      ++k;
    if (k - j > gapEnd - gapBegin) {
      gapBegin = j;
      gapEnd = k;
    }
    j = k;
  }
  if (gapEnd - gapBegin >= kMinGap) {
    r.count = 2;
    r.end[0] = gapBegin;
    r.begin[1] = gapEnd;
    r.end[1] = last + 1;
  }
  return r;
}

/// paddingKeyRanges without the keys before row 0's sliding window, which
/// every row's window leaves out.
KeyRanges keyRanges(const Problem &p) {
  KeyRanges r = paddingKeyRanges(p);
  int64_t start = windowStart(p, 0);
  KeyRanges kept;
  kept.count = 0;
  for (int s = 0; s < r.count; ++s) {
    int64_t begin = std::max(r.begin[s], start);
    if (begin < r.end[s]) {
      kept.begin[kept.count] = begin;
      kept.end[kept.count++] = r.end[s];
    }
  }
  if (kept.count == 0) { // keys no row sees: an empty range at the end
    kept.count = 1;
    kept.begin[0] = kept.end[0] = r.end[r.count - 1];
  }
  return kept;
}

/// Float reference used when a layout or size is outside the fast path.
void attentionReference(const Problem &p) {
  int64_t group = p.Hq / p.Hkv;
  std::vector<float> s(p.Skv);
  std::vector<double> acc(p.Dv);
#pragma omp parallel for collapse(2) firstprivate(s, acc) schedule(dynamic)
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h) {
      int64_t kh = h / group;
      for (int64_t i = 0; i < p.Sq; ++i) {
        const float *qi = p.q + b * p.qs[0] + h * p.qs[1] + i * p.qs[2];
        float mx = kNegInf;
        for (int64_t j = 0; j < p.Skv; ++j) {
          const float *kj = p.k + b * p.ks[0] + kh * p.ks[1] + j * p.ks[2];
          float dot = 0;
          for (int64_t d = 0; d < p.D; ++d)
            dot += qi[d * p.qs[3]] * kj[d * p.ks[3]];
          float x = dot * p.scale;
          if (p.softcap > 0)
            x = float(p.softcap * std::tanh(double(x) / p.softcap));
          if (p.mask)
            x += p.mask[b * p.ms[0] + h * p.ms[1] + i * p.ms[2] + j * p.ms[3]];
          if ((p.causal && j > i + p.causalOffset) || j < windowStart(p, i))
            x = kNegInf;
          s[j] = x;
          mx = std::max(mx, x);
        }
        float *oi = p.out + b * p.os[0] + h * p.os[1] + i * p.os[2];
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0;
        if (mx != kNegInf) {
          for (int64_t j = 0; j < p.Skv; ++j) {
            double e = std::exp(double(s[j]) - mx);
            sum += e;
            const float *vj = p.v + b * p.vs[0] + kh * p.vs[1] + j * p.vs[2];
            for (int64_t c = 0; c < p.Dv; ++c)
              acc[c] += e * vj[c * p.vs[3]];
          }
        }
        for (int64_t c = 0; c < p.Dv; ++c)
          oi[c * p.os[3]] = sum > 0 ? float(acc[c] / sum) : 0.0f;
      }
    }
}

#ifdef TFC_UK_VECTOR
constexpr int64_t kMaxDim = 256; // largest D and Dv of attendRowsAnyDim

/// One query row: query head h, row i.
struct QueryRow {
  int64_t h, i;
};

/// Most query rows one call of attendRowsAnyDim takes: the query heads of
/// a grouped-query group times the rows of a short query block.
constexpr int kMaxRows = 8;

/// Attention of up to kMaxRows query rows that share the K/V head kh of
/// batch b, to keys [kvBegin, kvEnd): per row, the max m of its scores (base
/// 2; -inf when no key is visible), the sum l of 2^(s - m) and the
/// unnormalised output o[r * Dv + 0 : Dv]. Each ISA defines it below; the
/// split-KV driver attentionFewRows is shared.
void attendRowsAnyDim(const Problem &p, int64_t b, int64_t kh,
                      const QueryRow *rows, int nrows, int64_t kvBegin,
                      int64_t kvEnd, float *m, float *l, float *o);

/// What the kernels that pre-scale Q multiply it by: scale * log2(e), which
/// leaves the dot products as scores in base 2; with a soft cap, scale /
/// softcap, which leaves them as the argument of the cap's tanh (capped()
/// then takes them to base 2).
float queryFactor(const Problem &p) {
  return p.softcap > 0 ? p.scale / p.softcap : p.scale * kLog2e;
}

/// Soft-capped scores factor * tanh(u) from u = scale * q.k / softcap:
/// in base 2 with factor = softcap * log2(e), else with factor = softcap.
inline tfc::uk::VecF capped(tfc::uk::VecF u, tfc::uk::VecF factor) {
  return tfc::uk::vmul(tfc::uk::vtanh(u), factor);
}
#endif

#ifdef __AVX512F__

constexpr int64_t kBc = 128; // keys per block
constexpr int kUnroll = 4;   // of the products' k loops

/// Online-softmax state of one query block, unnormalised.
template <int NV> struct BlockState {
  alignas(64) float ot[kMaxDim * NV * 16]; // Ot[channel][query]
  __m512 m[NV], l[NV];
};

/// Epilogue of the score product St = K_blk . Qt. It tracks the block's
/// per-query max while the scores are still in registers and, when
/// `reference` is set, turns them into P = 2^(S - reference) and adds up
/// their sum, so an unmasked block needs no pass of its own over the scores.
/// The exponentials of a register block run inside the k loop of the next
/// one, between its FMAs (those of the last block run in finish()). Without
/// a reference the raw scores are stored, unless `seed` asks for the first
/// register block's max to serve as one.
template <int NV> struct ScoreEpilogue {
  const __m512 *reference = nullptr;
  /// A mask that is the same for every query (a padding mask): its values
  /// for the block's keys, in the base-2 domain, added to each key's row;
  /// `rows` is where row 0 of the block is stored.
  const float *keyBias = nullptr;
  const float *rows = nullptr;
  /// Not 0: what the products are multiplied by first (queryFactor, for
  /// products of a Q that was not pre-scaled: bf16 pairs).
  float factor = 0;
  /// With a soft cap (Q pre-scaled by queryFactor), softcap * log2(e): the
  /// products are capped into base 2 before anything else.
  float capLog2e = 0;
  __m512 max[NV], sum[NV];
  /// Where to keep the max of the first register block and use it as the
  /// reference, when there is no running max yet.
  __m512 *seed = nullptr;
  /// Stored rows of S still to be exponentiated.
  float *pending = nullptr;
  int pendingRows = 0;

  ScoreEpilogue() {
    for (int v = 0; v < NV; ++v) {
      max[v] = _mm512_set1_ps(kNegInf);
      sum[v] = _mm512_setzero_ps();
    }
  }

  /// Exponentiates the pending rows one at a time, one vector per call,
  /// with local copies of the state so that it stays in registers.
  struct Exponentiate {
    static constexpr bool kVectorWork = true;
    float *row;
    int rowsLeft;
    __m512 ref[NV], sum[NV];

    void operator()(int v) {
      if (rowsLeft <= 0)
        return;
      float *x = row + v * 16;
      __m512 e = tfc::uk::exp2Lookup(_mm512_sub_ps(_mm512_load_ps(x), ref[v]));
      _mm512_store_ps(x, e);
      sum[v] = _mm512_add_ps(sum[v], e);
      if (v == NV - 1) {
        row += NV * 16;
        --rowsLeft;
      }
    }
  };

  Exponentiate sideWork() const {
    Exponentiate x{pending, reference ? pendingRows : 0, {}, {}};
    for (int v = 0; v < NV; ++v) {
      x.ref[v] = reference ? reference[v] : _mm512_setzero_ps();
      x.sum[v] = sum[v];
    }
    return x;
  }

  /// Inlined into the kernel: called, it takes `side` by reference, which
  /// then lives in memory, and every exponential of the k loop's side work
  /// stores its sums there (1x12x4096x64 causal on 2 threads: bf16 pairs
  /// 65 -> 47 ms, f32 81 -> 78 ms).
  template <int MR>
  __attribute__((always_inline)) void operator()(__m512 (&acc)[MR][NV],
                                                 const tfc::uk::Tile<NV> &t,
                                                 Exponentiate &side) {
    if (factor != 0)
      for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v)
          acc[r][v] = _mm512_mul_ps(acc[r][v], _mm512_set1_ps(factor));
    if (capLog2e > 0)
      for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v)
          acc[r][v] = capped(acc[r][v], _mm512_set1_ps(capLog2e));
    if (keyBias) {
      const float *bias = keyBias + (t.c - rows) / t.ldc;
      for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v)
          acc[r][v] = _mm512_add_ps(acc[r][v], _mm512_set1_ps(bias[r]));
    }
    __m512 m[NV];
    for (int v = 0; v < NV; ++v)
      m[v] = max[v];
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) {
        m[v] = _mm512_max_ps(m[v], acc[r][v]);
        _mm512_store_ps(t.c + r * t.ldc + v * 16, acc[r][v]);
      }
    for (int v = 0; v < NV; ++v)
      max[v] = m[v];
    absorb(side);
    if (seed && !reference) {
      for (int v = 0; v < NV; ++v)
        seed[v] = m[v];
      reference = seed;
    }
    pending = t.c;
    pendingRows = MR;
  }

  /// Runs what `side` left of the pending rows and takes its sum.
  void absorb(Exponentiate &side) {
    while (side.rowsLeft > 0)
      for (int v = 0; v < NV; ++v)
        side(v);
    for (int v = 0; v < NV; ++v)
      sum[v] = side.sum[v];
    pendingRows = 0;
  }

  /// Exponentiates the last register block's rows.
  void finish() {
    Exponentiate side = sideWork();
    absorb(side);
  }
};

/// A block's scores may exceed the running max by this much (base 2) before
/// the max is moved: P = 2^(S - m) then stays below 2^8, far from overflow,
/// and the accumulator keeps its scale (the lazy rescaling of FlashAttention
/// 4). Each query's max is exact again whenever a block exceeds it by more.
constexpr float kRescaleThreshold = 8.0f;

#ifdef TFC_UK_BF16DOT
/// The words of the bf16 pairs of one (batch, K/V head): K's rows by pairs
/// of channels, V's channels by pairs of keys.
int64_t keyPairWords(const Problem &p) { return p.Skv * ((p.D + 1) / 2); }
int64_t valuePairWords(const Problem &p) { return (p.Skv + 1) / 2 * p.Dv; }

/// K's rows of (batch b, K/V head kh) as bf16 pairs of channels: key j's
/// channels 2d, 2d + 1 at kp[j * stride + d] for j < rows (an odd D's last
/// high half 0; the words past D's pairs and the rows past Skv 0). K is f32
/// holding bf16 values, or bf16.
void packKeyPairs(const Problem &p, int64_t b, int64_t kh, uint32_t *kp,
                  int64_t stride, int64_t rows) {
  using tfc::uk::bf16PairsInOrder;
  for (int64_t j = 0; j < rows; ++j) {
    uint32_t *to = kp + j * stride;
    if (j >= p.Skv) {
      std::memset(to, 0, sizeof(uint32_t) * size_t(stride));
      continue;
    }
    for (int64_t d0 = 0; d0 < 2 * stride; d0 += 32) {
      __m512i pairs;
      if (p.kv == KVType::BF16) {
        // A row's bf16 values are its pairs already.
        pairs = _mm512_maskz_loadu_epi16(tfc::uk::firstHalves(p.D - d0),
                                         p.k16 + b * p.ks[0] + kh * p.ks[1] +
                                             j * p.ks[2] + d0);
      } else {
        const float *src = p.k + b * p.ks[0] + kh * p.ks[1] + j * p.ks[2] + d0;
        __m512 x0 = _mm512_maskz_loadu_ps(firstLanes(p.D - d0), src);
        __m512 x1 = _mm512_maskz_loadu_ps(firstLanes(p.D - d0 - 16), src + 16);
        pairs = bf16PairsInOrder(x0, x1);
      }
      _mm512_mask_storeu_epi32(to + d0 / 2, firstLanes(stride - d0 / 2), pairs);
    }
  }
}

/// V's channels c0..c0 + 15 of key j of (b, kh) as f32 (0 past Dv).
inline __m512 valueRow(const Problem &p, int64_t b, int64_t kh, int64_t j,
                       int64_t c0) {
  __mmask16 cols = firstLanes(p.Dv - c0);
  int64_t at = b * p.vs[0] + kh * p.vs[1] + j * p.vs[2] + c0;
  if (p.kv == KVType::BF16)
    return tfc::uk::widenBF16(_mm256_maskz_loadu_epi16(cols, p.v16 + at));
  return _mm512_maskz_loadu_ps(cols, p.v + at);
}

/// K and V of (batch b, K/V head kh) as bf16 pairs into `kp` and `vp`:
/// K's rows packKeyPairs' (stride (D + 1) / 2), keys 2t, 2t + 1 of channel
/// c at vp[t * Dv + c] (an odd Skv's last high half 0). K and V are f32
/// holding bf16 values, or bf16.
void packHeadPairs(const Problem &p, int64_t b, int64_t kh, uint32_t *kp,
                   uint32_t *vp) {
  packKeyPairs(p, b, kh, kp, (p.D + 1) / 2, p.Skv);
  for (int64_t t = 0; 2 * t < p.Skv; ++t)
    for (int64_t c0 = 0; c0 < p.Dv; c0 += 16) {
      __m512 lo = valueRow(p, b, kh, 2 * t, c0);
      __m512 hi = 2 * t + 1 < p.Skv ? valueRow(p, b, kh, 2 * t + 1, c0)
                                    : _mm512_setzero_ps();
      _mm512_mask_storeu_epi32(vp + t * p.Dv + c0, firstLanes(p.Dv - c0),
                               tfc::uk::bf16PairsOfRows(lo, hi));
    }
}

/// P[j][query] (rows j < nb of Br lanes, key j0 + j) as bf16 pairs of keys
/// from the even key at or before j0 (`odd`: j0 is odd, the first pair's
/// low half 0): pair t at pp[t * Br], keys past the block 0.
template <int NV>
void pairProbabilities(const float *sc, int64_t nb, bool odd, float *pp) {
  constexpr int64_t Br = NV * 16;
  for (int64_t t = 0, lo = -int64_t(odd); lo < nb; ++t, lo += 2)
    for (int v = 0; v < NV; ++v) {
      __m512 x =
          lo >= 0 ? _mm512_load_ps(sc + lo * Br + v * 16) : _mm512_setzero_ps();
      __m512 y = lo + 1 < nb ? _mm512_load_ps(sc + (lo + 1) * Br + v * 16)
                             : _mm512_setzero_ps();
      _mm512_store_si512(pp + t * Br + v * 16, tfc::uk::bf16PairsOfRows(x, y));
    }
}

#ifdef TFC_UK_AMX
namespace amx = tfc::uk::amx;

inline int64_t roundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/// Where one (batch, K/V head)'s K and V lie for the tile products
/// (packHeadTiles), in 32-bit words: K's rows by pairs of channels
/// (packKeyPairs), kStride words apart (D's pairs rounded up to a tile
/// row), rows to the last one a tile of keys from any block may load; V
/// transposed, a row of bf16 values per channel (vStride values apart: the
/// keys rounded up past the last 32 keys a block's tiles may load from its
/// even first key), rows rounded up to a tile of channels. Everything past
/// D, Dv and Skv is 0: a tile that reaches past a block multiplies zeros,
/// or other keys by a weight of 0.
struct TileLayout {
  int64_t kStride, keyRows, vStride, channelRows;
  size_t keyWords() const { return size_t(keyRows * kStride); }
  size_t words() const {
    return keyWords() + size_t(channelRows * vStride / 2);
  }
};

TileLayout tileLayout(const Problem &p) {
  TileLayout t;
  t.kStride = roundUp((p.D + 1) / 2, amx::kRows);
  t.keyRows = roundUp(p.Skv, amx::kRows) + amx::kRows;
  t.vStride = roundUp(p.Skv, 32) + 32;
  t.channelRows = roundUp(p.Dv, amx::kRows);
  return t;
}

/// K and V of (batch b, K/V head kh) for the tile products into `words`,
/// laid out as TileLayout says.
void packHeadTiles(const Problem &p, int64_t b, int64_t kh, const TileLayout &t,
                   uint32_t *words) {
  packKeyPairs(p, b, kh, words, t.kStride, t.keyRows);
  uint16_t *vt = reinterpret_cast<uint16_t *>(words + t.keyWords());
  // 16 x 16 blocks of keys by channels transposed in registers, two of them
  // (32 keys) rounded to bf16 per store of a channel's row.
  for (int64_t c0 = 0; c0 < t.channelRows; c0 += 16)
    for (int64_t j0 = 0; j0 < t.vStride; j0 += 32) {
      __m512 r[2][16];
      for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 16; ++i) {
          int64_t j = j0 + 16 * h + i;
          r[h][i] = j < p.Skv ? valueRow(p, b, kh, j, c0) : _mm512_setzero_ps();
        }
        tfc::uk::transpose16(r[h]);
      }
      for (int c = 0; c < 16; ++c)
        _mm512_storeu_si512(vt + (c0 + c) * t.vStride + j0,
                            tfc::uk::bf16PairsInOrder(r[0][c], r[1][c]));
    }
}

/// St[j][query] = K[j0 + j] . Q[query] for keys j < nb (rows up to the next
/// whole tile written too) on tiles: units of two tiles of keys (A: K's
/// rows of pairs) by NV tiles of queries (B: Qt's pairs of channels, rows
/// rounded up to whole tiles with zeros).
template <int NV>
void tileScores(const HeadPairs &pairs, int64_t j0, int64_t nb, const float *qt,
                float *sc) {
  constexpr int64_t Br = NV * 16;
  for (int64_t j = 0; j < nb; j += 2 * amx::kRows)
    amx::withUnit(nb - j, Br, [&](auto tiles) {
      using T = decltype(tiles);
      T::zero();
      const uint32_t *k = pairs.k + (j0 + j) * pairs.kStride;
      for (int64_t w = 0; w < pairs.kStride; w += amx::kRows) {
        T::load(k + w, pairs.kStride * 4, qt + w * Br, amx::kRowBytes, Br * 4);
        T::template dot<amx::Product::Bf16>();
      }
      T::store(sc + j * Br);
    });
}

/// Runs the score product's epilogue over the scores of keys j < nb that
/// the tiles stored in sc, kRowsPerCall rows per call (as if the register
/// blocks of the AVX-512 product had just computed them).
template <int NV>
void epilogueOverRows(ScoreEpilogue<NV> &epilogue, float *sc, int64_t nb) {
  constexpr int64_t Br = NV * 16;
  constexpr int kRowsPerCall = 4;
  tfc::uk::Tile<NV> t = packedTile<NV>(nullptr, 0, 0, nullptr, 0, sc,
                                       /*accumulate=*/false, nullptr);
  for (int64_t j = 0; j < nb; j += kRowsPerCall, t.c += kRowsPerCall * Br)
    tfc::uk::withRows<kRowsPerCall>(
        std::min<int64_t>(kRowsPerCall, nb - j), [&](auto height) {
          constexpr int H = decltype(height)::value;
          __m512 acc[H][NV];
          for (int r = 0; r < H; ++r)
            for (int v = 0; v < NV; ++v)
              acc[r][v] = _mm512_load_ps(t.c + r * Br + v * 16);
          auto side = epilogue.sideWork();
          epilogue(acc, t, side);
        });
}

/// Ot[c][query] += sum over keys of Vt[c][key] P[key][query] on tiles, for
/// the keys of `pairCount` pairs from the even key e0 (P's pairs in pp, as
/// pairProbabilities writes them; the rows past them to a whole tile are
/// zeroed here): units of two tiles of channels (A: V's transposed rows) by
/// NV tiles of queries (B: P's pairs of keys), Ot's tiles loaded and stored
/// around them.
template <int NV>
void tileValues(const HeadPairs &pairs, int64_t Dv, int64_t e0,
                int64_t pairCount, float *pp, float *ot) {
  constexpr int64_t Br = NV * 16;
  int64_t pairRows = roundUp(pairCount, amx::kRows);
  std::memset(pp + pairCount * Br, 0,
              sizeof(float) * size_t((pairRows - pairCount) * Br));
  const uint16_t *vt = reinterpret_cast<const uint16_t *>(pairs.v) + e0;
  for (int64_t c = 0; c < Dv; c += 2 * amx::kRows)
    amx::withUnit(Dv - c, Br, [&](auto tiles) {
      using T = decltype(tiles);
      T::loadSums(ot + c * Br);
      for (int64_t t = 0; t < pairRows; t += amx::kRows) {
        T::load(vt + c * pairs.vStride + 2 * t, pairs.vStride * 2, pp + t * Br,
                amx::kRowBytes, Br * 4);
        T::template dot<amx::Product::Bf16>();
      }
      T::store(ot + c * Br);
    });
}
#endif
#endif

/// Walks keys [kvBegin, kvEnd) for queries [i0, i0 + nq) of (b, h), leaving
/// the unnormalised accumulator and the softmax state in `st`. With bf16
/// products (M: Bf16Dot or Tiles; `pairs` holds the K/V head's pairs) both
/// products run on bf16 dot products:
/// St = K_blk . Qt on K's and Q's bf16 pairs of channels (exact products of
/// bf16 values, f32 sums, multiplied by queryFactor in the epilogue), Ot +=
/// Vt . P on pairs of keys, P rounded to bf16 (as FlashAttention's tensor
/// cores take it; the sums l stay those of the f32 P). On Tiles, the
/// scores land in memory and the score product's epilogue runs over them
/// from there.
template <int NV, Products M>
void attendBlock(const Problem &p, int64_t b, int64_t h, int64_t i0, int64_t nq,
                 int64_t kvBegin, int64_t kvEnd, BlockState<NV> &st,
                 HeadPairs pairs) {
  constexpr int64_t Br = NV * 16;
  constexpr bool Pairs = M != Products::F32;
  constexpr tfc::uk::BPanel Panel =
      Pairs ? tfc::uk::BPanel::BF16Dot : tfc::uk::BPanel::F32;
  // The score product's k loop runs half as many steps on pairs: its side
  // work (the previous register block's exponentials) is offered twice as
  // often, so that it still runs in the loop's shadow.
  constexpr int ScoreUnroll = Pairs ? kUnroll / 2 : kUnroll;
  // Qt[d][query], by queryFactor; or Qt's pairs of channels, unscaled.
  alignas(64) float qt[kMaxDim * Br];
  alignas(64) float sc[kBc * Br]; // St[key][query], then P
  // P's pairs of keys (Pairs): kBc / 2 + 1 of them from an odd first key,
  // rounded up to a whole tile of 16 on Tiles.
  alignas(64) float pp[Pairs ? (kBc / 2 + 16) * Br : 1];
  int64_t kh = h / (p.Hq / p.Hkv);
  const int64_t qAt = b * p.qs[0] + h * p.qs[1];
  // f32 K and V (not read with Pairs: K and V may be 16-bit).
  const float *kb = Pairs ? nullptr : p.k + b * p.ks[0] + kh * p.ks[1];
  const float *vb = Pairs ? nullptr : p.v + b * p.vs[0] + kh * p.vs[1];
  const float *mb = p.mask ? p.mask + b * p.ms[0] + h * p.ms[1] : nullptr;
  const int64_t dp = (p.D + 1) / 2;
  // The pairs as the kernel's 32-bit elements.
  const float *kpb = reinterpret_cast<const float *>(pairs.k);
  const float *vpb = reinterpret_cast<const float *>(pairs.v);

  // Qt[d][i] = Q[i0 + i][d] * qscale, 16 x 16 blocks transposed in
  // registers (Pairs: pairs of Qt's rows, unscaled).
  const __m512 qscale = _mm512_set1_ps(queryFactor(p));
  for (int v = 0; v < NV; ++v) {
    int64_t rows = std::min<int64_t>(16, nq - v * 16);
    int64_t qv = qAt + (i0 + v * 16) * p.qs[2];
    for (int64_t d0 = 0; d0 < p.D; d0 += 16) {
      __mmask16 cols = firstLanes(p.D - d0);
      __m512 r[16];
      for (int i = 0; i < 16; ++i) {
        int64_t at = qv + i * p.qs[2] + d0;
        r[i] =
            i >= rows ? _mm512_setzero_ps()
            : p.q16
                ? tfc::uk::widenBF16(_mm256_maskz_loadu_epi16(cols, p.q16 + at))
                : _mm512_maskz_loadu_ps(cols, p.q + at);
      }
      tfc::uk::transpose16(r);
#ifdef TFC_UK_BF16DOT
      if constexpr (Pairs) {
        for (int64_t j = 0; j < std::min<int64_t>(16, p.D - d0); j += 2)
          _mm512_store_si512(qt + (d0 + j) / 2 * Br + v * 16,
                             tfc::uk::bf16PairsOfRows(r[j], r[j + 1]));
        continue;
      }
#endif
      for (int64_t j = 0; j < std::min<int64_t>(16, p.D - d0); ++j)
        _mm512_store_ps(qt + (d0 + j) * Br + v * 16,
                        _mm512_mul_ps(r[j], qscale));
    }
  }
  // Tiles: the pairs rounded up to whole tiles (K's rows of pairs hold
  // kStride words), with zeros; Ot's channels likewise.
  int64_t otRows = p.Dv;
  if constexpr (M == Products::Tiles) {
    std::memset(qt + dp * Br, 0,
                sizeof(float) * size_t((pairs.kStride - dp) * Br));
    otRows = (p.Dv + 15) / 16 * 16;
  }

  for (int v = 0; v < NV; ++v) {
    st.m[v] = _mm512_set1_ps(kNegInf);
    st.l[v] = _mm512_setzero_ps();
  }
  std::memset(st.ot, 0, sizeof(float) * size_t(otRows * Br));

  // Causal: no query of this block sees a key past the last one's limit;
  // none sees a key before the first one's window.
  if (p.causal)
    kvEnd = std::min(kvEnd, i0 + nq + p.causalOffset);
  kvBegin = std::max(kvBegin, windowStart(p, i0));
  // Keys from `inWindow` on are in every query's window.
  int64_t inWindow = windowStart(p, i0 + nq - 1);

  const __m512 log2e = _mm512_set1_ps(kLog2e);
  const __m512i lane =
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  bool started = false; // st.m holds a max of scores seen so far
  // A mask that is the same for every query (ms[2] == 0: padding) is added
  // per key in the score product's epilogue; only a mask that differs
  // between queries needs the masked path.
  const float *queryMask = p.ms[2] == 0 ? nullptr : mb;
  alignas(64) float keyBias[kBc];
  auto scoreEpilogue = [&] {
    ScoreEpilogue<NV> epilogue;
    if (Pairs)
      epilogue.factor = queryFactor(p);
    if (p.softcap > 0)
      epilogue.capLog2e = p.softcap * kLog2e;
    if (mb && !queryMask) {
      epilogue.keyBias = keyBias;
      epilogue.rows = sc;
    }
    return epilogue;
  };
  // Causal without such a mask: keys below `visible` are seen by every
  // query of the block, so the blocks end there once, and only the keys
  // past it (at most Br of them) take the masked path.
  int64_t visible = p.causal && !queryMask ? i0 + p.causalOffset + 1 : kvEnd;
  int64_t nb = 0;
  for (int64_t j0 = kvBegin; j0 < kvEnd; j0 += nb) {
    int64_t stop = j0 < inWindow  ? std::min(inWindow, kvEnd)
                   : j0 < visible ? std::min(visible, kvEnd)
                                  : kvEnd;
    nb = std::min(kBc, stop - j0);
    if (mb && !queryMask)
      for (int64_t j = 0; j < nb; ++j)
        keyBias[j] = tfc::uk::toLog2Domain(mb[(j0 + j) * p.ms[3]]);
    auto scores =
        Pairs ? packedTile<NV>(kpb + j0 * dp, dp, 1, qt, dp, sc,
                               /*accumulate=*/false, nullptr)
              : packedTile<NV>(kb + j0 * p.ks[2], p.ks[2], 1, qt, p.D, sc,
                               /*accumulate=*/false, nullptr);
    auto values =
        Pairs ? packedTile<NV>(vpb + j0 / 2 * p.Dv, 1, p.Dv, pp,
                               (j0 % 2 + nb + 1) / 2, st.ot,
                               /*accumulate=*/true, nullptr)
              : packedTile<NV>(vb + j0 * p.vs[2], 1, p.vs[2], sc, nb, st.ot,
                               /*accumulate=*/true, nullptr);
    // St = K_blk . Qt into sc, through `epilogue`.
    auto scoreProduct = [&](ScoreEpilogue<NV> &epilogue) {
#ifdef TFC_UK_AMX
      if constexpr (M == Products::Tiles) {
        tileScores<NV>(pairs, j0, nb, qt, sc);
        epilogueOverRows<NV>(epilogue, sc, nb);
      } else
#endif
        blockProduct<NV, ScoreUnroll, ARows::Strided, Panel>(scores, nb,
                                                             epilogue);
    };
    // Ot = Ot * alpha + Vt . P (no alpha: Ot + Vt . P), P from sc.
    auto valueProduct = [&](const __m512 *alpha) {
#ifdef TFC_UK_BF16DOT
      if constexpr (Pairs)
        pairProbabilities<NV>(sc, nb, j0 % 2 != 0, pp);
#endif
#ifdef TFC_UK_AMX
      if constexpr (M == Products::Tiles) {
        if (alpha)
          for (int64_t c = 0; c < p.Dv; ++c)
            for (int v = 0; v < NV; ++v)
              _mm512_store_ps(
                  st.ot + c * Br + v * 16,
                  _mm512_mul_ps(_mm512_load_ps(st.ot + c * Br + v * 16),
                                alpha[v]));
        tileValues<NV>(pairs, p.Dv, j0 - j0 % 2, (j0 % 2 + nb + 1) / 2, pp,
                       st.ot);
      } else
#endif
      {
        values.alpha = alpha;
        blockProduct<NV, kUnroll, ARows::Strided, Panel>(values, p.Dv);
      }
    };
    // Every key of the block visible to every query: no mask, causal only
    // if the block ends before the first query's limit, in every window.
    bool unmasked = !queryMask &&
                    (!p.causal || j0 + nb - 1 <= i0 + p.causalOffset) &&
                    j0 >= inWindow;

    // Fast path: P straight from the score product, against the running
    // max (for the first block, the max of its first register block), as
    // long as no score exceeds it by more than the threshold.
    if (unmasked) {
      ScoreEpilogue<NV> epilogue = scoreEpilogue();
      __m512 seed[NV];
      if (started)
        epilogue.reference = st.m;
      else
        epilogue.seed = seed;
      scoreProduct(epilogue);
      epilogue.finish();
      __mmask16 over = 0;
      for (int v = 0; v < NV; ++v)
        over |=
            _mm512_cmp_ps_mask(epilogue.max[v],
                               _mm512_add_ps(epilogue.reference[v],
                                             _mm512_set1_ps(kRescaleThreshold)),
                               _CMP_GT_OQ);
      if (!over) {
        for (int v = 0; v < NV; ++v) {
          st.m[v] = epilogue.reference[v];
          st.l[v] = _mm512_add_ps(st.l[v], epilogue.sum[v]);
        }
        started = true;
        valueProduct(nullptr);
        continue; // Ot += Vt . P
      }
    }
    started = true;

    // St = K_blk . Qt, raw, with the block's max.
    ScoreEpilogue<NV> epilogue = scoreEpilogue();
    scoreProduct(epilogue);

    // Mask, causal limit; then the block's max.
    __m512 mnew[NV];
    for (int v = 0; v < NV; ++v)
      mnew[v] = unmasked ? _mm512_max_ps(st.m[v], epilogue.max[v]) : st.m[v];
    for (int64_t j = 0; !unmasked && j < nb; ++j) {
      int64_t key = j0 + j;
      for (int v = 0; v < NV; ++v) {
        __m512 s = _mm512_load_ps(sc + j * Br + v * 16);
        int64_t qbase = i0 + v * 16;
        if (queryMask) {
          __m512i idx = _mm512_mullo_epi32(
              _mm512_add_epi32(lane, _mm512_set1_epi32(int32_t(qbase))),
              _mm512_set1_epi32(int32_t(p.ms[2])));
          __m512 mv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(),
                                               firstLanes(nq - v * 16), idx,
                                               queryMask + key * p.ms[3], 4);
          s = _mm512_add_ps(s, tfc::uk::toLog2Domain(mv, log2e));
        }
        if (p.causal) {
          // Visible iff key <= query + offset, i.e. query >= key - offset.
          __m512i qi =
              _mm512_add_epi32(lane, _mm512_set1_epi32(int32_t(qbase)));
          __mmask16 hidden = _mm512_cmplt_epi32_mask(
              qi, _mm512_set1_epi32(int32_t(key - p.causalOffset)));
          s = _mm512_mask_mov_ps(s, hidden, _mm512_set1_ps(kNegInf));
        }
        if (p.window > 0) {
          // Before the window iff key < query + offset - window + 1, i.e.
          // query >= key - offset + window.
          __m512i qi =
              _mm512_add_epi32(lane, _mm512_set1_epi32(int32_t(qbase)));
          __mmask16 hidden = _mm512_cmpge_epi32_mask(
              qi, _mm512_set1_epi32(int32_t(key - p.causalOffset + p.window)));
          s = _mm512_mask_mov_ps(s, hidden, _mm512_set1_ps(kNegInf));
        }
        _mm512_store_ps(sc + j * Br + v * 16, s);
        mnew[v] = _mm512_max_ps(mnew[v], s);
      }
    }

    // Rescale factor for what was accumulated so far; P = 2^(S - m).
    __m512 alpha[NV], msub[NV], lsum[NV];
    for (int v = 0; v < NV; ++v) {
      __mmask16 empty =
          _mm512_cmp_ps_mask(mnew[v], _mm512_set1_ps(kNegInf), _CMP_EQ_OQ);
      msub[v] = _mm512_mask_mov_ps(mnew[v], empty, _mm512_setzero_ps());
      alpha[v] = exp2(_mm512_sub_ps(st.m[v], msub[v]));
      st.m[v] = mnew[v];
      lsum[v] = _mm512_setzero_ps();
    }
    for (int64_t j = 0; j < nb; ++j)
      for (int v = 0; v < NV; ++v) {
        __m512 e =
            exp2(_mm512_sub_ps(_mm512_load_ps(sc + j * Br + v * 16), msub[v]));
        _mm512_store_ps(sc + j * Br + v * 16, e);
        lsum[v] = _mm512_add_ps(lsum[v], e);
      }
    for (int v = 0; v < NV; ++v)
      st.l[v] = _mm512_fmadd_ps(st.l[v], alpha[v], lsum[v]);

    // Ot = Ot * alpha + Vt . P, with Vt[c][key] = V[key][c].
    valueProduct(alpha);
  }
}

/// Writes out[i0 + i][c] = Ot[c][i] / l[i] (0 where no key was visible).
template <int NV>
void storeBlock(const Problem &p, int64_t b, int64_t h, int64_t i0, int64_t nq,
                BlockState<NV> &st) {
  constexpr int64_t Br = NV * 16;
  alignas(64) float inv[Br];
  for (int v = 0; v < NV; ++v) {
    __mmask16 empty =
        _mm512_cmp_ps_mask(st.l[v], _mm512_setzero_ps(), _CMP_EQ_OQ);
    __m512 r = _mm512_div_ps(_mm512_set1_ps(1.0f), st.l[v]);
    _mm512_store_ps(inv + v * 16,
                    _mm512_mask_mov_ps(r, empty, _mm512_setzero_ps()));
  }
  // 16 x 16 blocks of Ot transposed in registers, scaled per query (and
  // rounded to bf16 for a bf16 output).
  const int64_t oAt = b * p.os[0] + h * p.os[1];
  for (int v = 0; v < NV; ++v) {
    int64_t rows = std::min<int64_t>(16, nq - v * 16);
    for (int64_t c0 = 0; c0 < p.Dv; c0 += 16) {
      int64_t channels = std::min<int64_t>(16, p.Dv - c0);
      __m512 r[16];
      for (int c = 0; c < 16; ++c)
        r[c] = c < channels ? _mm512_load_ps(st.ot + (c0 + c) * Br + v * 16)
                            : _mm512_setzero_ps();
      tfc::uk::transpose16(r);
      for (int64_t i = 0; i < rows; ++i) {
        int64_t at = oAt + (i0 + v * 16 + i) * p.os[2] + c0;
        __m512 o = _mm512_mul_ps(r[i], _mm512_set1_ps(inv[v * 16 + i]));
        if (p.out16)
          _mm256_mask_storeu_epi16(p.out16 + at, firstLanes(channels),
                                   tfc::uk::narrowBF16(o));
        else
          _mm512_mask_storeu_ps(p.out + at, firstLanes(channels), o);
      }
    }
  }
}

/// Query block qb (NV * 16 rows) of (b, h), written out.
template <int NV, Products M>
void attendQueryBlock(const Problem &p, int64_t b, int64_t h, int64_t qb,
                      HeadPairs pairs) {
  constexpr int64_t Br = NV * 16;
  int64_t i0 = qb * Br, nq = std::min(Br, p.Sq - i0);
  BlockState<NV> st;
  attendBlock<NV, M>(p, b, h, i0, nq, 0, p.Skv, st, pairs);
  storeBlock<NV>(p, b, h, i0, nq, st);
}

/// Every query block of (batch, query head) as a task; `pairsOf(b, kh)`
/// gives a K/V head's pairs (bf16 products).
template <int NV, Products M, typename PairsOf>
void attendBlocks(const Problem &p, PairsOf &&pairsOf) {
  int64_t qBlocks = (p.Sq + NV * 16 - 1) / (NV * 16);
  forEachTask<M == Products::Tiles>(p.B * p.Hq * qBlocks, [&](int64_t t) {
    int64_t qb = t % qBlocks, bh = t / qBlocks;
    int64_t b = bh / p.Hq, h = bh % p.Hq;
    attendQueryBlock<NV, M>(p, b, h, qb, pairsOf(b, h / (p.Hq / p.Hkv)));
  });
}

#ifdef TFC_UK_BF16DOT
/// attendBlocks on bf16 products (M: Bf16Dot, on the pairs packHeadPairs
/// lays out, or Tiles, on packHeadTiles'). With at least two K/V heads per
/// thread, a task is one K/V head: its thread pairs K and V into a buffer
/// of its own, then runs every query block of the heads that share them,
/// which find the pairs in its caches (pairing every head ahead of the
/// tasks took a pass through L3 that cost a short sequence more than the
/// pairs saved: 96 heads of 128 x 64, 25% of the time). With fewer, every
/// head is paired first and the query blocks are the tasks.
template <int NV, Products M> void attentionBlockedPairs(const Problem &p) {
  int64_t heads = p.B * p.Hkv, group = p.Hq / p.Hkv;
  int64_t qBlocks = (p.Sq + NV * 16 - 1) / (NV * 16);
  // A head's words: its K pairs, then its V pairs.
  HeadPairs layout{nullptr, nullptr, (p.D + 1) / 2, 0};
  size_t keyWords = size_t(keyPairWords(p));
  size_t headWords = keyWords + size_t(valuePairWords(p));
#ifdef TFC_UK_AMX
  TileLayout tiles = tileLayout(p);
  if constexpr (M == Products::Tiles) {
    layout.kStride = tiles.kStride;
    layout.vStride = tiles.vStride;
    keyWords = tiles.keyWords();
    headWords = tiles.words();
  }
#endif
  auto headAt = [&](const uint32_t *words) {
    HeadPairs head = layout;
    head.k = words;
    head.v = words + keyWords;
    return head;
  };
  auto pack = [&](int64_t b, int64_t kh, uint32_t *words) {
#ifdef TFC_UK_AMX
    if constexpr (M == Products::Tiles) {
      packHeadTiles(p, b, kh, tiles, words);
      return;
    }
#endif
    packHeadPairs(p, b, kh, words, words + keyWords);
  };
  if (heads >= 2 * int64_t(omp_get_max_threads())) {
    forEachTask<M == Products::Tiles>(heads, [&](int64_t u) {
      static thread_local std::vector<uint32_t> storage;
      storage.resize(headWords);
      int64_t b = u / p.Hkv, kh = u % p.Hkv;
      pack(b, kh, storage.data());
      for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
        for (int64_t qb = 0; qb < qBlocks; ++qb)
          attendQueryBlock<NV, M>(p, b, h, qb, headAt(storage.data()));
    });
    return;
  }
  static thread_local std::vector<uint32_t> storage;
  storage.resize(size_t(heads) * headWords);
  uint32_t *all = storage.data();
#pragma omp parallel for schedule(static)
  for (int64_t u = 0; u < heads; ++u)
    pack(u / p.Hkv, u % p.Hkv, all + u * headWords);
  attendBlocks<NV, M>(p, [&](int64_t b, int64_t kh) {
    return headAt(all + (b * p.Hkv + kh) * headWords);
  });
}
#endif

/// Query blocks of NV * 16 rows as tasks, on bf16 products when Q, K and V
/// hold bf16 values and the kernels have them: on AMX tiles where this
/// process may use them, else on bf16 dot products.
template <int NV> void attentionBlocked(const Problem &p) {
#ifdef TFC_UK_BF16DOT
  if (p.bf16) {
#ifdef TFC_UK_AMX
    if (tfc::uk::amx::enabled()) {
      attentionBlockedPairs<NV, Products::Tiles>(p);
      return;
    }
#endif
    attentionBlockedPairs<NV, Products::Bf16Dot>(p);
    return;
  }
#endif
  attendBlocks<NV, Products::F32>(p,
                                  [](int64_t, int64_t) { return HeadPairs{}; });
}

/// attendRowsAnyDim's contract for ND head-dimension vectors. The
/// head dimension runs along the lanes (ND vectors cover D and Dv): a key's
/// score is a dot product of ND vectors, 16 keys' scores are reduced into
/// one vector at once, and each value row is added with its weight
/// broadcast. Each block of 16 keys and values comes from memory once for
/// all the rows (then from L1). Queries in the lanes, as in attendBlock,
/// would leave most lanes idle for so few rows.
/// The channels of a K or V row of type T (its elements from `row`) as ND
/// f32 vectors, f(c, vector) for each. f32 and f16 rows: vector c holds
/// channels [16c, 16c + 16), the lanes past `lanes[c]`'s 0. bf16 rows (ND
/// even): each 32 channels loaded once, vector 2m holding their even
/// channels and 2m + 1 their odd ones (channelOf; a bf16 is the high half
/// of its f32, so a shift or a mask widens each half of the 32-bit lanes:
/// no conversion), `halves[m]` the channels of block m.
template <KVType T, int ND, typename E, typename F>
inline void forEachVector(const E *row, const __mmask16 *lanes,
                          const __mmask32 *halves, F &&f) {
  if constexpr (T == KVType::BF16) {
    static_assert(ND % 2 == 0, "bf16 rows are whole blocks of 32 channels");
    const __m512i high = _mm512_set1_epi32(int(0xffff0000u));
    for (int m = 0; m < ND / 2; ++m) {
      __m512i x = _mm512_maskz_loadu_epi16(halves[m], row + 32 * m);
      f(2 * m, _mm512_castsi512_ps(_mm512_slli_epi32(x, 16)));
      f(2 * m + 1, _mm512_castsi512_ps(_mm512_and_si512(x, high)));
    }
  } else {
    for (int c = 0; c < ND; ++c) {
      if constexpr (T == KVType::F16)
        f(c,
          tfc::uk::widenF16(_mm256_maskz_loadu_epi16(lanes[c], row + 16 * c)));
      else
        f(c, _mm512_maskz_loadu_ps(lanes[c], row + 16 * c));
    }
  }
}

/// The channel in lane i of vector c of forEachVector's rows of type T.
template <KVType T> inline int64_t channelOf(int c, int i) {
  return T == KVType::BF16 ? 32 * (c / 2) + 2 * i + c % 2 : 16 * c + i;
}

template <int ND, int MaxRows, KVType T>
void attendRows(const Problem &p, int64_t b, int64_t kh, const QueryRow *rows,
                int nrows, int64_t kvBegin, int64_t kvEnd, float *mOut,
                float *lOut, float *o) {
  constexpr int W = ND * 16;
  using E = std::conditional_t<T == KVType::F32, float, uint16_t>;
  const E *kb, *vb;
  if constexpr (T == KVType::F32) {
    kb = p.k;
    vb = p.v;
  } else {
    kb = p.k16;
    vb = p.v16;
  }
  kb += b * p.ks[0] + kh * p.ks[1];
  vb += b * p.vs[0] + kh * p.vs[1];
  const __m512 log2e = _mm512_set1_ps(kLog2e);
  __mmask16 dl[ND], vl[ND];
  __mmask32 dh[ND / 2 + 1], vh[ND / 2 + 1]; // bf16 rows' blocks
  for (int c = 0; c < ND; ++c) {
    dl[c] = firstLanes(p.D - 16 * c);
    vl[c] = firstLanes(p.Dv - 16 * c);
  }
  for (int m = 0; m <= ND / 2; ++m) {
    dh[m] = tfc::uk::firstHalves(p.D - 32 * m);
    vh[m] = tfc::uk::firstHalves(p.Dv - 32 * m);
  }
  // Q and the accumulators in the channel order of K's and V's vectors
  // (channelOf). With MaxRows = 1 (one row) these live in registers.
  alignas(64) float q[MaxRows][W], acc[MaxRows][W];
  float m[MaxRows], l[MaxRows];
  int64_t begin[MaxRows], end[MaxRows];
  const float *maskRow[MaxRows];
  nrows = std::min(nrows, MaxRows);
  for (int r = 0; r < nrows; ++r) {
    const float *qr =
        p.q + b * p.qs[0] + rows[r].h * p.qs[1] + rows[r].i * p.qs[2];
    for (int c = 0; c < ND; ++c) {
      if constexpr (T == KVType::BF16)
        for (int i = 0; i < 16; ++i) {
          int64_t ch = channelOf<T>(c, i);
          q[r][16 * c + i] = ch < p.D ? qr[ch] * queryFactor(p) : 0.0f;
        }
      else
        _mm512_store_ps(q[r] + 16 * c,
                        _mm512_mul_ps(_mm512_maskz_loadu_ps(dl[c], qr + 16 * c),
                                      _mm512_set1_ps(queryFactor(p))));
      _mm512_store_ps(acc[r] + 16 * c, _mm512_setzero_ps());
    }
    m[r] = kNegInf;
    l[r] = 0;
    // Causal: row i sees keys j <= i + offset; its window starts at begin.
    end[r] = p.causal ? std::min(kvEnd, rows[r].i + p.causalOffset + 1) : kvEnd;
    begin[r] = windowStart(p, rows[r].i);
    maskRow[r] = p.mask ? p.mask + b * p.ms[0] + rows[r].h * p.ms[1] +
                              rows[r].i * p.ms[2]
                        : nullptr;
  }
  alignas(64) float weight[MaxRows][16];
  int64_t visible[MaxRows];
  // One row's online-softmax step over a block of 16 keys at j0 whose
  // scores are s: the mask added, keys past visible[r] and before the row's
  // window hidden; false when
  // no key is visible, else m and l updated, the accumulator's scale
  // factor in alpha (1 when m did not move) and the weights in weight[r].
  auto softmaxStep = [&](int r, int64_t j0, __m512 s, float &alpha) {
    __mmask16 live = firstLanes(visible[r]) & ~firstLanes(begin[r] - j0);
    if (p.softcap > 0)
      s = capped(s, _mm512_set1_ps(p.softcap * kLog2e));
    if (maskRow[r] && visible[r] > 0) {
      alignas(64) float bias[16];
      for (int64_t j = 0; j < visible[r]; ++j)
        bias[j] = maskRow[r][(j0 + j) * p.ms[3]];
      s = _mm512_add_ps(
          s, tfc::uk::toLog2Domain(_mm512_maskz_load_ps(live, bias), log2e));
    }
    s = _mm512_mask_mov_ps(_mm512_set1_ps(kNegInf), live, s);
    float top = _mm512_reduce_max_ps(s);
    alpha = 1;
    if (top == kNegInf) { // no visible key here
      visible[r] = 0;
      _mm512_store_ps(weight[r], _mm512_setzero_ps());
      return false;
    }
    if (top > m[r]) {
      alpha = std::exp2(m[r] - top); // 0 while m is -inf
      l[r] *= alpha;
      m[r] = top;
    }
    __m512 e = exp2(_mm512_sub_ps(s, _mm512_set1_ps(m[r])));
    l[r] += _mm512_reduce_add_ps(e);
    _mm512_store_ps(weight[r], e);
    return true;
  };

  if constexpr (MaxRows == 1) {
    // One row: its accumulator stays in registers.
    __m512 ov[ND];
    for (int c = 0; c < ND; ++c)
      ov[c] = _mm512_setzero_ps();
    for (int64_t j0 = kvBegin; j0 < kvEnd; j0 += 16) {
      int64_t n = std::min<int64_t>(16, kvEnd - j0);
      visible[0] = std::clamp<int64_t>(end[0] - j0, 0, n);
      if (visible[0] == 0)
        continue;
      __m512 qv[ND];
      for (int c = 0; c < ND; ++c)
        qv[c] = _mm512_load_ps(q[0] + 16 * c);
      __m512 dot[16];
      for (int j = 0; j < 16; ++j) {
        const E *kr = kb + (j0 + std::min<int64_t>(j, n - 1)) * p.ks[2];
        dot[j] = _mm512_setzero_ps();
        forEachVector<T, ND>(kr, dl, dh, [&](int c, __m512 kc) {
          dot[j] = _mm512_fmadd_ps(qv[c], kc, dot[j]);
        });
      }
      float alpha;
      if (!softmaxStep(0, j0, tfc::uk::horizontalSums16(dot), alpha))
        continue;
      for (int c = 0; c < ND; ++c)
        ov[c] = _mm512_mul_ps(ov[c], _mm512_set1_ps(alpha));
      for (int64_t j = 0; j < visible[0]; ++j) {
        const E *vr = vb + (j0 + j) * p.vs[2];
        forEachVector<T, ND>(vr, vl, vh, [&](int c, __m512 vc) {
          ov[c] = tfc::uk::fmaddBroadcast(weight[0] + j, vc, ov[c]);
        });
      }
    }
    for (int c = 0; c < ND; ++c)
      _mm512_store_ps(acc[0] + 16 * c, ov[c]);
  } else {
    // Rows in pairs where they can: a pair loads each key and value vector
    // once for both rows (the loads, not the FMAs, bound this loop).
    for (int64_t j0 = kvBegin; j0 < kvEnd; j0 += 16) {
      int64_t n = std::min<int64_t>(16, kvEnd - j0);
      __m512 scores[MaxRows];
      auto scoreRows = [&](auto rb, int r0) {
        constexpr int RB = decltype(rb)::value;
        __m512 qv[RB][ND];
        for (int x = 0; x < RB; ++x)
          for (int c = 0; c < ND; ++c)
            qv[x][c] = _mm512_load_ps(q[r0 + x] + 16 * c);
        __m512 pairs[RB][8];
        for (int i = 0; i < 8; ++i) {
          __m512 dot[RB][2];
          for (int y = 0; y < 2; ++y) {
            const E *kr =
                kb + (j0 + std::min<int64_t>(2 * i + y, n - 1)) * p.ks[2];
            for (int x = 0; x < RB; ++x)
              dot[x][y] = _mm512_setzero_ps();
            forEachVector<T, ND>(kr, dl, dh, [&](int c, __m512 kc) {
              for (int x = 0; x < RB; ++x)
                dot[x][y] = _mm512_fmadd_ps(qv[x][c], kc, dot[x][y]);
            });
          }
          for (int x = 0; x < RB; ++x)
            pairs[x][i] = tfc::uk::pairSums(dot[x][0], dot[x][1]);
        }
        for (int x = 0; x < RB; ++x)
          scores[r0 + x] = tfc::uk::horizontalSumsOfPairs(pairs[x]);
      };
      int r = 0;
      for (; r + 1 < nrows; r += 2)
        scoreRows(std::integral_constant<int, 2>(), r);
      if (r < nrows)
        scoreRows(std::integral_constant<int, 1>(), r);

      for (r = 0; r < nrows; ++r) {
        visible[r] = std::clamp<int64_t>(end[r] - j0, 0, n);
        float alpha;
        if (softmaxStep(r, j0, scores[r], alpha) && alpha != 1)
          for (int c = 0; c < ND; ++c)
            _mm512_store_ps(acc[r] + 16 * c,
                            _mm512_mul_ps(_mm512_load_ps(acc[r] + 16 * c),
                                          _mm512_set1_ps(alpha)));
      }

      // acc += weights . V, RB rows at a time (weights are 0 past a row's
      // visible keys).
      auto accumulateRows = [&](auto rb, int r0) {
        constexpr int RB = decltype(rb)::value;
        int64_t keys = 0;
        for (int x = 0; x < RB; ++x)
          keys = std::max(keys, visible[r0 + x]);
        if (keys == 0)
          return;
        __m512 ov[RB][ND];
        for (int x = 0; x < RB; ++x)
          for (int c = 0; c < ND; ++c)
            ov[x][c] = _mm512_load_ps(acc[r0 + x] + 16 * c);
        for (int64_t j = 0; j < keys; ++j) {
          const E *vr = vb + (j0 + j) * p.vs[2];
          forEachVector<T, ND>(vr, vl, vh, [&](int c, __m512 vc) {
            for (int x = 0; x < RB; ++x)
              ov[x][c] =
                  tfc::uk::fmaddBroadcast(weight[r0 + x] + j, vc, ov[x][c]);
          });
        }
        for (int x = 0; x < RB; ++x)
          for (int c = 0; c < ND; ++c)
            _mm512_store_ps(acc[r0 + x] + 16 * c, ov[x][c]);
      };
      for (r = 0; r + 1 < nrows; r += 2)
        accumulateRows(std::integral_constant<int, 2>(), r);
      if (r < nrows)
        accumulateRows(std::integral_constant<int, 1>(), r);
    }
  }
  for (int r = 0; r < nrows; ++r) {
    mOut[r] = m[r];
    lOut[r] = l[r];
    if constexpr (T == KVType::BF16) {
      for (int c = 0; c < ND; ++c)
        for (int i = 0; i < 16; ++i)
          if (int64_t ch = channelOf<T>(c, i); ch < p.Dv)
            o[r * p.Dv + ch] = acc[r][16 * c + i];
    } else {
      std::memcpy(o + r * p.Dv, acc[r], sizeof(float) * p.Dv);
    }
  }
}

/// attendRows for ND = ceil(max(D, Dv) / 16) <= kMaxDim / 16.
void attendRowsAnyDim(const Problem &p, int64_t b, int64_t kh,
                      const QueryRow *rows, int nrows, int64_t kvBegin,
                      int64_t kvEnd, float *m, float *l, float *o) {
  auto run = [&](auto nd, auto type) {
    constexpr int N = decltype(nd)::value;
    constexpr KVType T = decltype(type)::value;
    if constexpr (T == KVType::BF16 && N % 2 != 0)
      return; // bf16 rows take an even count (below)
    else if (nrows == 1)
      attendRows<N, 1, T>(p, b, kh, rows, 1, kvBegin, kvEnd, m, l, o);
    else
      attendRows<N, kMaxRows, T>(p, b, kh, rows, nrows, kvBegin, kvEnd, m, l,
                                 o);
  };
  auto withType = [&](auto nd) {
    using KV = KVType;
    switch (p.kv) {
    case KV::F32:
      return run(nd, std::integral_constant<KV, KV::F32>());
    case KV::BF16:
      return run(nd, std::integral_constant<KV, KV::BF16>());
    case KV::F16:
      return run(nd, std::integral_constant<KV, KV::F16>());
    }
  };
  int64_t nd = (std::max(p.D, p.Dv) + 15) / 16;
  if (p.kv == KVType::BF16)
    nd += nd % 2; // whole blocks of 32 channels
  switch (nd) {
#define TFC_ND(N)                                                              \
  case N:                                                                      \
    return withType(std::integral_constant<int, N>());
    TFC_ND(1)
    TFC_ND(2)
    TFC_ND(3)
    TFC_ND(4)
    TFC_ND(5)
    TFC_ND(6)
    TFC_ND(7)
    TFC_ND(8)
    TFC_ND(9)
    TFC_ND(10)
    TFC_ND(11)
    TFC_ND(12)
    TFC_ND(13)
    TFC_ND(14)
    TFC_ND(15)
    TFC_ND(16)
#undef TFC_ND
  default:
    break;
  }
}
static_assert(kMaxDim == 16 * 16, "attendRowsAnyDim covers D <= 256");

#endif // __AVX512F__

#if defined(TFC_UK_VECTOR) && !defined(__AVX512F__)
// Without AVX-512 (AVX2 and FMA): a flash attention on the shared
// register-blocked kernel. K^T and V of every (batch, K/V head) are packed
// into panels once per call, then a task owns a block of query rows of one
// (batch, head) and walks the key blocks once: S = Q . K_blk^T and
// O = O * alpha + P . V_blk are blockProduct calls on the panels, the online
// softmax runs along the rows of S in between. Queries are rows here (not
// lanes as in the AVX-512 kernel), so the rescale of O is a pass over the
// block of O, 1/(2 Bc) of the products' work. Causal key blocks past the
// diagonal and the keys before a sliding window are skipped; grouped-query
// heads share their packed K/V head.

using namespace tfc::uk;

constexpr int64_t kPanel = 2 * kLanes; // columns of a packed panel
constexpr int64_t kMaxBr = 10 * kMR;   // most query rows per task
// Keys per block (whole panels). 256 rather than 64: the P.V product's k
// loop runs 4x longer per load and store of O, and O is rescaled a quarter
// as often (two threads, in-process A/B: 12x1024x64 causal GQA and 12x2048x64
// 7-8% faster, 12x128x64 causal 4%, 12x77x64 3%).
constexpr int64_t kBc = 256;
static_assert(kBc % kPanel == 0, "key blocks are whole panels");

/// Rounds n up to whole panels.
int64_t panelsOf(int64_t n) { return (n + kPanel - 1) / kPanel; }

/// Packs K (Skv rows of D) transposed into panels of kPanel keys: panel t
/// holds kt[d * kPanel + c] = K[t * kPanel + c][d], zero past Skv.
void packKeys(const Problem &p, const float *k, float *kt) {
  for (int64_t t = 0; t < panelsOf(p.Skv); ++t)
    for (int64_t c = 0; c < kPanel; ++c) {
      int64_t j = t * kPanel + c;
      float *dst = kt + t * p.D * kPanel + c;
      const float *src = k + j * p.ks[2];
      for (int64_t d = 0; d < p.D; ++d)
        dst[d * kPanel] = j < p.Skv ? src[d * p.ks[3]] : 0.0f;
    }
}

/// Packs V (Skv rows of Dv) into panels of kPanel channels: panel t holds
/// vp[j * kPanel + c] = V[j][t * kPanel + c], zero past Dv.
void packValues(const Problem &p, const float *v, float *vp) {
  for (int64_t t = 0; t < panelsOf(p.Dv); ++t)
    for (int64_t j = 0; j < p.Skv; ++j) {
      const float *src = v + j * p.vs[2];
      float *dst = vp + (t * p.Skv + j) * kPanel;
      for (int64_t c = 0; c < kPanel; ++c) {
        int64_t ch = t * kPanel + c;
        dst[c] = ch < p.Dv ? src[ch * p.vs[3]] : 0.0f;
      }
    }
}

/// 64-byte aligned float buffers carved from one vector.
float *alignedFloats(std::vector<float> &storage, size_t n) {
  if (storage.size() < n + 16)
    storage.resize(n + 16);
  return reinterpret_cast<float *>(
      (reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t(63));
}

void attentionPanels(const Problem &p) {
  int64_t group = p.Hq / p.Hkv;
  int64_t vPanels = panelsOf(p.Dv), ldo = vPanels * kPanel;
  size_t kHead = size_t(panelsOf(p.Skv) * kPanel * p.D);
  size_t vHead = size_t(vPanels * kPanel * p.Skv);
  size_t head = (kHead + vHead + 15) / 16 * 16;
  static thread_local std::vector<float> packedStorage;
  float *packed = alignedFloats(packedStorage, size_t(p.B * p.Hkv) * head);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t kh = 0; kh < p.Hkv; ++kh) {
      float *kt = packed + size_t(b * p.Hkv + kh) * head;
      packKeys(p, p.k + b * p.ks[0] + kh * p.ks[1], kt);
      packValues(p, p.v + b * p.vs[0] + kh * p.vs[1], kt + kHead);
    }
  // Equal query blocks of whole register blocks, at most kMaxBr rows.
  int64_t qBlocks = (p.Sq + kMaxBr - 1) / kMaxBr;
  int64_t br = (p.Sq + qBlocks - 1) / qBlocks;
  br = std::min(kMaxBr, (br + kMR - 1) / kMR * kMR);
  qBlocks = (p.Sq + br - 1) / br;
  forEachTask(p.B * p.Hq * qBlocks, [&](int64_t task) {
    int64_t qb = task % qBlocks, bh = task / qBlocks;
    int64_t b = bh / p.Hq, h = bh % p.Hq;
    // Per thread: S (br x kBc), O (br x ldo), the running max and sum.
    static thread_local std::vector<float> scratch;
    size_t sSize = size_t(kMaxBr * kBc), oSize = size_t(kMaxBr * ldo);
    float *sBlk = alignedFloats(scratch, sSize + oSize + 2 * kMaxBr + kBc + 16);
    float *o = sBlk + sSize, *m = o + oSize, *l = m + kMaxBr;
    // A mask row shared by the block's queries, in base 2, per key block.
    float *bias = l + kMaxBr;
    int64_t i0 = qb * br, rows = std::min(br, p.Sq - i0);
    bool sharedMask = p.mask && (p.ms[2] == 0 || rows == 1);
    const float *q = p.q + b * p.qs[0] + h * p.qs[1] + i0 * p.qs[2];
    const float *kt = packed + size_t(b * p.Hkv + h / group) * head;
    const float *vp = kt + kHead;
    std::fill(o, o + rows * ldo, 0.0f);
    std::fill(m, m + rows, kNegInf);
    std::fill(l, l + rows, 0.0f);
    // Keys past the last row's diagonal are hidden from the whole block.
    int64_t keys = p.Skv;
    if (p.causal)
      keys = std::clamp<int64_t>(i0 + rows + p.causalOffset, 0, p.Skv);
    // Keys before the first row's window are hidden from the block
    // (blocks start on a panel).
    int64_t start =
        std::clamp<int64_t>(windowStart(p, i0), 0, p.Skv) / kPanel * kPanel;
    for (int64_t j0 = start; j0 < keys; j0 += kBc) {
      int64_t kb = std::min(kBc, keys - j0);
      // S = Q . K^T (unscaled), one panel of keys at a time.
      for (int64_t t = 0; t < panelsOf(kb); ++t) {
        Tile<2> tile{
            q,
            p.qs[2],
            p.qs[3],
            kt + (j0 / kPanel + t) * p.D * kPanel,
            p.D,
            sBlk + t * kPanel,
            kBc,
            {firstLanes(kb - t * kPanel), firstLanes(kb - t * kPanel - kLanes)},
            /*allCols=*/kb - t * kPanel >= kPanel,
            false,
            nullptr};
        blockProduct<2>(tile, rows);
      }
      if (sharedMask) {
        const float *mr = p.mask + b * p.ms[0] + h * p.ms[1] + i0 * p.ms[2];
        for (int64_t j = 0; j < kb; ++j)
          bias[j] = toLog2Domain(mr[(j0 + j) * p.ms[3]]);
        std::fill(bias + kb, bias + panelsOf(kb) * kPanel, 0.0f);
      }
      // The online softmax along each row, in base 2.
      for (int64_t r = 0; r < rows; ++r) {
        float *sr = sBlk + r * kBc;
        int64_t i = i0 + r;
        const float *mr =
            p.mask ? p.mask + b * p.ms[0] + h * p.ms[1] + i * p.ms[2] : nullptr;
        int64_t visible =
            p.causal ? std::clamp<int64_t>(i + p.causalOffset + 1 - j0, 0, kb)
                     : kb;
        // Keys before `below` are outside the row's window.
        int64_t below = std::clamp<int64_t>(windowStart(p, i) - j0, 0, kb);
        // Scores in base 2: scale * log2(e) folded when there is no
        // mask (dot products are finite), else (s * scale + mask) taken
        // to base 2 kept finite where it is (a framework's finfo.min
        // mask must not become -inf). Keys past `visible` are -inf;
        // lanes up to the panel's end are read (S rows hold kBc).
        // A soft cap is applied first, the scale with it.
        VecF mxv = vset1(kNegInf), negInf = vset1(kNegInf);
        float scale = p.softcap > 0 ? 1.0f : p.scale;
        for (int64_t j = 0; j < kb; j += kLanes) {
          VecF x = vloadu(sr + j);
          if (p.softcap > 0)
            x = capped(vmul(x, vset1(p.scale / p.softcap)), vset1(p.softcap));
          if (sharedMask) {
            x = vfmadd(x, vset1(scale * kLog2e), vloadu(bias + j));
          } else if (mr) {
            VecF add;
            // A contiguous mask row (the usual) takes vector loads: a
            // lane-by-lane gather took masked attention 12% longer
            // (12x1024x64 causal GQA and 12x512x64 on two threads).
            if (p.ms[3] == 1) {
              add = j + kLanes <= kb
                        ? vloadu(mr + j0 + j)
                        : vloadLanes(mr + j0 + j, firstLanes(kb - j));
            } else {
              float lanes[kLanes];
              for (int64_t c = 0; c < kLanes; ++c)
                lanes[c] = j + c < kb ? mr[(j0 + j + c) * p.ms[3]] : 0.0f;
              add = vloadu(lanes);
            }
            x = toLog2Domain(vfmadd(x, vset1(scale), add), vset1(kLog2e));
          } else {
            x = vmul(x, vset1(scale * kLog2e));
          }
          x = vselect(firstLanes(visible - j), x, negInf);
          if (below > j)
            x = vselect(firstLanes(below - j), negInf, x);
          vstoreu(sr + j, x);
          mxv = vmax(mxv, x);
        }
        float mNew = std::max(m[r], vreduceMax(mxv));
        if (mNew == kNegInf) { // nothing visible yet: P = 0
          std::fill(sr, sr + kb, 0.0f);
          continue;
        }
        float alpha = std::exp2(m[r] - mNew);
        m[r] = mNew;
        // P = 2^(S - m): hidden keys, and the lanes past kb (-inf
        // above), are 0.
        VecF mv = vset1(mNew), sum = vzero();
        for (int64_t j = 0; j < kb; j += kLanes) {
          VecF e = vexp2(vsub(vloadu(sr + j), mv));
          vstoreu(sr + j, e);
          sum = vadd(sum, e);
        }
        l[r] = l[r] * alpha + vreduceAdd(sum);
        if (alpha != 1.0f) {
          float *orow = o + r * ldo;
          VecF av = vset1(alpha);
          for (int64_t c = 0; c < ldo; c += kLanes)
            vstoreu(orow + c, vmul(vloadu(orow + c), av));
        }
      }
      // O += P . V, one panel of channels at a time.
      for (int64_t t = 0; t < vPanels; ++t) {
        Tile<2> tile{sBlk,
                     kBc,
                     1,
                     vp + (t * p.Skv + j0) * kPanel,
                     kb,
                     o + t * kPanel,
                     ldo,
                     {firstLanes(kLanes), firstLanes(kLanes)},
                     /*allCols=*/true,
                     true,
                     nullptr};
        blockProduct<2>(tile, rows);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      float *out = p.out + b * p.os[0] + h * p.os[1] + (i0 + r) * p.os[2];
      float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
      for (int64_t c = 0; c < p.Dv; ++c)
        out[c * p.os[3]] = o[r * ldo + c] * inv;
    }
  });
}

/// How far ahead attendRowsFixed prefetches keys and values, and the
/// floats of a cache line.
constexpr int64_t kPrefetchKeys = 64;
constexpr int64_t kLineFloats = 16;
/// Calls with more bytes of keys and values than this prefetch them: the
/// loads alone kept too few misses in flight (GQA decode, 32 query heads
/// on 8, 4096 keys of 128, 34 MB, two threads, in-process A/B: time ratio
/// 0.83-0.85; 4 query rows 0.75-0.80; one K/V head per query head
/// 0.94-0.98), while K/V that stays in cache ran 10-17% slower with them
/// (12 heads on 4, 1000 keys of 64, 2 MB; a run-time switch in the loop
/// cost as much, hence the template parameter).
constexpr double kPrefetchKVBytes = 8.0 * (1 << 20);

/// attendRowsAnyDim without AVX-512 for R rows: the head dimension along
/// the lanes. For a block of keys, each key row is loaded once per kLanes
/// channels and multiplied into every row's dot product; the online softmax
/// runs along each row's block of scores; then kLanes channels of the rows'
/// accumulators stay in registers while the value rows stream past with the
/// rows' weights broadcast. With fewer than 4 rows, G keys (and CV channel
/// vectors) go together so that at least 4 independent FMA chains hide the
/// FMA latency. With `Prefetch`, each block also fetches the keys and
/// values kPrefetchKeys ahead into L1.
template <int R, bool Prefetch>
void attendRowsFixed(const Problem &p, int64_t b, int64_t kh,
                     const QueryRow *rows, int64_t kvBegin, int64_t kvEnd,
                     float *mOut, float *lOut, float *o) {
  constexpr int G = R >= 4 ? 1 : 4 / R, CV = G;
  constexpr int64_t kKeys = 4 * kLanes; // keys per block, a multiple of G
  constexpr int64_t kVecs = kMaxDim / kLanes;
  const float *kb = p.k + b * p.ks[0] + kh * p.ks[1];
  const float *vb = p.v + b * p.vs[0] + kh * p.vs[1];
  int64_t nd = (p.D + kLanes - 1) / kLanes, nv = (p.Dv + kLanes - 1) / kLanes;
  // Vectors of all lanes take plain loads (AVX2's masked ones are slow on
  // AMD cores), only a last partial one is masked.
  int64_t dWhole = p.D / kLanes, vWhole = p.Dv / kLanes;
  LaneMask dl[kVecs], vl[kVecs + CV];
  for (int64_t c = 0; c < kVecs + CV; ++c) {
    if (c < kVecs)
      dl[c] = firstLanes(p.D - kLanes * c);
    vl[c] = firstLanes(p.Dv - kLanes * c); // none past Dv
  }
  alignas(64) float q[R][kMaxDim], acc[R][kMaxDim + CV * kLanes];
  alignas(64) float w[R][kKeys];
  float m[R], l[R];
  int64_t begin[R], end[R];
  const float *maskRow[R];
  // Queries scaled by queryFactor, zero past D.
  VecF qScale = vset1(queryFactor(p));
  for (int r = 0; r < R; ++r) {
    const float *qr =
        p.q + b * p.qs[0] + rows[r].h * p.qs[1] + rows[r].i * p.qs[2];
    for (int64_t c = 0; c < nd; ++c)
      vstoreu(q[r] + kLanes * c,
              vmul(vloadLanes(qr + kLanes * c, dl[c]), qScale));
    std::fill(acc[r], acc[r] + (nv + CV) * kLanes, 0.0f);
    m[r] = kNegInf;
    l[r] = 0;
    // Causal: row i sees keys j <= i + offset; its window starts at begin.
    end[r] = p.causal ? std::min(kvEnd, rows[r].i + p.causalOffset + 1) : kvEnd;
    begin[r] = windowStart(p, rows[r].i);
    maskRow[r] = p.mask ? p.mask + b * p.ms[0] + rows[r].h * p.ms[1] +
                              rows[r].i * p.ms[2]
                        : nullptr;
  }
  VecF log2e = vset1(kLog2e), negInf = vset1(kNegInf);
  for (int64_t j0 = kvBegin; j0 < kvEnd; j0 += kKeys) {
    int64_t n = std::min(kKeys, kvEnd - j0);
    // Scores of the block, base 2; keys past n repeat the last one (their
    // scores are hidden below).
    bool prefetch = Prefetch && j0 + kPrefetchKeys < kvEnd;
    for (int64_t j = 0; j < n; j += G) {
      const float *kr[G];
      for (int g = 0; g < G; ++g)
        kr[g] = kb + (j0 + std::min<int64_t>(j + g, n - 1)) * p.ks[2];
      VecF dot[R][G];
      for (int r = 0; r < R; ++r)
        for (int g = 0; g < G; ++g)
          dot[r][g] = vzero();
      if (prefetch)
        for (int g = 0; g < G; ++g) {
          int64_t ahead = std::min(j0 + j + g + kPrefetchKeys, kvEnd - 1);
          for (int64_t f = 0; f < p.D; f += kLineFloats)
            prefetchL1(kb + ahead * p.ks[2] + f);
          for (int64_t f = 0; f < p.Dv; f += kLineFloats)
            prefetchL1(vb + ahead * p.vs[2] + f);
        }
      for (int64_t c = 0; c < nd; ++c) {
        VecF kc[G];
        for (int g = 0; g < G; ++g)
          kc[g] = c < dWhole ? vloadu(kr[g] + kLanes * c)
                             : vloadLanes(kr[g] + kLanes * c, dl[c]);
        for (int r = 0; r < R; ++r) {
          VecF qc = vloadu(q[r] + kLanes * c);
          for (int g = 0; g < G; ++g)
            dot[r][g] = vfmadd(qc, kc[g], dot[r][g]);
        }
      }
      for (int r = 0; r < R; ++r)
        for (int g = 0; g < G; ++g)
          w[r][j + g] = vreduceAdd(dot[r][g]);
    }
    // The online softmax along each row: the mask added, keys past the
    // row's end hidden, the accumulator rescaled when the max moves.
    for (int r = 0; r < R; ++r) {
      int64_t visible = std::clamp<int64_t>(end[r] - j0, 0, n);
      int64_t below = std::clamp<int64_t>(begin[r] - j0, 0, n);
      VecF top = negInf;
      for (int64_t j = 0; j < kKeys; j += kLanes) {
        VecF x = vloadu(w[r] + j);
        if (p.softcap > 0)
          x = capped(x, vset1(p.softcap * kLog2e));
        if (maskRow[r]) {
          float bias[kLanes];
          for (int64_t c = 0; c < kLanes; ++c)
            bias[c] =
                j + c < visible ? maskRow[r][(j0 + j + c) * p.ms[3]] : 0.0f;
          x = vadd(x, toLog2Domain(vloadu(bias), log2e));
        }
        x = vselect(firstLanes(visible - j), x, negInf);
        if (below > j)
          x = vselect(firstLanes(below - j), negInf, x);
        vstoreu(w[r] + j, x);
        top = vmax(top, x);
      }
      float mx = vreduceMax(top);
      if (mx == kNegInf) { // no visible key here
        std::fill(w[r], w[r] + kKeys, 0.0f);
        continue;
      }
      if (mx > m[r]) {
        float alpha = std::exp2(m[r] - mx); // 0 while m is -inf
        l[r] *= alpha;
        m[r] = mx;
        for (int64_t c = 0; c < nv; ++c)
          vstoreu(acc[r] + kLanes * c,
                  vmul(vloadu(acc[r] + kLanes * c), vset1(alpha)));
      }
      VecF sum = vzero(), mv = vset1(m[r]);
      for (int64_t j = 0; j < kKeys; j += kLanes) {
        VecF e = vexp2(vsub(vloadu(w[r] + j), mv));
        vstoreu(w[r] + j, e);
        sum = vadd(sum, e);
      }
      l[r] += vreduceAdd(sum);
    }
    // acc += weights . V, CV x kLanes channels of every row in registers
    // (channels past Dv load nothing and land in acc's padding).
    for (int64_t c0 = 0; c0 < nv; c0 += CV) {
      VecF a[R][CV];
      for (int r = 0; r < R; ++r)
        for (int x = 0; x < CV; ++x)
          a[r][x] = vloadu(acc[r] + kLanes * (c0 + x));
      for (int64_t j = 0; j < n; ++j) {
        const float *vr = vb + (j0 + j) * p.vs[2];
        for (int x = 0; x < CV; ++x) {
          VecF vc = c0 + x < vWhole
                        ? vloadu(vr + kLanes * (c0 + x))
                        : vloadLanes(vr + kLanes * (c0 + x), vl[c0 + x]);
          for (int r = 0; r < R; ++r)
            a[r][x] = fmaddBroadcast(w[r] + j, vc, a[r][x]);
        }
      }
      for (int r = 0; r < R; ++r)
        for (int x = 0; x < CV; ++x)
          vstoreu(acc[r] + kLanes * (c0 + x), a[r][x]);
    }
  }
  for (int r = 0; r < R; ++r) {
    mOut[r] = m[r];
    lOut[r] = l[r];
    std::memcpy(o + r * p.Dv, acc[r], sizeof(float) * p.Dv);
  }
}

void attendRowsAnyDim(const Problem &p, int64_t b, int64_t kh,
                      const QueryRow *rows, int nrows, int64_t kvBegin,
                      int64_t kvEnd, float *m, float *l, float *o) {
  bool streamed =
      4.0 * double(p.B * p.Hkv * p.Skv) * double(p.D + p.Dv) > kPrefetchKVBytes;
  switch (nrows) {
#define TFC_ROWS(N)                                                            \
  case N:                                                                      \
    return streamed ? attendRowsFixed<N, true>(p, b, kh, rows, kvBegin, kvEnd, \
                                               m, l, o)                        \
                    : attendRowsFixed<N, false>(p, b, kh, rows, kvBegin,       \
                                                kvEnd, m, l, o);
    TFC_ROWS(1)
    TFC_ROWS(2)
    TFC_ROWS(3)
    TFC_ROWS(4)
    TFC_ROWS(5)
    TFC_ROWS(6)
    TFC_ROWS(7)
    TFC_ROWS(8)
#undef TFC_ROWS
  default:
    break;
  }
}
static_assert(kMaxRows == 8, "attendRowsAnyDim covers up to 8 rows");
#endif

#ifdef TFC_UK_VECTOR
/// Query blocks of at most this many rows take attentionFewRows (one
/// thread, Skv = 4096: 10 rows 2.6 against 3.2 ms for the block kernel, 12
/// rows 3.1 against 3.4, 16 rows 4.0 against 3.4).
constexpr int64_t kFewRows = 12;

/// Few query rows per head (decode, short query blocks): the rows that
/// share a K/V head (its grouped-query heads times the query rows) go
/// through attendRows together, kMaxRows at a time, and the keys are split
/// into chunks attended in parallel; the partial results are then merged
/// per row. The keys and values may lie in consecutive parts (a decoder's
/// cache and its new tokens): a chunk reads one part's view.
void attentionFewRows(const Problem &p, const KeyRanges &keys,
                      const KVPart *parts, int nparts) {
  // Chunks of at most kChunk keys of each key range within each part.
  constexpr int64_t kChunk = 512;
  struct Segment {
    const Problem *view;
    int64_t begin, end, firstChunk; // keys of the view
  };
  Segment segments[2 * kMaxKVParts];
  int nsegments = 0;
  int64_t chunks = 0;
  for (int r = 0; r < keys.count; ++r)
    for (int s = 0; s < nparts; ++s) {
      int64_t first = parts[s].first;
      int64_t begin = std::max(keys.begin[r], first),
              end = std::min(keys.end[r], first + parts[s].view.Skv);
      if (begin >= end)
        continue;
      segments[nsegments++] = {&parts[s].view, begin - first, end - first,
                               chunks};
      chunks += (end - begin + kChunk - 1) / kChunk;
    }
  int64_t group = p.Hq / p.Hkv;
  int64_t perHead = group * p.Sq; // rows sharing one K/V head
  int64_t sets = (perHead + kMaxRows - 1) / kMaxRows;
  int64_t rowsTotal = p.B * p.Hq * p.Sq;
  // Partial results of row (b, h, i) for chunk c at ((b*Hq + h)*Sq + i)*chunks
  // + c.
  // Kept across calls (per calling thread) and only grown: fresh pages are
  // slow to touch, and a decoder calls this once per step and layer.
  static thread_local std::vector<float> partials;
  size_t results = size_t(rowsTotal * chunks);
  if (partials.size() < results * (p.Dv + 2))
    partials.resize(results * (p.Dv + 2));
  float *partO = partials.data(), *partM = partO + results * p.Dv,
        *partL = partM + results;
  forEachTask(p.B * p.Hkv * sets * chunks, [&](int64_t t) {
    int64_t c = t % chunks, rest = t / chunks;
    int64_t set = rest % sets, bkh = rest / sets;
    int64_t b = bkh / p.Hkv, kh = bkh % p.Hkv;
    QueryRow rows[kMaxRows];
    int nrows = 0;
    for (int64_t x = set * kMaxRows;
         x < std::min(perHead, (set + 1) * kMaxRows); ++x)
      rows[nrows++] = {kh * group + x / p.Sq, x % p.Sq};
    float m[kMaxRows], l[kMaxRows];
    alignas(64) float o[kMaxRows * kMaxDim];
    int s = nsegments - 1;
    while (segments[s].firstChunk > c)
      --s;
    const Segment &seg = segments[s];
    int64_t begin = seg.begin + (c - seg.firstChunk) * kChunk;
    attendRowsAnyDim(*seg.view, b, kh, rows, nrows, begin,
                     std::min(seg.end, begin + kChunk), m, l, o);
    for (int r = 0; r < nrows; ++r) {
      int64_t at = ((b * p.Hq + rows[r].h) * p.Sq + rows[r].i) * chunks + c;
      partM[at] = m[r];
      partL[at] = l[r];
      std::memcpy(partO + at * p.Dv, o + r * p.Dv, sizeof(float) * p.Dv);
    }
  });
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rowsTotal; ++row) {
    float mx = kNegInf;
    for (int64_t c = 0; c < chunks; ++c)
      mx = std::max(mx, partM[row * chunks + c]);
    float l = 0;
    float acc[kMaxDim] = {};
    if (mx != kNegInf)
      for (int64_t c = 0; c < chunks; ++c) {
        int64_t t = row * chunks + c;
        if (partM[t] == kNegInf)
          continue;
        float w = std::exp2(partM[t] - mx);
        l += partL[t] * w;
        for (int64_t d = 0; d < p.Dv; ++d)
          acc[d] += partO[t * p.Dv + d] * w;
      }
    int64_t i = row % p.Sq, bh = row / p.Sq;
    float *o =
        p.out + (bh / p.Hq) * p.os[0] + (bh % p.Hq) * p.os[1] + i * p.os[2];
    for (int64_t d = 0; d < p.Dv; ++d)
      o[d] = l > 0 ? acc[d] / l : 0.0f;
  }
}

bool fastPathApplies(const Problem &p) {
  auto fits32 = [](int64_t x) {
    return x >= 0 && x < std::numeric_limits<int32_t>::max() / 2;
  };
  return p.qs[3] == 1 && p.ks[3] == 1 && p.vs[3] == 1 && p.os[3] == 1 &&
         p.D <= kMaxDim && p.Dv <= kMaxDim && fits32(p.Sq) && fits32(p.Skv) &&
         (!p.mask || fits32(p.ms[2] * (p.Sq + 32)));
}

#endif

/// The call of `q` on keys and values of `k`'s and `v`'s shapes (and, for
/// 16-bit ones, of type `kv`); Q and the output of element Q: f32, or
/// bf16 bits (uint16_t).
template <typename T, typename Q = float>
Problem problemOf(const MemRef<4, Q> &q, const MemRef<4, T> &k,
                  const MemRef<4, T> &v, const MemRef<4> *mask,
                  MemRef<4, Q> &out, float scale, int32_t flags, int32_t causal,
                  float softcap, int64_t window, int64_t skv,
                  KVType kv = KVType::F32) {
  bool hasMask = (flags & TFC_UK_ATTENTION_MASK) != 0;
  Problem p;
  p.B = q.sizes[0];
  p.Hq = q.sizes[1];
  p.Sq = q.sizes[2];
  p.D = q.sizes[3];
  p.Hkv = k.sizes[1];
  p.Skv = skv;
  p.Dv = v.sizes[3];
  if constexpr (std::is_same_v<Q, float>) {
    p.q = q.data();
    p.out = out.data();
  } else {
    p.q = p.out = nullptr;
    p.q16 = q.data();
    p.out16 = out.data();
  }
  p.kv = kv;
  if constexpr (std::is_same_v<T, float>) {
    p.k = k.data();
    p.v = v.data();
  } else {
    p.k = p.v = nullptr;
    p.k16 = k.data();
    p.v16 = v.data();
  }
  p.mask = hasMask ? mask->data() : nullptr;
  for (int d = 0; d < 4; ++d) {
    p.qs[d] = q.strides[d];
    p.ks[d] = k.strides[d];
    p.vs[d] = v.strides[d];
    p.os[d] = out.strides[d];
    // Size-1 mask dimensions broadcast.
    p.ms[d] = hasMask && mask->sizes[d] != 1 ? mask->strides[d] : 0;
  }
  p.scale = scale;
  p.softcap = softcap > 0 ? softcap : 0;
  p.causal = causal != 0;
  p.causalOffset = p.Skv - p.Sq;
  // A window of Skv or more keys hides none (windowStart <= 0 for every row).
  p.window = window > 0 && window < p.Skv ? window : 0;
  p.bf16 = (flags & TFC_UK_ATTENTION_BF16) != 0;
  return p;
}

bool isEmpty(const Problem &p) {
  return p.B == 0 || p.Hq == 0 || p.Sq == 0 || p.Dv == 0;
}

/// `k` and `v` copied into `kc` and `vc` from key `first` on.
template <typename T>
void copyPart(const MemRef<4, T> &k, const MemRef<4, T> &v, int64_t first,
              MemRef<4, T> &kc, MemRef<4, T> &vc) {
  for (auto [src, dst] : {std::pair{&k, &kc}, std::pair{&v, &vc}})
    for (int64_t b = 0; b < src->sizes[0]; ++b)
      for (int64_t h = 0; h < src->sizes[1]; ++h)
        for (int64_t j = 0; j < src->sizes[2]; ++j) {
          const T *from = src->data() + b * src->strides[0] +
                          h * src->strides[1] + j * src->strides[2];
          T *to = dst->data() + b * dst->strides[0] + h * dst->strides[1] +
                  (first + j) * dst->strides[2];
          for (int64_t d = 0; d < src->sizes[3]; ++d)
            to[d] = from[d * src->strides[3]];
        }
}

/// A contiguous [B, H, S, D] buffer in `storage`.
template <typename T>
MemRef<4, T> contiguous(std::vector<T> &storage, int64_t b, int64_t h,
                        int64_t s, int64_t d) {
  storage.resize(size_t(b * h * s * d));
  MemRef<4, T> m{storage.data(),
                 storage.data(),
                 0,
                 {b, h, s, d},
                 {h * s * d, s * d, d, 1}};
  return m;
}

/// An f32 copy of 16-bit K or V (of type T), contiguous, in `storage`
/// (the rows on the threads; 16 values at a time where the kernels are
/// AVX-512 and the rows contiguous).
template <KVType T>
MemRef<4> widened(std::vector<float> &storage, const MemRef<4, uint16_t> &x) {
  const int64_t *n = x.sizes;
  MemRef<4> w = contiguous(storage, n[0], n[1], n[2], n[3]);
  int64_t rows = n[0] * n[1] * n[2];
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t j = row % n[2], h = row / n[2] % n[1], b = row / n[2] / n[1];
    const uint16_t *from =
        x.data() + b * x.strides[0] + h * x.strides[1] + j * x.strides[2];
    float *to = w.data() + row * n[3];
    int64_t d = 0;
#ifdef __AVX512F__
    for (; x.strides[3] == 1 && d < n[3]; d += 16) {
      __m256i bits = _mm256_maskz_loadu_epi16(firstLanes(n[3] - d), from + d);
      __m512 f =
          T == KVType::F16 ? tfc::uk::widenF16(bits) : tfc::uk::widenBF16(bits);
      _mm512_mask_storeu_ps(to + d, firstLanes(n[3] - d), f);
    }
#endif
    for (; d < n[3]; ++d) {
      uint16_t bits = from[d * x.strides[3]];
      if constexpr (T == KVType::F16) {
        _Float16 f;
        std::memcpy(&f, &bits, 2);
        to[d] = float(f);
      } else {
        to[d] = tfc::uk::bf16Value(bits);
      }
    }
  }
  return w;
}

#ifdef __AVX512F__
/// Runs `p` (its keys cut to `keys`) on the AVX-512 kernels if they take
/// it: the few-row kernel for any K/V type, query blocks for f32 K and V or,
/// on bf16 dot products, bf16 ones with bf16 queries. False: they do not.
bool attentionAvx512(const Problem &p, const KeyRanges &keys) {
  if (!fastPathApplies(p))
    return false;
  if (p.Sq <= kFewRows) {
    KVPart whole{p, 0};
    attentionFewRows(p, keys, &whole, 1);
    return true;
  }
#ifdef TFC_UK_BF16DOT
  constexpr bool kPairs = true;
#else
  constexpr bool kPairs = false;
#endif
  if (p.kv != KVType::F32 && !(kPairs && p.kv == KVType::BF16 && p.bf16))
    return false;
  if (p.Sq <= 16)
    attentionBlocked<1>(p);
  else
    attentionBlocked<2>(p);
  return true;
}
#endif

/// Attention on 16-bit K and V of type T (ukernels.h's _f32_bf16 and
/// _f32_f16 entries). The AVX-512 few-row kernel reads them as they are
/// (widened as it loads them), and so does a bf16 query block on bf16 dot
/// products (it pairs them); the other paths read K and V widened to f32.
template <KVType T>
void attention16(MemRef<4> *q, MemRef<4, uint16_t> *k, MemRef<4, uint16_t> *v,
                 MemRef<4> *mask, MemRef<4> *out, float scale, int32_t flags,
                 int32_t causal, float softcap, int64_t window) {
  Problem p = problemOf(*q, *k, *v, mask, *out, scale, flags, causal, softcap,
                        window, k->sizes[2], T);
  if (isEmpty(p))
    return;
#ifdef __AVX512F__
  KeyRanges keys = keyRanges(p);
  p.Skv = keys.end[keys.count - 1];
  if (attentionAvx512(p, keys))
    return;
#endif
  // Kept across calls (per calling thread) and only grown: fresh pages are
  // slow to touch, and an f16 model's query blocks come here every call.
  static thread_local std::vector<float> kStorage, vStorage;
  MemRef<4> kw = widened<T>(kStorage, *k), vw = widened<T>(vStorage, *v);
  _mlir_ciface_tfc_uk_attention_f32(q, &kw, &vw, mask, out, scale, flags,
                                    causal, softcap, window);
}

/// Attention with K and V in two parts along the key axis (the kv2
/// entries; K and V of element E, of type T): the few-row kernel reads the
/// parts where they are; the other paths read them concatenated, through
/// `oneBuffer` (the entry of one K and one V buffer).
template <typename E, KVType T, typename OneBuffer>
void attentionInParts(MemRef<4> *q, MemRef<4, E> *k0, MemRef<4, E> *k1,
                      MemRef<4, E> *v0, MemRef<4, E> *v1, MemRef<4> *mask,
                      MemRef<4> *out, float scale, int32_t flags,
                      int32_t causal, float softcap, int64_t window,
                      OneBuffer oneBuffer) {
  int64_t split = k0->sizes[2], skv = split + k1->sizes[2];
  Problem p = problemOf(*q, *k0, *v0, mask, *out, scale, flags, causal, softcap,
                        window, skv, T);
  if (isEmpty(p))
    return;
#ifdef TFC_UK_VECTOR
    // (Without AVX-512 the few-row kernel reads f32 K and V only.)
#ifdef __AVX512F__
  constexpr bool fewRowKernel = true;
#else
  constexpr bool fewRowKernel = T == KVType::F32;
#endif
  KVPart parts[kMaxKVParts] = {partOf(p, *k0, *v0, 0),
                               partOf(p, *k1, *v1, split)};
  if (fewRowKernel && p.Sq <= kFewRows && fastPathApplies(parts[0].view) &&
      fastPathApplies(parts[1].view)) {
    KeyRanges keys = keyRanges(p);
    attentionFewRows(p, keys, parts, kMaxKVParts);
    return;
  }
#endif
  std::vector<E> kStorage, vStorage;
  MemRef<4, E> kc = contiguous(kStorage, p.B, p.Hkv, skv, p.D);
  MemRef<4, E> vc = contiguous(vStorage, p.B, p.Hkv, skv, p.Dv);
  copyPart(*k0, *v0, 0, kc, vc);
  copyPart(*k1, *v1, split, kc, vc);
  oneBuffer(q, &kc, &vc, mask, out, scale, flags, causal, softcap, window);
}

/// Whether the query blocks on bf16 products run `p` (its keys cut to
/// their last visible one), reading Q and writing the output as bf16.
bool bf16QueryBlocksRun(const Problem &p) {
#if defined(__AVX512F__) && defined(TFC_UK_BF16DOT)
  return p.Sq > kFewRows && p.kv == KVType::BF16 && fastPathApplies(p);
#else
  (void)p;
  return false;
#endif
}

/// run(qf, of) with bf16 `q` widened to f32 in qf and f32 results in of,
/// rounded to bf16 into `out` after (to nearest, ties to even).
template <typename Run>
void withF32QueryAndOutput(MemRef<4, uint16_t> *q, MemRef<4, uint16_t> *out,
                           Run &&run) {
  static thread_local std::vector<float> qStorage, oStorage;
  MemRef<4> qf = widened<KVType::BF16>(qStorage, *q);
  const int64_t *n = out->sizes;
  MemRef<4> of = contiguous(oStorage, n[0], n[1], n[2], n[3]);
  run(&qf, &of);
  int64_t rows = n[0] * n[1] * n[2];
#pragma omp parallel for schedule(static) if (rows * n[3] >= (1 << 16))
  for (int64_t row = 0; row < rows; ++row) {
    int64_t i = row % n[2], h = row / n[2] % n[1], b = row / n[2] / n[1];
    uint16_t *to = out->data() + b * out->strides[0] + h * out->strides[1] +
                   i * out->strides[2];
    for (int64_t d = 0; d < n[3]; ++d)
      to[d * out->strides[3]] = tfc::uk::bf16Bits(of.data()[row * n[3] + d]);
  }
}

/// Attention with Q, K, V and the output stored as bf16 (the _bf16
/// entries): the query blocks on bf16 products read and write them as
/// they are; every other path (a few rows, no bf16 dot products) runs on Q
/// widened to f32 and rounds its f32 output.
void attentionBf16(MemRef<4, uint16_t> *q, MemRef<4, uint16_t> *k,
                   MemRef<4, uint16_t> *v, MemRef<4> *mask,
                   MemRef<4, uint16_t> *out, float scale, int32_t flags,
                   int32_t causal, float softcap, int64_t window) {
  flags |= TFC_UK_ATTENTION_BF16;
  Problem p = problemOf(*q, *k, *v, mask, *out, scale, flags, causal, softcap,
                        window, k->sizes[2], KVType::BF16);
  if (isEmpty(p))
    return;
#if defined(__AVX512F__) && defined(TFC_UK_BF16DOT)
  KeyRanges keys = keyRanges(p);
  p.Skv = keys.end[keys.count - 1];
  if (bf16QueryBlocksRun(p)) {
    if (p.Sq <= 16)
      attentionBlocked<1>(p);
    else
      attentionBlocked<2>(p);
    return;
  }
#endif
  withF32QueryAndOutput(q, out, [&](MemRef<4> *qf, MemRef<4> *of) {
    attention16<KVType::BF16>(qf, k, v, mask, of, scale, flags, causal, softcap,
                              window);
  });
}

} // namespace

extern "C" void _mlir_ciface_tfc_uk_attention_f32(
    MemRef<4> *q, MemRef<4> *k, MemRef<4> *v, MemRef<4> *mask, MemRef<4> *out,
    float scale, int32_t flags, int32_t causal, float softcap, int64_t window) {
  Problem p = problemOf(*q, *k, *v, mask, *out, scale, flags, causal, softcap,
                        window, k->sizes[2]);
  if (isEmpty(p))
    return;
  // Keys a padding mask hides from every row: the few-row kernel skips
  // them all, the others the ones past the last visible key.
  KeyRanges keys = keyRanges(p);
  p.Skv = keys.end[keys.count - 1];
#ifdef __AVX512F__
  if (attentionAvx512(p, keys))
    return;
#elif defined(TFC_UK_VECTOR)
  if (p.Sq <= kFewRows && fastPathApplies(p)) {
    KVPart whole{p, 0};
    attentionFewRows(p, keys, &whole, 1);
    return;
  }
  attentionPanels(p);
  return;
#endif
  attentionReference(p);
}

extern "C" void _mlir_ciface_tfc_uk_attention_kv2_f32(
    MemRef<4> *q, MemRef<4> *k0, MemRef<4> *k1, MemRef<4> *v0, MemRef<4> *v1,
    MemRef<4> *mask, MemRef<4> *out, float scale, int32_t flags, int32_t causal,
    float softcap, int64_t window) {
  attentionInParts<float, KVType::F32>(q, k0, k1, v0, v1, mask, out, scale,
                                       flags, causal, softcap, window,
                                       _mlir_ciface_tfc_uk_attention_f32);
}

// The entries with 16-bit K and V (ukernels.h).
#define TFC_ATTENTION16_ENTRIES(SUFFIX, TYPE)                                  \
  extern "C" void _mlir_ciface_tfc_uk_attention_f32_##SUFFIX(                  \
      MemRef<4> *q, MemRef<4, uint16_t> *k, MemRef<4, uint16_t> *v,            \
      MemRef<4> *mask, MemRef<4> *out, float scale, int32_t flags,             \
      int32_t causal, float softcap, int64_t window) {                         \
    attention16<KVType::TYPE>(q, k, v, mask, out, scale, flags, causal,        \
                              softcap, window);                                \
  }                                                                            \
  extern "C" void _mlir_ciface_tfc_uk_attention_kv2_f32_##SUFFIX(              \
      MemRef<4> *q, MemRef<4, uint16_t> *k0, MemRef<4, uint16_t> *k1,          \
      MemRef<4, uint16_t> *v0, MemRef<4, uint16_t> *v1, MemRef<4> *mask,       \
      MemRef<4> *out, float scale, int32_t flags, int32_t causal,              \
      float softcap, int64_t window) {                                         \
    attentionInParts<uint16_t, KVType::TYPE>(                                  \
        q, k0, k1, v0, v1, mask, out, scale, flags, causal, softcap, window,   \
        attention16<KVType::TYPE>);                                            \
  }
TFC_ATTENTION16_ENTRIES(bf16, BF16)
TFC_ATTENTION16_ENTRIES(f16, F16)
#undef TFC_ATTENTION16_ENTRIES

extern "C" void _mlir_ciface_tfc_uk_attention_bf16(
    MemRef<4, uint16_t> *q, MemRef<4, uint16_t> *k, MemRef<4, uint16_t> *v,
    MemRef<4> *mask, MemRef<4, uint16_t> *out, float scale, int32_t flags,
    int32_t causal, float softcap, int64_t window) {
  attentionBf16(q, k, v, mask, out, scale, flags, causal, softcap, window);
}

/// The two-part form: the query blocks read K and V concatenated (as the
/// f32-query entries' do); fewer rows run the two-part f32-query entry
/// (its few-row kernel reads the parts where they are) on Q widened.
extern "C" void _mlir_ciface_tfc_uk_attention_kv2_bf16(
    MemRef<4, uint16_t> *q, MemRef<4, uint16_t> *k0, MemRef<4, uint16_t> *k1,
    MemRef<4, uint16_t> *v0, MemRef<4, uint16_t> *v1, MemRef<4> *mask,
    MemRef<4, uint16_t> *out, float scale, int32_t flags, int32_t causal,
    float softcap, int64_t window) {
  int64_t split = k0->sizes[2], skv = split + k1->sizes[2];
  Problem p = problemOf(*q, *k0, *v0, mask, *out, scale, flags, causal, softcap,
                        window, skv, KVType::BF16);
  if (isEmpty(p))
    return;
  if (!bf16QueryBlocksRun(p)) {
    withF32QueryAndOutput(q, out, [&](MemRef<4> *qf, MemRef<4> *of) {
      _mlir_ciface_tfc_uk_attention_kv2_f32_bf16(
          qf, k0, k1, v0, v1, mask, of, scale, flags | TFC_UK_ATTENTION_BF16,
          causal, softcap, window);
    });
    return;
  }
  std::vector<uint16_t> kStorage, vStorage;
  MemRef<4, uint16_t> kc = contiguous(kStorage, p.B, p.Hkv, skv, p.D);
  MemRef<4, uint16_t> vc = contiguous(vStorage, p.B, p.Hkv, skv, p.Dv);
  copyPart(*k0, *v0, 0, kc, vc);
  copyPart(*k1, *v1, split, kc, vc);
  attentionBf16(q, &kc, &vc, mask, out, scale, flags, causal, softcap, window);
}
