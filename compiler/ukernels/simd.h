//===- simd.h - Vector helpers shared by the CPU micro-kernels --*- C++ -*-===//

#ifndef TFC_UKERNELS_SIMD_H
#define TFC_UKERNELS_SIMD_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace tfc::uk {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// x * log2(e), kept finite where x is (a framework's finfo.min mask must
/// not become -inf); the vector forms below do the same per lane.
inline float toLog2Domain(float x) {
  float y = x * kLog2e;
  if (std::isinf(x))
    return y;
  return std::max(std::min(y, std::numeric_limits<float>::max()),
                  -std::numeric_limits<float>::max());
}

/// x rounded to bf16 (to nearest, ties to even; a NaN stays a quiet NaN),
/// its bits.
inline uint16_t bf16Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (std::isnan(x))
    return uint16_t((bits >> 16) | 0x40);
  return uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

/// The f32 value of bf16 bits (exact).
inline float bf16Value(uint16_t bits) {
  uint32_t wide = uint32_t(bits) << 16;
  float x;
  std::memcpy(&x, &wide, 4);
  return x;
}

// The vector layer of the shared kernels (microkernel.h, the packed matmul):
// one float vector type and the few operations they need, for AVX-512 (16
// lanes, mask registers) or AVX2 with FMA (8 lanes, lane masks in a vector
// register). TFC_UK_VECTOR is defined when either is there; without it the
// kernels fall back to scalar reference loops. TFC_UK_MM(op) is the
// intrinsic of `op` on a whole vector (_mm512_op or _mm256_op), for the
// operations whose intrinsics differ in their width only (below the ISAs).
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define TFC_UK_VECTOR 1
#endif
#if defined(__AVX512F__)
#define TFC_UK_MM(op) _mm512_##op
constexpr int kLanes = 16;
using VecF = __m512;
using LaneMask = __mmask16;

/// Lanes [0, n) (none for n <= 0, all for n >= kLanes).
inline LaneMask firstLanes(int64_t n) {
  if (n <= 0)
    return 0;
  return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
}
/// Zero in the lanes outside `m`, which are not read.
inline VecF vloadLanes(const float *p, LaneMask m) {
  return _mm512_maskz_loadu_ps(m, p);
}
inline void vstoreLanes(float *p, LaneMask m, VecF v) {
  _mm512_mask_storeu_ps(p, m, v);
}
/// kLanes bf16 / f16 values (their bits) widened to f32.
inline VecF widenBF16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline VecF widenF16(__m256i h) { return _mm512_cvtph_ps(h); }
/// ... loaded from p (32-byte aligned).
inline VecF vloadBF16(const uint16_t *p) {
  return widenBF16(_mm256_load_si256(reinterpret_cast<const __m256i *>(p)));
}
inline VecF vloadF16(const uint16_t *p) {
  return widenF16(_mm256_load_si256(reinterpret_cast<const __m256i *>(p)));
}
/// 16-bit lanes [0, n) of 32 (none for n <= 0, all for n >= 32).
inline __mmask32 firstHalves(int64_t n) {
  if (n <= 0)
    return 0;
  return n >= 32 ? ~__mmask32(0) : (__mmask32(1) << n) - 1;
}
/// kLanes int8 values (kLanes-byte aligned) as int32 lanes.
inline __m512i loadI8Lanes(const int8_t *p) {
  return _mm512_cvtepi8_epi32(
      _mm_load_si128(reinterpret_cast<const __m128i *>(p)));
}
inline float vreduceAdd(VecF v) { return _mm512_reduce_add_ps(v); }
inline float vreduceMax(VecF v) { return _mm512_reduce_max_ps(v); }
/// a in the lanes of m, else b.
inline VecF vselect(LaneMask m, VecF a, VecF b) {
  return _mm512_mask_mov_ps(b, m, a);
}
/// The lanes of x that are +-inf.
inline LaneMask infinities(VecF x) {
  return _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(-kNegInf),
                            _CMP_EQ_OQ);
}

/// acc + broadcast(*a) * b with the broadcast folded into the FMA's memory
/// operand ({1to16}), for the k loops that carry vector side work
/// (microkernel.h): a separate vbroadcastss takes a slot on the vector pipes
/// beside the FMAs, and a 6 x 2 block with separate broadcasts slows down
/// with every other vector instruction added to it, while with folded ones
/// 6-8 such instructions per 12 FMAs run for free. LLVM folds a broadcast
/// only into its single use, hence the asm.
inline VecF fmaddBroadcast(const float *a, VecF b, VecF acc) {
  asm("vfmadd231ps %[a]%{1to16%}, %[b], %[acc]"
      : [acc] "+v"(acc)
      : [a] "m"(*a), [b] "v"(b));
  return acc;
}

#ifndef __AVX512BF16__
/// The bits of x rounded to bf16 (to nearest, ties to even) in the high
/// halves of the lanes (vcvtne2ps2bf16's rounding of finite values).
inline __m512i roundedBf16High(__m512 x) {
  __m512i bits = _mm512_castps_si512(x);
  __m512i odd =
      _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  return _mm512_add_epi32(bits,
                          _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
}
#endif

/// x's 16 values rounded to bf16 (to nearest, ties to even), their bits.
inline __m256i narrowBF16(__m512 x) {
#ifdef __AVX512BF16__
  return (__m256i)_mm512_cvtneps_pbh(x);
#else
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(roundedBf16High(x), 16));
#endif
}

/// bf16 dot products (vdpbf16ps) where the kernels were built for them, or
/// (TFC_UK_EMULATE_BF16DOT, for the tests of a host without them) emulated
/// with AVX-512F: in each f32 lane, acc plus the products of the lane's two
/// bf16 halves in a and in b (the odd one first, then the even one).
#if defined(__AVX512BF16__) || defined(TFC_UK_EMULATE_BF16DOT)
#define TFC_UK_BF16DOT 1
inline __m512 dpbf16(__m512 acc, __m512i a, __m512i b) {
#if defined(__AVX512BF16__)
  return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
#else
  const __m512i high = _mm512_set1_epi32(int(0xffff0000u));
  acc = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(a, high)),
                        _mm512_castsi512_ps(_mm512_and_si512(b, high)), acc);
  return _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(a, 16)),
                         _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)), acc);
#endif
}

/// x0 then x1 rounded to bf16 as 32 values in order: lane l holds values
/// 2l and 2l + 1 of the 32 (a row's pairs for dpbf16).
inline __m512i bf16PairsInOrder(__m512 x0, __m512 x1) {
#ifdef __AVX512BF16__
  return (__m512i)_mm512_cvtne2ps_pbh(x1, x0);
#else
  return _mm512_inserti64x4(_mm512_castsi256_si512(narrowBF16(x0)),
                            narrowBF16(x1), 1);
#endif
}

/// lo and hi rounded to bf16 and paired lane by lane: lane l holds lo[l]
/// (low half) and hi[l] (high half), two rows' pairs for dpbf16.
inline __m512i bf16PairsOfRows(__m512 lo, __m512 hi) {
#ifdef __AVX512BF16__
  const __m512i interleave = _mm512_set_epi16(
      31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
      6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave,
                                  (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
#else
  return _mm512_or_si512(_mm512_srli_epi32(roundedBf16High(lo), 16),
                         _mm512_and_si512(roundedBf16High(hi),
                                          _mm512_set1_epi32(int(0xffff0000u))));
#endif
}
#endif
#elif defined(__AVX2__) && defined(__FMA__)
#define TFC_UK_MM(op) _mm256_##op
constexpr int kLanes = 8;
using VecF = __m256;
/// All-ones 32-bit lanes are selected (vmaskmovps reads their sign bits).
using LaneMask = __m256i;

inline LaneMask firstLanes(int64_t n) {
  int32_t k = int32_t(std::clamp<int64_t>(n, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/// Zero in the lanes outside `m`, which are not read (no fault past an
/// array's end).
inline VecF vloadLanes(const float *p, LaneMask m) {
  return _mm256_maskload_ps(p, m);
}
inline void vstoreLanes(float *p, LaneMask m, VecF v) {
  _mm256_maskstore_ps(p, m, v);
}
/// kLanes bf16 / f16 values (their bits, 16-byte aligned) widened to f32.
inline VecF vloadBF16(const uint16_t *p) {
  __m128i h = _mm_load_si128(reinterpret_cast<const __m128i *>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline VecF vloadF16(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i *>(p)));
}
/// kLanes int8 values (kLanes-byte aligned) as int32 lanes.
inline __m256i loadI8Lanes(const int8_t *p) {
  return _mm256_cvtepi8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i *>(p)));
}
inline float vreduceAdd(VecF v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}
inline float vreduceMax(VecF v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}
/// a in the lanes of m, else b.
inline VecF vselect(LaneMask m, VecF a, VecF b) {
  return _mm256_blendv_ps(b, a, _mm256_castsi256_ps(m));
}
/// The lanes of x that are +-inf.
inline LaneMask infinities(VecF x) {
  VecF absX = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  return _mm256_castps_si256(
      _mm256_cmp_ps(absX, _mm256_set1_ps(-kNegInf), _CMP_EQ_OQ));
}
/// acc + broadcast(*a) * b: vbroadcastss from memory is a load-port uop,
/// not a shuffle, so it does not compete with the FMAs.
inline VecF fmaddBroadcast(const float *a, VecF b, VecF acc) {
  return _mm256_fmadd_ps(_mm256_broadcast_ss(a), b, acc);
}
#endif

#ifdef TFC_UK_VECTOR
inline VecF vzero() { return TFC_UK_MM(setzero_ps)(); }
/// kLanes * 4-byte aligned.
inline VecF vload(const float *p) { return TFC_UK_MM(load_ps)(p); }
inline VecF vloadu(const float *p) { return TFC_UK_MM(loadu_ps)(p); }
inline void vstoreu(float *p, VecF v) { TFC_UK_MM(storeu_ps)(p, v); }
/// A non-temporal store of a whole, kLanes * 4-byte aligned vector.
inline void vstream(float *p, VecF v) { TFC_UK_MM(stream_ps)(p, v); }
inline VecF vset1(float x) { return TFC_UK_MM(set1_ps)(x); }
inline VecF vadd(VecF a, VecF b) { return TFC_UK_MM(add_ps)(a, b); }
inline VecF vsub(VecF a, VecF b) { return TFC_UK_MM(sub_ps)(a, b); }
inline VecF vmul(VecF a, VecF b) { return TFC_UK_MM(mul_ps)(a, b); }
inline VecF vdiv(VecF a, VecF b) { return TFC_UK_MM(div_ps)(a, b); }
inline VecF vmax(VecF a, VecF b) { return TFC_UK_MM(max_ps)(a, b); }
inline VecF vmin(VecF a, VecF b) { return TFC_UK_MM(min_ps)(a, b); }
inline VecF vfmadd(VecF a, VecF b, VecF c) {
  return TFC_UK_MM(fmadd_ps)(a, b, c);
}
/// kLanes int8 values (kLanes-byte aligned) converted to f32 (exact).
inline VecF vloadI8(const int8_t *p) {
  return TFC_UK_MM(cvtepi32_ps)(loadI8Lanes(p));
}
/// 2 kLanes int4 values (two's complement nibbles) from kLanes bytes
/// (kLanes-byte aligned): the low nibbles into `lo`, the high ones into
/// `hi`. A byte read as int8 is 16 hi + (lo & 15), so hi is its arithmetic
/// shift by 4 and lo its low nibble sign-extended.
inline void vloadI4(const uint8_t *p, VecF &lo, VecF &hi) {
  auto x = loadI8Lanes(reinterpret_cast<const int8_t *>(p));
  lo = TFC_UK_MM(cvtepi32_ps)(
      TFC_UK_MM(srai_epi32)(TFC_UK_MM(slli_epi32)(x, 28), 28));
  hi = TFC_UK_MM(cvtepi32_ps)(TFC_UK_MM(srai_epi32)(x, 4));
}
/// x * log2(e), kept finite where x is: a large finite mask value (a
/// framework's finfo.min) must not overflow to -inf, which alone hides a key.
inline VecF toLog2Domain(VecF x, VecF log2e) {
  const VecF big = vset1(std::numeric_limits<float>::max());
  VecF y = vmul(x, log2e);
  VecF clamped = vmax(vmin(y, big), vsub(vzero(), big));
  return vselect(infinities(x), y, clamped);
}
#endif

#ifdef TFC_UK_VECTOR
/// Asks for the cache line at p to be brought into L2 (prefetcht1).
inline void prefetchL2(const void *p) {
  _mm_prefetch(static_cast<const char *>(p), _MM_HINT_T1);
}
/// Asks for the cache line at p to be brought into L1 (prefetcht0).
inline void prefetchL1(const void *p) {
  _mm_prefetch(static_cast<const char *>(p), _MM_HINT_T0);
}

/// 2^f for |f| <= 0.5: the degree-5 minimax polynomial both ISAs' exp2
/// use (relative error 2.4e-7 in float arithmetic).
inline VecF exp2Fraction(VecF f) {
  VecF r = vset1(1.3276458e-3f);
  r = vfmadd(r, f, vset1(9.6755419e-3f));
  r = vfmadd(r, f, vset1(5.5507135e-2f));
  r = vfmadd(r, f, vset1(2.4022120e-1f));
  r = vfmadd(r, f, vset1(6.9314694e-1f));
  return vfmadd(r, f, vset1(1.0000001f));
}

/// tanh(x): the rational minimax form of Eigen and MLIR's polynomial
/// approximation, x * P(x^2) / Q(x^2) on x clamped to +-7.90531 (where
/// tanh is 1 in float), P of degree 6 and Q of degree 3 in x^2: within
/// 3e-7 of tanh, absolute and relative (2.6e-7 measured).
inline VecF vtanh(VecF x) {
  const VecF c = vset1(7.90531110763549805f);
  x = vmax(vmin(x, c), vsub(vzero(), c));
  VecF x2 = vmul(x, x);
  VecF p = vset1(-2.76076847742355e-16f);
  p = vfmadd(p, x2, vset1(2.00018790482477e-13f));
  p = vfmadd(p, x2, vset1(-8.60467152213735e-11f));
  p = vfmadd(p, x2, vset1(5.12229709037114e-08f));
  p = vfmadd(p, x2, vset1(1.48572235717979e-05f));
  p = vfmadd(p, x2, vset1(6.37261928875436e-04f));
  p = vfmadd(p, x2, vset1(4.89352455891786e-03f));
  VecF q = vset1(1.19825839466702e-06f);
  q = vfmadd(q, x2, vset1(1.18534705686654e-04f));
  q = vfmadd(q, x2, vset1(2.26843463243900e-03f));
  q = vfmadd(q, x2, vset1(4.89352518554385e-03f));
  return vdiv(vmul(x, p), q);
}
#endif

/// Results of vexp2 and exp2Lookup below this are 0 (-inf and NaN
/// included): the smallest normal f32 is 2^-126, and an instruction whose
/// result would be subnormal costs an Intel core a microcode assist of
/// about a hundred cycles (attention over padded keys, whose scores are
/// -1e30 or so, ran 3x slower on a Xeon: 8x12x128x32 bf16, 3.7 against 1.25
/// ms). The weights this drops are below 2^-126 of the largest.
constexpr float kExp2Min = -126.0f;

#if defined(__AVX2__) && !defined(__AVX512F__) && defined(__FMA__)
/// 2^x for x <= 127 (exp2Fraction times 2^n built in the exponent bits);
/// 0 below kExp2Min, -inf included.
inline VecF vexp2(VecF x) {
  __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(kExp2Min), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(kExp2Min));
  __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = exp2Fraction(_mm256_sub_ps(x, n));
  __m256i bits = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(tiny, _mm256_mul_ps(r, _mm256_castsi256_ps(bits)));
}
#endif

#ifdef __AVX512F__
/// 2^x for x <= 128 (exp2Fraction times 2^n by vscalefps); 0 below
/// kExp2Min. Every lane's result is 0 or normal.
inline __m512 exp2(__m512 x) {
  const __m512 low = _mm512_set1_ps(kExp2Min);
  __mmask16 kept = _mm512_cmp_ps_mask(x, low, _CMP_GE_OQ);
  // x >= -126 rounds to n >= -126, and n = -126 leaves x - n >= 0.
  x = _mm512_max_ps(x, low);
  __m512 n =
      _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_maskz_scalef_ps(kept, exp2Fraction(_mm512_sub_ps(x, n)), n);
}
inline VecF vexp2(VecF x) { return exp2(x); }

/// 2^(i/16) for i = 0..15.
constexpr double kExp2Sixteenths[16] = {1.0,
                                        1.0442737824274138,
                                        1.0905077326652577,
                                        1.1387886347566916,
                                        1.189207115002721,
                                        1.241857812073484,
                                        1.2968395546510096,
                                        1.3542555469368927,
                                        1.4142135623730951,
                                        1.4768261459394993,
                                        1.5422108254079407,
                                        1.6104903319492543,
                                        1.681792830507429,
                                        1.7562521603732995,
                                        1.8340080864093424,
                                        1.9152065613971474};

/// Tables of exp2Lookup: row j holds 2^(i/16) * c_j, where c_0..c_2 are the
/// coefficients of a degree-2 fit of 2^f on |f| <= 1/32 (relative error
/// 4.2e-7).
struct Exp2LookupTables {
  alignas(64) float row[3][16];
};
constexpr Exp2LookupTables makeExp2LookupTables() {
  constexpr double c[3] = {1.00000001, 0.69318783, 0.24021946};
  Exp2LookupTables t{};
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 16; ++i)
      t.row[j][i] = float(kExp2Sixteenths[i] * c[j]);
  return t;
}
inline constexpr Exp2LookupTables kExp2Lookup = makeExp2LookupTables();

/// 2^x for x <= 128 (relative error 5.4e-7 in float arithmetic; 0 below
/// kExp2Min, every result 0 or normal) with 2 FMAs instead of exp2's 5, but
/// more other vector instructions: x = n + i/16 + f, and 2^(i/16) times each
/// coefficient comes from a register by vpermps. Cheaper only inside an
/// FMA-bound loop, where the other vector pipes are idle; alone, exp2 is
/// faster.
inline __m512 exp2Lookup(__m512 x) {
  auto row = [](int j) { return _mm512_load_ps(kExp2Lookup.row[j]); };
  const __m512 low = _mm512_set1_ps(kExp2Min);
  __mmask16 kept = _mm512_cmp_ps_mask(x, low, _CMP_GE_OQ);
  // x >= -126 gives n >= -126, and n = -126 an r >= 1 (i = 0 and f >= 0,
  // or i > 0).
  x = _mm512_max_ps(x, low);
  // k = round(16 x); f = x - k / 16 in [-1/32, 1/32].
  __m512i k =
      _mm512_cvt_roundps_epi32(_mm512_scalef_ps(x, _mm512_set1_ps(4.0f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_sub_ps(
      x, _mm512_scalef_ps(_mm512_cvtepi32_ps(k), _mm512_set1_ps(-4.0f)));
  // vpermps reads the low 4 bits of k: i = k mod 16, also for negative k.
  __m512 u = _mm512_fmadd_ps(_mm512_permutexvar_ps(k, row(2)), f,
                             _mm512_permutexvar_ps(k, row(1)));
  __m512 r = _mm512_fmadd_ps(u, f, _mm512_permutexvar_ps(k, row(0)));
  // Times 2^n, n = floor(k / 16).
  return _mm512_maskz_scalef_ps(kept, r,
                                _mm512_cvtepi32_ps(_mm512_srai_epi32(k, 4)));
}

/// Transposes the 16 x 16 block held in r[0..15] (row i in r[i]) in place.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  auto pd = [](__m512 x) { return _mm512_castps_pd(x); };
  for (int i = 0; i < 4; ++i) {
    __m512 *q = t + 4 * i;
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(q[0]), pd(q[2])));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(q[0]), pd(q[2])));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(q[1]), pd(q[3])));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(q[1]), pd(q[3])));
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] =
          _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
  }
}

/// First stage of horizontalSums16: lanes 0-7 hold partial sums of a,
/// lanes 8-15 of b (their 256-bit halves added).
inline __m512 pairSums(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44),
                       _mm512_shuffle_f32x4(a, b, 0xee));
}

/// The rest of horizontalSums16, from u[i] = pairSums(x[2i], x[2i+1]).
inline __m512 horizontalSumsOfPairs(const __m512 u[8]) {
  auto pd = [](__m512 v) { return _mm512_castps_pd(v); };
  auto ps = [](__m512d v) { return _mm512_castpd_ps(v); };
  // y[i]: 128-bit lane L holds 4 partial sums of x[4i + L].
  __m512 y[4];
  for (int i = 0; i < 4; ++i)
    y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], 0xdd));
  // z[j]: lane L holds 2 partials of x[8j + L], then 2 of x[8j + 4 + L].
  __m512 z[2];
  for (int j = 0; j < 2; ++j)
    z[j] =
        _mm512_add_ps(ps(_mm512_unpacklo_pd(pd(y[2 * j]), pd(y[2 * j + 1]))),
                      ps(_mm512_unpackhi_pd(pd(y[2 * j]), pd(y[2 * j + 1]))));
  // Lane 4L + m: the sum of x[4m + L]; then back to lane order.
  __m512 w = _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x88),
                           _mm512_shuffle_ps(z[0], z[1], 0xdd));
  const __m512i order =
      _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  return _mm512_permutexvar_ps(order, w);
}

/// Lane j of the result is the sum of the 16 lanes of x[j]: a tree of
/// 128-bit, 64-bit and 32-bit shuffles (31 shuffles and 15 adds for 16
/// horizontal sums, against 16 x 8 for one reduction each). A caller that
/// produces x two at a time can apply pairSums as it goes.
inline __m512 horizontalSums16(const __m512 x[16]) {
  __m512 u[8];
  for (int i = 0; i < 8; ++i)
    u[i] = pairSums(x[2 * i], x[2 * i + 1]);
  return horizontalSumsOfPairs(u);
}
#endif

} // namespace tfc::uk

#endif // TFC_UKERNELS_SIMD_H
