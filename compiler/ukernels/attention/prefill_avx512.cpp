//===- prefill_avx512.cpp - Attention's query blocks on AVX-512 -----------===//
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
// bf16 pairs: on AMX tiles where the kernels have them (prefill_amx.cpp),
// else on vdpbf16ps in the same register blocks as f32.
//
// Query blocks of at most kFewRows rows (decode) take attentionFewRows
// instead (decode.cpp).
//
//===----------------------------------------------------------------------===//

#include "attention/prefill.h"

#include <algorithm>
#include <cstring>
#include <vector>

#ifdef __AVX512F__

namespace tfc::uk::attention {

#ifdef TFC_UK_BF16DOT
void packKeyPairs(const Problem &p, int64_t b, int64_t kh, uint32_t *kp,
                  int64_t stride, int64_t rows) {
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
        pairs = _mm512_maskz_loadu_epi16(firstHalves(p.D - d0),
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
#endif

namespace {

constexpr int64_t kBc = 128; // keys per block
constexpr int kUnroll = 4;   // of the products' k loops

/// How a query block's two products run: f32 FMAs; bf16 dot products
/// (vdpbf16ps) on pairs of bf16 values; or AMX tiles (tdpbf16ps) on the
/// same pairs.
enum class Products { F32, Bf16Dot, Tiles };

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
      __m512 e = exp2Lookup(_mm512_sub_ps(_mm512_load_ps(x), ref[v]));
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
  __attribute__((always_inline)) void
  operator()(__m512 (&acc)[MR][NV], const Tile<NV> &t, Exponentiate &side) {
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

/// Online-softmax state of one query block, unnormalised.
template <int NV> struct BlockState {
  alignas(64) float ot[kMaxDim * NV * 16]; // Ot[channel][query]
  __m512 m[NV], l[NV];
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
                               bf16PairsOfRows(lo, hi));
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
      _mm512_store_si512(pp + t * Br + v * 16, bf16PairsOfRows(x, y));
    }
}
#endif

#ifdef TFC_UK_AMX
/// Runs the score product's epilogue over the scores of keys j < nb that
/// the tiles stored in sc, kRowsPerCall rows per call (as if the register
/// blocks of the AVX-512 product had just computed them).
template <int NV>
void epilogueOverRows(ScoreEpilogue<NV> &epilogue, float *sc, int64_t nb) {
  constexpr int64_t Br = NV * 16;
  constexpr int kRowsPerCall = 4;
  Tile<NV> t = packedTile<NV>(nullptr, 0, 0, nullptr, 0, sc,
                              /*accumulate=*/false, nullptr);
  for (int64_t j = 0; j < nb; j += kRowsPerCall, t.c += kRowsPerCall * Br)
    withRows<kRowsPerCall>(
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
  constexpr BPanel Panel = Pairs ? BPanel::BF16Dot : BPanel::F32;
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
        r[i] = i >= rows ? _mm512_setzero_ps()
               : p.q16   ? widenBF16(_mm256_maskz_loadu_epi16(cols, p.q16 + at))
                         : _mm512_maskz_loadu_ps(cols, p.q + at);
      }
      transpose16(r);
#ifdef TFC_UK_BF16DOT
      if constexpr (Pairs) {
        for (int64_t j = 0; j < std::min<int64_t>(16, p.D - d0); j += 2)
          _mm512_store_si512(qt + (d0 + j) / 2 * Br + v * 16,
                             bf16PairsOfRows(r[j], r[j + 1]));
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
        keyBias[j] = toLog2Domain(mb[(j0 + j) * p.ms[3]]);
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
          s = _mm512_add_ps(s, toLog2Domain(mv, log2e));
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
      transpose16(r);
      for (int64_t i = 0; i < rows; ++i) {
        int64_t at = oAt + (i0 + v * 16 + i) * p.os[2] + c0;
        __m512 o = _mm512_mul_ps(r[i], _mm512_set1_ps(inv[v * 16 + i]));
        if (p.out16)
          _mm256_mask_storeu_epi16(p.out16 + at, firstLanes(channels),
                                   narrowBF16(o));
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
    if (amx::enabled()) {
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

} // namespace

void attentionQueryBlocks(const Problem &p) {
  if (p.Sq <= 16)
    attentionBlocked<1>(p);
  else
    attentionBlocked<2>(p);
}

} // namespace tfc::uk::attention

#endif // __AVX512F__
