//===- intdot.h - Integer dot products with packed weights ---*- C++ -*-===//
//
// The kernel of a matmul whose activations are quantized too
// (TFC_UK_QUANTIZE_A8): rows of A as int8 in blocks of 128 values, B as an
// int8 or int4 weight packed for byte dot products, and the sums of a block
// exact in int32 (vpmaddubsw multiplies unsigned by signed bytes and adds
// pairs into int16, vpmaddwd adds pairs of those into int32): 32 products
// per instruction pair where the f32 kernel does 8 per FMA, and no
// widening of the weights to f32.
//
// AVX2 (which every x86-64-v3 and -v4 machine has), 16 columns a panel.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UKERNELS_INTDOT_H
#define TFC_UKERNELS_INTDOT_H

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tfc::uk::intdot {

/// Columns of a packed panel: two vectors of eight int32 sums.
constexpr int64_t kCols = 16;
/// Values of A per quantization block (and rows of an int4 weight's group).
constexpr int64_t kBlock = 128;
/// An int4 weight is packed biased: q + 8 in [1, 15] (q in [-7, 7]), so
/// that its bytes are the unsigned operand of vpmaddubsw and A's the
/// signed one; the bias comes off as kBias times the sum of A's block.
constexpr int32_t kBias = 8;

/// Bytes of four rows ("a quad") of a packed panel. int8: the 16 columns'
/// four values each, columns 0-7 then 8-15 (a column's values in one
/// 32-bit lane). int4: 32 bytes, byte 4c + r holding row r of column c in
/// its low nibble and of column c + 8 in its high one.
constexpr int64_t quadBytes(bool i4) { return i4 ? 32 : 64; }

/// The int32 sums of rows [0, R) of A (their blocks' int8 values at a[r],
/// four per quad) with one packed panel's 16 columns over `quads` quads
/// from b, added to sums[r][0] (columns 0-7) and sums[r][1] (8-15). An
/// int4 panel's sums are of the biased values.
template <int R, bool I4>
inline void blockSums(const int8_t *const *a, const uint8_t *b, int64_t quads,
                      __m256i (&sums)[R][2]) {
  const __m256i ones = _mm256_set1_epi16(1);
  auto broadcast = [&](int r, int64_t q) {
    int32_t x;
    std::memcpy(&x, a[r] + 4 * q, 4);
    return _mm256_set1_epi32(x);
  };
  if constexpr (I4) {
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    // Two quads' products are added in int16 before widening: each is at
    // most 2 * 15 * 127 in magnitude, so four of them fit.
    int64_t q = 0;
    for (; q + 2 <= quads; q += 2) {
      __m256i v0 = _mm256_loadu_si256(
          reinterpret_cast<const __m256i *>(b + q * quadBytes(true)));
      __m256i v1 = _mm256_loadu_si256(
          reinterpret_cast<const __m256i *>(b + (q + 1) * quadBytes(true)));
      __m256i lo0 = _mm256_and_si256(v0, nibble);
      __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), nibble);
      __m256i lo1 = _mm256_and_si256(v1, nibble);
      __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), nibble);
      for (int r = 0; r < R; ++r) {
        __m256i a0 = broadcast(r, q), a1 = broadcast(r, q + 1);
        __m256i s0 = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, a0),
                                      _mm256_maddubs_epi16(lo1, a1));
        __m256i s1 = _mm256_add_epi16(_mm256_maddubs_epi16(hi0, a0),
                                      _mm256_maddubs_epi16(hi1, a1));
        sums[r][0] = _mm256_add_epi32(sums[r][0], _mm256_madd_epi16(s0, ones));
        sums[r][1] = _mm256_add_epi32(sums[r][1], _mm256_madd_epi16(s1, ones));
      }
    }
    for (; q < quads; ++q) {
      __m256i v = _mm256_loadu_si256(
          reinterpret_cast<const __m256i *>(b + q * quadBytes(true)));
      __m256i lo = _mm256_and_si256(v, nibble);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
      for (int r = 0; r < R; ++r) {
        __m256i av = broadcast(r, q);
        sums[r][0] = _mm256_add_epi32(
            sums[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, av), ones));
        sums[r][1] = _mm256_add_epi32(
            sums[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, av), ones));
      }
    }
  } else {
    // Signed by signed: |a| is the unsigned operand and b takes a's sign
    // (vpsignb; zero where a is). A product pair is at most 2 * 127 * 127,
    // inside int16 (b is never -128).
    for (int64_t q = 0; q < quads; ++q) {
      const uint8_t *bq = b + q * quadBytes(false);
      __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bq));
      __m256i b1 =
          _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bq + 32));
      for (int r = 0; r < R; ++r) {
        __m256i av = broadcast(r, q);
        __m256i magnitude = _mm256_abs_epi8(av);
        sums[r][0] = _mm256_add_epi32(
            sums[r][0],
            _mm256_madd_epi16(
                _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(b0, av)),
                ones));
        sums[r][1] = _mm256_add_epi32(
            sums[r][1],
            _mm256_madd_epi16(
                _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(b1, av)),
                ones));
      }
    }
  }
}

} // namespace tfc::uk::intdot

#endif // TFC_UKERNELS_INTDOT_H
