//===- intdot.h - Integer dot products with packed weights ---*- C++ -*-===//
//
// The kernel of a matmul whose activations are quantized too
// (TFC_UK_QUANTIZE_A8): rows of A as int8 in blocks of 128 values, B as an
// int8 or int4 weight packed for byte dot products, and the sums of a block
// exact in int32, then scaled once.
//
// Two forms, 16 columns a panel, 8 int32 sums per vector:
//  - VNNI (vpdpbusd: four products of unsigned by signed bytes added into
//    each int32 lane, exactly), where the machine has AVX-VNNI or AVX-512
//    VNNI: one instruction per eight columns and four values of K. The
//    unsigned operand is an int4 weight biased by kBias, or for an int8
//    weight A's values biased by 128 (kABias); each bias comes off once per
//    block, as kBias times the block's sum of A or 128 times the column's
//    sum of B.
//  - AVX2 (every x86-64-v3 and -v4 machine): vpmaddubsw multiplies
//    unsigned by signed bytes and adds pairs into int16, vpmaddwd adds
//    pairs of those into int32; an int8 product takes |a| as the unsigned
//    operand and gives b a's sign (vpsignb), since a pair of unsigned
//    bytes of up to 255 times 127 would not fit int16.
// With AVX-512 VNNI the matmul runs the VNNI form 512 bits wide instead
// (matmul/intdot.cpp's dotRowsVnni512): one vpdpbusd per row covers a quad's 16
// columns (an int4 quad's high nibbles shifted into the upper half by one
// variable shift), six rows against two panels.
// TFC_UK_INTDOT_EMULATE_VNNI selects the VNNI form on a machine without it,
// vpdpbusd computed exactly from AVX2 instructions (slower than the AVX2
// form): the tests check the VNNI form's packing and corrections that way.
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

/// Whether the kernel takes the VNNI form (see the file comment).
#if defined(__AVXVNNI__) ||                                                    \
    (defined(__AVX512VNNI__) && defined(__AVX512VL__)) ||                      \
    defined(TFC_UK_INTDOT_EMULATE_VNNI)
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif
/// In the VNNI form, an int8 weight's A values are stored biased by this
/// (as unsigned bytes, a + 128 in [1, 255]).
constexpr int32_t kABias = 128;

/// acc plus, in each 32-bit lane, the sum of the four products of u's
/// unsigned bytes and s's signed ones (exact: vpdpbusd).
inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  // The even and the odd bytes widened to int16 (zero- and sign-extended),
  // each pair of products added into int32 by vpmaddwd: at most 2 * 255 *
  // 128 in magnitude, exact.
  const __m256i lowByte = _mm256_set1_epi16(0x00ff);
  __m256i uEven = _mm256_and_si256(u, lowByte);
  __m256i uOdd = _mm256_srli_epi16(u, 8);
  __m256i sEven = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8);
  __m256i sOdd = _mm256_srai_epi16(s, 8);
  return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(uEven, sEven),
                                                _mm256_madd_epi16(uOdd, sOdd)));
#endif
}

/// Bytes of four rows ("a quad") of a packed panel. int8: the 16 columns'
/// four values each, columns 0-7 then 8-15 (a column's values in one
/// 32-bit lane). int4: 32 bytes, byte 4c + r holding row r of column c in
/// its low nibble and of column c + 8 in its high one.
constexpr int64_t quadBytes(bool i4) { return i4 ? 32 : 64; }

/// The int32 sums of rows [0, R) of A (their blocks' int8 values at a[r],
/// four per quad; biased by kABias for an int8 weight in the VNNI form)
/// with one packed panel's 16 columns over `quads` quads from b, added to
/// sums[r][0] (columns 0-7) and sums[r][1] (8-15). The sums are of the
/// biased values where a bias applies.
template <int R, bool I4>
inline void blockSums(const int8_t *const *a, const uint8_t *b, int64_t quads,
                      __m256i (&sums)[R][2]) {
  [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);
  auto broadcast = [&](int r, int64_t q) {
    int32_t x;
    std::memcpy(&x, a[r] + 4 * q, 4);
    return _mm256_set1_epi32(x);
  };
  if constexpr (kVnni) {
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    for (int64_t q = 0; q < quads; ++q) {
      const uint8_t *bq = b + q * quadBytes(I4);
      __m256i b0, b1;
      if constexpr (I4) {
        __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bq));
        b0 = _mm256_and_si256(v, nibble);
        b1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
      } else {
        b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bq));
        b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bq + 32));
      }
      for (int r = 0; r < R; ++r) {
        __m256i av = broadcast(r, q);
        // int4: the weight's biased nibbles are the unsigned operand;
        // int8: A's biased values.
        if constexpr (I4) {
          sums[r][0] = dpbusd(sums[r][0], b0, av);
          sums[r][1] = dpbusd(sums[r][1], b1, av);
        } else {
          sums[r][0] = dpbusd(sums[r][0], av, b0);
          sums[r][1] = dpbusd(sums[r][1], av, b1);
        }
      }
    }
  } else if constexpr (I4) {
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
