//===- decode.cpp - Attention of a few query rows per K/V head ------------===//
//
// Query blocks of at most kFewRows rows (decode, short query blocks) take
// attentionFewRows: the head dimension along the lanes (queries in the
// lanes, as the query-block kernels have them, would leave most lanes idle
// for so few rows), the rows that share a K/V head taken together so that
// each block of keys and values is read once for all of them, and the keys
// split across tasks whose partial results are then merged (split-KV). One
// kernel for either ISA, written against simd.h; with AVX-512 it also
// reads bf16 and f16 K and V as they are.
//
//===----------------------------------------------------------------------===//

#include "attention/attention.h"
#include "microkernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#ifdef TFC_UK_VECTOR

namespace tfc::uk::attention {
namespace {

/// One query row: query head h, row i.
struct QueryRow {
  int64_t h, i;
};

/// Most query rows one call of attendRows takes: the query heads of a
/// grouped-query group times the rows of a short query block.
constexpr int kMaxRows = 8;

/// How far ahead attendRows prefetches keys and values, and the
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

/// The elements of K and V of type T: f32, or the bits of bf16 and f16.
template <KVType T>
using KVElement = std::conditional_t<T == KVType::F32, float, uint16_t>;

/// The channel vectors of K or V rows of n channels: the lanes of each
/// vector c (none past n), and the vectors all of whose lanes are channels.
struct ChannelMasks {
  static constexpr int64_t kVectors = kMaxDim / kLanes + 4;
  LaneMask lanes[kVectors];
  int64_t whole;
#ifdef __AVX512F__
  __mmask32 halves[kVectors / 2]; // of a bf16 row's blocks of 32 channels
#endif
  explicit ChannelMasks(int64_t n) : whole(n / kLanes) {
    for (int64_t c = 0; c < kVectors; ++c)
      lanes[c] = firstLanes(n - kLanes * c);
#ifdef __AVX512F__
    for (int64_t m = 0; m < kVectors / 2; ++m)
      halves[m] = firstHalves(n - 32 * m);
#endif
  }
};

/// The channel in lane i of vector c of a row of type T (loadChannels).
template <KVType T> inline int64_t channelOf(int64_t c, int64_t i) {
  return T == KVType::BF16 ? 32 * (c / 2) + 2 * i + c % 2 : kLanes * c + i;
}

/// Vector c of the channels of a K or V row of type T, as f32 (0 past the
/// row's channels). f32 and f16 rows: vector c holds channels [kLanes c,
/// kLanes (c + 1)). bf16 rows (with AVX-512, an even count of vectors):
/// vector 2m holds the even channels of block m of 32 channels and 2m + 1
/// the odd ones (channelOf; a bf16 is the high half of its f32, so a shift
/// or a mask widens each half of the 32-bit lanes: no conversion).
template <KVType T>
inline VecF loadChannels(const KVElement<T> *row, int64_t c,
                         const ChannelMasks &m) {
  if constexpr (T == KVType::F32) {
    // Vectors of all lanes take plain loads (AVX2's masked ones are slow on
    // AMD cores), only a last partial one is masked.
    return c < m.whole ? vloadu(row + kLanes * c)
                       : vloadLanes(row + kLanes * c, m.lanes[c]);
  } else {
#ifdef __AVX512F__
    if constexpr (T == KVType::BF16) {
      __m512i x = _mm512_maskz_loadu_epi16(m.halves[c / 2], row + 32 * (c / 2));
      return _mm512_castsi512_ps(
          c % 2 ? _mm512_and_si512(x, _mm512_set1_epi32(int(0xffff0000u)))
                : _mm512_slli_epi32(x, 16));
    }
    return widenF16(_mm256_maskz_loadu_epi16(m.lanes[c], row + 16 * c));
#endif
  }
}

/// Attention of R query rows that share the K/V head kh of batch b, to
/// keys [kvBegin, kvEnd): per row, the max m of its scores (base 2; -inf
/// when no key is visible), the sum l of 2^(s - m) and the unnormalised
/// output o[r * Dv + 0 : Dv]. The head dimension runs along the lanes. For
/// a block of keys, each key row is loaded once per vector of channels and
/// multiplied into every row's dot product; the online softmax runs along
/// each row's block of scores; then CV channel vectors of the rows'
/// accumulators stay in registers while the value rows stream past with the
/// rows' weights broadcast. With fewer than 4 rows, G keys (and CV channel
/// vectors) go together so that at least 4 independent FMA chains hide the
/// FMA latency. With `Prefetch`, each block also fetches the keys and
/// values kPrefetchKeys ahead into L1. K and V of type T.
template <int R, bool Prefetch, KVType T>
void attendRows(const Problem &p, int64_t b, int64_t kh, const QueryRow *rows,
                int64_t kvBegin, int64_t kvEnd, float *mOut, float *lOut,
                float *o) {
  using E = KVElement<T>;
  constexpr int G = R >= 4 ? 1 : 4 / R;
  // bf16 rows: the two vectors of a block of 32 channels in one group.
  constexpr int CV = T == KVType::BF16 ? std::max(G, 2) : G;
  constexpr int64_t kKeys = 4 * kLanes; // keys per block, a multiple of G
  constexpr int64_t kLineElements = 4 * kLineFloats / int64_t(sizeof(E));
  // The dot products of 16-bit rows go through horizontalSums16, kLanes
  // keys at once, where f32 ones are reduced one at a time (vreduceAdd):
  // each was the faster for its type (one thread, AVX-512).
  constexpr bool kSumsAtOnce = T != KVType::F32;
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
  int64_t nd = (p.D + kLanes - 1) / kLanes, nv = (p.Dv + kLanes - 1) / kLanes;
  if constexpr (T == KVType::BF16) {
    nd += nd % 2;
    nv += nv % 2;
  }
  const ChannelMasks dm(p.D), vm(p.Dv);
  alignas(64) float q[R][kMaxDim], acc[R][kMaxDim + CV * kLanes];
  alignas(64) float w[R][kKeys];
  float m[R], l[R];
  int64_t begin[R], end[R];
  const float *maskRow[R];
  // Queries scaled by queryFactor, zero past D, in the channel order of
  // loadChannels.
  VecF qScale = vset1(queryFactor(p));
  for (int r = 0; r < R; ++r) {
    const float *qr =
        p.q + b * p.qs[0] + rows[r].h * p.qs[1] + rows[r].i * p.qs[2];
    for (int64_t c = 0; c < nd; ++c) {
      if constexpr (T == KVType::BF16)
        for (int64_t i = 0; i < kLanes; ++i) {
          int64_t ch = channelOf<T>(c, i);
          q[r][kLanes * c + i] = ch < p.D ? qr[ch] * queryFactor(p) : 0.0f;
        }
      else
        vstoreu(q[r] + kLanes * c,
                vmul(vloadLanes(qr + kLanes * c, dm.lanes[c]), qScale));
    }
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
    [[maybe_unused]] VecF sums[kSumsAtOnce ? R : 1][kLanes];
    for (int64_t j = 0; j < n; j += G) {
      const E *kr[G];
      for (int g = 0; g < G; ++g)
        kr[g] = kb + (j0 + std::min<int64_t>(j + g, n - 1)) * p.ks[2];
      VecF dot[R][G];
      for (int r = 0; r < R; ++r)
        for (int g = 0; g < G; ++g)
          dot[r][g] = vzero();
      if (prefetch)
        for (int g = 0; g < G; ++g) {
          int64_t ahead = std::min(j0 + j + g + kPrefetchKeys, kvEnd - 1);
          for (int64_t f = 0; f < p.D; f += kLineElements)
            prefetchL1(kb + ahead * p.ks[2] + f);
          for (int64_t f = 0; f < p.Dv; f += kLineElements)
            prefetchL1(vb + ahead * p.vs[2] + f);
        }
      for (int64_t c = 0; c < nd; ++c) {
        VecF kc[G];
        for (int g = 0; g < G; ++g)
          kc[g] = loadChannels<T>(kr[g], c, dm);
        for (int r = 0; r < R; ++r) {
          VecF qc = vloadu(q[r] + kLanes * c);
          for (int g = 0; g < G; ++g)
            dot[r][g] = vfmadd(qc, kc[g], dot[r][g]);
        }
      }
      if constexpr (kSumsAtOnce) {
#ifdef __AVX512F__
        int64_t at = j % kLanes;
        for (int r = 0; r < R; ++r)
          for (int g = 0; g < G; ++g)
            sums[r][at + g] = dot[r][g];
        if (at + G == kLanes || j + G >= n)
          for (int r = 0; r < R; ++r) {
            for (int64_t x = at + G; x < kLanes; ++x)
              sums[r][x] = vzero();
            vstoreu(w[r] + j - at, horizontalSums16(sums[r]));
          }
#endif
      } else {
        for (int r = 0; r < R; ++r)
          for (int g = 0; g < G; ++g)
            w[r][j + g] = vreduceAdd(dot[r][g]);
      }
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
        const E *vr = vb + (j0 + j) * p.vs[2];
        for (int x = 0; x < CV; ++x) {
          VecF vc = loadChannels<T>(vr, c0 + x, vm);
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
    if constexpr (T == KVType::BF16) {
      for (int64_t c = 0; c < nv; ++c)
        for (int64_t i = 0; i < kLanes; ++i)
          if (int64_t ch = channelOf<T>(c, i); ch < p.Dv)
            o[r * p.Dv + ch] = acc[r][kLanes * c + i];
    } else {
      std::memcpy(o + r * p.Dv, acc[r], sizeof(float) * p.Dv);
    }
  }
}

/// attendRows for the run-time row count `nrows` (at most kMaxRows) and
/// K/V type: prefetching keys and values that do not stay in cache.
void attendRowsAnyDim(const Problem &p, int64_t b, int64_t kh,
                      const QueryRow *rows, int nrows, int64_t kvBegin,
                      int64_t kvEnd, float *m, float *l, float *o) {
  double bytes = p.kv == KVType::F32 ? 4.0 : 2.0;
  bool streamed = bytes * double(p.B * p.Hkv * p.Skv) * double(p.D + p.Dv) >
                  kPrefetchKVBytes;
  auto run = [&](auto height, auto type) {
    constexpr int H = decltype(height)::value;
    constexpr KVType T = decltype(type)::value;
    if (streamed)
      attendRows<H, true, T>(p, b, kh, rows, kvBegin, kvEnd, m, l, o);
    else
      attendRows<H, false, T>(p, b, kh, rows, kvBegin, kvEnd, m, l, o);
  };
  withRows<kMaxRows>(nrows, [&](auto height) {
    using KV = KVType;
    switch (p.kv) {
    case KV::F32:
      return run(height, std::integral_constant<KV, KV::F32>());
#ifdef __AVX512F__
    case KV::BF16:
      return run(height, std::integral_constant<KV, KV::BF16>());
    case KV::F16:
      return run(height, std::integral_constant<KV, KV::F16>());
#else
    default: // without AVX-512, the entries widen 16-bit K and V first
      return;
#endif
    }
  });
}

} // namespace

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

} // namespace tfc::uk::attention

#endif // TFC_UK_VECTOR
