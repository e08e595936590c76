//===- prefill.h - Query blocks of the AVX-512 attention --------*- C++ -*-===//
//
// What the query blocks of prefill_avx512.cpp share with their AMX tile
// products (prefill_amx.cpp): the bf16 pairs both products read, and the
// tile products themselves.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UKERNELS_ATTENTION_PREFILL_H
#define TFC_UKERNELS_ATTENTION_PREFILL_H

#include "attention/attention.h"
#include "microkernel.h"

#ifdef __AVX512F__

namespace tfc::uk::attention {

/// One (batch, K/V head)'s K and V as bf16 pairs, for products on bf16
/// values (packHeadPairs, packHeadTiles); null for f32 products. K's rows
/// are kStride words apart; with Tiles, V is transposed, its channels
/// vStride bf16 values apart.
struct HeadPairs {
  const uint32_t *k = nullptr, *v = nullptr;
  int64_t kStride = 0, vStride = 0;
};

#ifdef TFC_UK_BF16DOT
/// K's rows of (batch b, K/V head kh) as bf16 pairs of channels: key j's
/// channels 2d, 2d + 1 at kp[j * stride + d] for j < rows (an odd D's last
/// high half 0; the words past D's pairs and the rows past Skv 0). K is f32
/// holding bf16 values, or bf16.
void packKeyPairs(const Problem &p, int64_t b, int64_t kh, uint32_t *kp,
                  int64_t stride, int64_t rows);

/// V's channels c0..c0 + 15 of key j of (b, kh) as f32 (0 past Dv).
inline __m512 valueRow(const Problem &p, int64_t b, int64_t kh, int64_t j,
                       int64_t c0) {
  __mmask16 cols = firstLanes(p.Dv - c0);
  int64_t at = b * p.vs[0] + kh * p.vs[1] + j * p.vs[2] + c0;
  if (p.kv == KVType::BF16)
    return widenBF16(_mm256_maskz_loadu_epi16(cols, p.v16 + at));
  return _mm512_maskz_loadu_ps(cols, p.v + at);
}
#endif

#ifdef TFC_UK_AMX
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

TileLayout tileLayout(const Problem &p);

/// K and V of (batch b, K/V head kh) for the tile products into `words`,
/// laid out as TileLayout says.
void packHeadTiles(const Problem &p, int64_t b, int64_t kh, const TileLayout &t,
                   uint32_t *words);

/// St[j][query] = K[j0 + j] . Q[query] for keys j < nb (rows up to the next
/// whole tile written too) on tiles: units of two tiles of keys (A: K's
/// rows of pairs) by NV tiles of queries (B: Qt's pairs of channels, rows
/// rounded up to whole tiles with zeros).
template <int NV>
void tileScores(const HeadPairs &pairs, int64_t j0, int64_t nb, const float *qt,
                float *sc);

/// Ot[c][query] += sum over keys of Vt[c][key] P[key][query] on tiles, for
/// the keys of `pairCount` pairs from the even key e0 (P's pairs in pp, as
/// pairProbabilities writes them; the rows past them to a whole tile are
/// zeroed here): units of two tiles of channels (A: V's transposed rows) by
/// NV tiles of queries (B: P's pairs of keys), Ot's tiles loaded and stored
/// around them.
template <int NV>
void tileValues(const HeadPairs &pairs, int64_t Dv, int64_t e0,
                int64_t pairCount, float *pp, float *ot);
#endif

} // namespace tfc::uk::attention

#endif // __AVX512F__

#endif // TFC_UKERNELS_ATTENTION_PREFILL_H
