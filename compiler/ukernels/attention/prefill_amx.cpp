//===- prefill_amx.cpp - Attention's query blocks on AMX tiles ------------===//
//
// Q, K and V of bf16 values (TFC_UK_ATTENTION_BF16) take both products of a
// query block (prefill_avx512.cpp) on AMX tiles where the kernels have them
// (amx.h): St and Ot as 16 x 16 tiles of f32 sums (K's rows and Vt's by
// Qt's and P's pairs), each K/V head packed once for the tiles
// (packHeadTiles) and the score epilogue run over the stored scores.
//
//===----------------------------------------------------------------------===//

#include "attention/prefill.h"

#include <algorithm>
#include <cstring>

#ifdef TFC_UK_AMX

namespace tfc::uk::attention {

TileLayout tileLayout(const Problem &p) {
  TileLayout t;
  t.kStride = roundUp((p.D + 1) / 2, amx::kRows);
  t.keyRows = roundUp(p.Skv, amx::kRows) + amx::kRows;
  t.vStride = roundUp(p.Skv, 32) + 32;
  t.channelRows = roundUp(p.Dv, amx::kRows);
  return t;
}

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
        transpose16(r[h]);
      }
      for (int c = 0; c < 16; ++c)
        _mm512_storeu_si512(vt + (c0 + c) * t.vStride + j0,
                            bf16PairsInOrder(r[0][c], r[1][c]));
    }
}

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

template void tileScores<1>(const HeadPairs &, int64_t, int64_t, const float *,
                            float *);
template void tileScores<2>(const HeadPairs &, int64_t, int64_t, const float *,
                            float *);
template void tileValues<1>(const HeadPairs &, int64_t, int64_t, int64_t,
                            float *, float *);
template void tileValues<2>(const HeadPairs &, int64_t, int64_t, int64_t,
                            float *, float *);

} // namespace tfc::uk::attention

#endif // TFC_UK_AMX
