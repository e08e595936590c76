//===- entry.cpp - The attention entry points of ukernels.h ---------------===//
//
// Each entry describes its call as a Problem and picks the kernel that
// takes it: a few rows per K/V head go to attentionFewRows (decode.cpp),
// more to the query blocks of the ISA (prefill_avx512.cpp, avx2.cpp), and
// what no vector kernel takes to the scalar reference. 16-bit K and V, and
// K and V in two parts, are read as they are where the kernel can, else
// widened or concatenated first.
//
//===----------------------------------------------------------------------===//

#include "attention/attention.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace tfc::uk::attention {
namespace {

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
  pointTo(q.data(), p.q, p.q16);
  pointTo(out.data(), p.out, p.out16);
  p.kv = kv;
  pointTo(k.data(), p.k, p.k16);
  pointTo(v.data(), p.v, p.v16);
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

/// run(k, v) on K and V concatenated from their two parts along the key
/// axis (of p's batch, heads and channels), in buffers of this call.
template <typename E, typename Run>
void withConcatenated(const Problem &p, MemRef<4, E> *k0, MemRef<4, E> *k1,
                      MemRef<4, E> *v0, MemRef<4, E> *v1, Run &&run) {
  int64_t split = k0->sizes[2], skv = split + k1->sizes[2];
  std::vector<E> kStorage, vStorage;
  MemRef<4, E> kc = contiguous(kStorage, p.B, p.Hkv, skv, p.D);
  MemRef<4, E> vc = contiguous(vStorage, p.B, p.Hkv, skv, p.Dv);
  copyPart(*k0, *v0, 0, kc, vc);
  copyPart(*k1, *v1, split, kc, vc);
  run(&kc, &vc);
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
      __m512 f = T == KVType::F16 ? widenF16(bits) : widenBF16(bits);
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
        to[d] = bf16Value(bits);
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
  attentionQueryBlocks(p);
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
  Problem p = problemOf(*q, *k0, *v0, mask, *out, scale, flags, causal, softcap,
                        window, k0->sizes[2] + k1->sizes[2], T);
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
                               partOf(p, *k1, *v1, k0->sizes[2])};
  if (fewRowKernel && p.Sq <= kFewRows && fastPathApplies(parts[0].view) &&
      fastPathApplies(parts[1].view)) {
    KeyRanges keys = keyRanges(p);
    attentionFewRows(p, keys, parts, kMaxKVParts);
    return;
  }
#endif
  withConcatenated(p, k0, k1, v0, v1, [&](MemRef<4, E> *k, MemRef<4, E> *v) {
    oneBuffer(q, k, v, mask, out, scale, flags, causal, softcap, window);
  });
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
      to[d * out->strides[3]] = bf16Bits(of.data()[row * n[3] + d]);
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
    attentionQueryBlocks(p);
    return;
  }
#endif
  withF32QueryAndOutput(q, out, [&](MemRef<4> *qf, MemRef<4> *of) {
    attention16<KVType::BF16>(qf, k, v, mask, of, scale, flags, causal, softcap,
                              window);
  });
}

} // namespace
} // namespace tfc::uk::attention

using namespace tfc::uk::attention;
using tfc::uk::MemRef;

extern "C" void
TFC_UK_CIFACE(tfc_uk_attention_f32)(TFC_UK_ATTENTION_ARGS(float, float)) {
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

extern "C" void TFC_UK_CIFACE(tfc_uk_attention_kv2_f32)(
    TFC_UK_ATTENTION_KV2_ARGS(float, float)) {
  attentionInParts<float, KVType::F32>(q, k0, k1, v0, v1, mask, out, scale,
                                       flags, causal, softcap, window,
                                       _mlir_ciface_tfc_uk_attention_f32);
}

// The entries with 16-bit K and V.
#define TFC_ATTENTION16_ENTRIES(SUFFIX, TYPE)                                  \
  extern "C" void TFC_UK_CIFACE(tfc_uk_attention_f32_##SUFFIX)(                \
      TFC_UK_ATTENTION_ARGS(float, uint16_t)) {                                \
    attention16<KVType::TYPE>(q, k, v, mask, out, scale, flags, causal,        \
                              softcap, window);                                \
  }                                                                            \
  extern "C" void TFC_UK_CIFACE(tfc_uk_attention_kv2_f32_##SUFFIX)(            \
      TFC_UK_ATTENTION_KV2_ARGS(float, uint16_t)) {                            \
    attentionInParts<uint16_t, KVType::TYPE>(                                  \
        q, k0, k1, v0, v1, mask, out, scale, flags, causal, softcap, window,   \
        attention16<KVType::TYPE>);                                            \
  }
TFC_ATTENTION16_ENTRIES(bf16, BF16)
TFC_ATTENTION16_ENTRIES(f16, F16)
#undef TFC_ATTENTION16_ENTRIES

extern "C" void TFC_UK_CIFACE(tfc_uk_attention_bf16)(
    TFC_UK_ATTENTION_ARGS(uint16_t, uint16_t)) {
  attentionBf16(q, k, v, mask, out, scale, flags, causal, softcap, window);
}

/// The two-part form: the query blocks read K and V concatenated (as the
/// f32-query entries' do); fewer rows run the two-part f32-query entry
/// (its few-row kernel reads the parts where they are) on Q widened.
extern "C" void TFC_UK_CIFACE(tfc_uk_attention_kv2_bf16)(
    TFC_UK_ATTENTION_KV2_ARGS(uint16_t, uint16_t)) {
  Problem p = problemOf(*q, *k0, *v0, mask, *out, scale, flags, causal, softcap,
                        window, k0->sizes[2] + k1->sizes[2], KVType::BF16);
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
  withConcatenated(p, k0, k1, v0, v1,
                   [&](MemRef<4, uint16_t> *k, MemRef<4, uint16_t> *v) {
                     attentionBf16(q, k, v, mask, out, scale, flags, causal,
                                   softcap, window);
                   });
}
