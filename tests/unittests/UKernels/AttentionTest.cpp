//===- AttentionTest.cpp - Attention with masks against float64 -----------===//
//
// tfc_uk_attention_f32 with padding masks that hide keys, checked against a
// float64 softmax over every key: the keys the kernel skips (a fixed-size
// KV cache's unused slots, padding) must change no result. Rows that see no
// visible key average over the hidden keys they see, as transformers'
// finfo.min masks make them do; a kernel that dropped those keys would
// average over fewer. tfc_uk_attention_kv2_f32 must give the same results
// with the keys and values in two parts. Soft-capped scores (Gemma 2),
// sliding windows (whose keys before a row's window are hidden outright,
// next to padding that may hide every key of a row's window) and calls
// without a mask take the same paths.
//
//===----------------------------------------------------------------------===//

#include "ukernels.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using tfc::uk::MemRef;

/// How the mask of a case hides keys.
enum class Mask {
  /// A decoder's fixed-size cache: batch element b uses the first used[b]
  /// slots of Skv - Sq; the Sq new tokens' keys follow the unused slots.
  FixedCache,
  /// Batch element b sees its first used[b] keys.
  RightPadding,
  /// Batch element b sees its last Skv - used[b] keys.
  LeftPadding,
  /// RightPadding with -inf instead of finfo.min.
  RightPaddingInf,
  /// A different random set of hidden keys for every query row.
  PerQuery,
  /// No mask (no TFC_UK_ATTENTION_MASK).
  None,
};

struct Case {
  const char *name;
  int64_t B, Hq, Hkv, Sq, Skv, D, Dv;
  bool causal;
  Mask mask;
  std::vector<int64_t> used; // per batch element
  float softcap = 0; // > 0: scores capped to softcap * tanh(s / softcap)
  int64_t window =
      0; // > 0: key j hidden from row i if i + Skv - Sq - j >= window
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

constexpr float kLowest = std::numeric_limits<float>::lowest();

/// The additive mask [B, 1, Sq or 1, Skv] of a case.
std::vector<float> makeMask(const Case &c, std::mt19937 &rng) {
  bool perQuery = c.mask == Mask::PerQuery;
  int64_t rows = perQuery ? c.Sq : 1;
  std::vector<float> m(size_t(c.B * rows * c.Skv), 0.0f);
  std::bernoulli_distribution hide(0.7);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < c.Skv; ++j) {
        int64_t used = c.used.empty() ? 0 : c.used[size_t(b)];
        bool hidden = false;
        switch (c.mask) {
        case Mask::FixedCache:
          hidden = j >= used && j < c.Skv - c.Sq;
          break;
        case Mask::RightPadding:
        case Mask::RightPaddingInf:
          hidden = j >= used;
          break;
        case Mask::LeftPadding:
          hidden = j < used;
          break;
        case Mask::PerQuery:
          hidden = hide(rng);
          break;
        case Mask::None:
          break;
        }
        float value = c.mask == Mask::RightPaddingInf
                          ? -std::numeric_limits<float>::infinity()
                          : kLowest;
        m[size_t((b * rows + i) * c.Skv + j)] = hidden ? value : 0.0f;
      }
  return m;
}

/// x rounded to bf16 (to nearest, ties to even), as f32.
float roundToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

/// |out - ref| / max|V| over a case: the largest and the mean.
struct Errors {
  double worst = 0, mean = 0;
};

/// How a run passes Q, K and V.
enum class Values {
  F32,
  /// bf16 values in f32 (TFC_UK_ATTENTION_BF16).
  Bf16InF32,
  /// bf16 values, K and V as bf16 (tfc_uk_attention_f32_bf16, with
  /// TFC_UK_ATTENTION_BF16: what a bf16 model's lowering passes).
  Bf16,
  /// f16 values, K and V as f16 (tfc_uk_attention_f32_f16).
  F16,
  /// bf16 values, Q, K, V and the output as bf16 (tfc_uk_attention_bf16:
  /// what a bf16 model's lowering passes).
  Bf16Stored,
};

/// x rounded to f16, as f32.
float roundToF16(float x) { return float(_Float16(x)); }

/// The bits of bf16 or f16 x (exact: x is a value of that type).
uint16_t bitsOf(float x, Values values) {
  uint16_t bits;
  if (values == Values::F16) {
    _Float16 h = _Float16(x);
    std::memcpy(&bits, &h, 2);
  } else {
    uint32_t wide;
    std::memcpy(&wide, &x, 4);
    bits = uint16_t(wide >> 16);
  }
  return bits;
}

/// The errors of a case against float64. With `split` >= 0 the keys and
/// values go to the kv2 entry in two parts, keys [0, split) and
/// [split, Skv). With other `values` than F32, Q, K and V are rounded to
/// bf16 or f16 values, which the reference takes too. `outputs`, if given,
/// receives the kernel's output.
Errors run(const Case &c, unsigned seed, int64_t split = -1,
           Values values = Values::F32, std::vector<float> *outputs = nullptr) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  auto random = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float &x : v)
      x = d(rng);
    return v;
  };
  std::vector<float> q = random(c.B * c.Hq * c.Sq * c.D);
  std::vector<float> k = random(c.B * c.Hkv * c.Skv * c.D);
  std::vector<float> v = random(c.B * c.Hkv * c.Skv * c.Dv);
  bool stored = values == Values::Bf16Stored;
  bool bf16 = values == Values::Bf16InF32 || values == Values::Bf16 || stored;
  if (values != Values::F32)
    for (std::vector<float> *x : {&q, &k, &v})
      for (float &e : *x)
        e = bf16 ? roundToBf16(e) : roundToF16(e);
  std::vector<float> mask = makeMask(c, rng);
  std::vector<float> out(size_t(c.B * c.Hq * c.Sq * c.Dv), NAN);
  int64_t mRows = c.mask == Mask::PerQuery ? c.Sq : 1;
  auto memref = [](auto &x, int64_t b, int64_t h, int64_t s, int64_t d) {
    using T = std::remove_reference_t<decltype(x[0])>;
    return MemRef<4, T>{
        x.data(), x.data(), 0, {b, h, s, d}, {h * s * d, s * d, d, 1}};
  };
  MemRef<4> mq = memref(q, c.B, c.Hq, c.Sq, c.D);
  MemRef<4> mm = memref(mask, c.B, 1, mRows, c.Skv);
  MemRef<4> mo = memref(out, c.B, c.Hq, c.Sq, c.Dv);
  float scale = 1.0f / std::sqrt(float(c.D));
  int32_t flags = (c.mask != Mask::None ? TFC_UK_ATTENTION_MASK : 0) |
                  (bf16 ? TFC_UK_ATTENTION_BF16 : 0);
  int32_t causal = c.causal ? 1 : 0;
  omp_set_num_threads(2);
  // K and V as the entry takes them: f32, or the bits of 16-bit values.
  auto call = [&](auto element) {
    using T = decltype(element);
    auto typed = [&](const std::vector<float> &x) {
      std::vector<T> y(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        if constexpr (std::is_same_v<T, float>)
          y[i] = x[i];
        else
          y[i] = bitsOf(x[i], values);
      return y;
    };
    std::vector<T> kt = typed(k), vt = typed(v);
    // Q and the output as bf16 (Bf16Stored); the output widened back into
    // `out` after the call.
    std::vector<uint16_t> q16(q.size()),
        out16(out.size(), uint16_t(0x7fc0)); // NaN
    for (size_t i = 0; stored && i < q.size(); ++i)
      q16[i] = bitsOf(q[i], values);
    MemRef<4, uint16_t> mq16 = memref(q16, c.B, c.Hq, c.Sq, c.D);
    MemRef<4, uint16_t> mo16 = memref(out16, c.B, c.Hq, c.Sq, c.Dv);
    auto widenOutput = [&] {
      for (size_t i = 0; i < out.size(); ++i) {
        uint32_t wide = uint32_t(out16[i]) << 16;
        std::memcpy(&out[i], &wide, 4);
      }
    };
    if (split < 0) {
      MemRef<4, T> mk = memref(kt, c.B, c.Hkv, c.Skv, c.D);
      MemRef<4, T> mv = memref(vt, c.B, c.Hkv, c.Skv, c.Dv);
      if constexpr (std::is_same_v<T, uint16_t>)
        if (stored) {
          _mlir_ciface_tfc_uk_attention_bf16(&mq16, &mk, &mv, &mm, &mo16, scale,
                                             flags, causal, c.softcap,
                                             c.window);
          widenOutput();
          return;
        }
      if constexpr (std::is_same_v<T, float>)
        _mlir_ciface_tfc_uk_attention_f32(&mq, &mk, &mv, &mm, &mo, scale, flags,
                                          causal, c.softcap, c.window);
      else if (values == Values::F16)
        _mlir_ciface_tfc_uk_attention_f32_f16(
            &mq, &mk, &mv, &mm, &mo, scale, flags, causal, c.softcap, c.window);
      else
        _mlir_ciface_tfc_uk_attention_f32_bf16(
            &mq, &mk, &mv, &mm, &mo, scale, flags, causal, c.softcap, c.window);
      return;
    }
    // Keys [0, split) in a view of a longer buffer (a cache with spare
    // slots), the others in a buffer of their own.
    constexpr int64_t kSpare = 5;
    int64_t rest = c.Skv - split;
    std::vector<T> k0(size_t(c.B * c.Hkv * (split + kSpare) * c.D), T(-1)),
        v0(size_t(c.B * c.Hkv * (split + kSpare) * c.Dv), T(-1)),
        k1(size_t(c.B * c.Hkv * rest * c.D)),
        v1(size_t(c.B * c.Hkv * rest * c.Dv));
    for (int64_t bh = 0; bh < c.B * c.Hkv; ++bh)
      for (int64_t j = 0; j < c.Skv; ++j) {
        const T *kj = &kt[size_t((bh * c.Skv + j) * c.D)];
        const T *vj = &vt[size_t((bh * c.Skv + j) * c.Dv)];
        T *kTo = j < split ? &k0[size_t((bh * (split + kSpare) + j) * c.D)]
                           : &k1[size_t((bh * rest + j - split) * c.D)];
        T *vTo = j < split ? &v0[size_t((bh * (split + kSpare) + j) * c.Dv)]
                           : &v1[size_t((bh * rest + j - split) * c.Dv)];
        std::copy(kj, kj + c.D, kTo);
        std::copy(vj, vj + c.Dv, vTo);
      }
    MemRef<4, T> mk0 = memref(k0, c.B, c.Hkv, split + kSpare, c.D);
    MemRef<4, T> mv0 = memref(v0, c.B, c.Hkv, split + kSpare, c.Dv);
    mk0.sizes[2] = mv0.sizes[2] = split;
    MemRef<4, T> mk1 = memref(k1, c.B, c.Hkv, rest, c.D);
    MemRef<4, T> mv1 = memref(v1, c.B, c.Hkv, rest, c.Dv);
    if constexpr (std::is_same_v<T, uint16_t>)
      if (stored) {
        _mlir_ciface_tfc_uk_attention_kv2_bf16(&mq16, &mk0, &mk1, &mv0, &mv1,
                                               &mm, &mo16, scale, flags, causal,
                                               c.softcap, c.window);
        widenOutput();
        return;
      }
    if constexpr (std::is_same_v<T, float>)
      _mlir_ciface_tfc_uk_attention_kv2_f32(&mq, &mk0, &mk1, &mv0, &mv1, &mm,
                                            &mo, scale, flags, causal,
                                            c.softcap, c.window);
    else if (values == Values::F16)
      _mlir_ciface_tfc_uk_attention_kv2_f32_f16(&mq, &mk0, &mk1, &mv0, &mv1,
                                                &mm, &mo, scale, flags, causal,
                                                c.softcap, c.window);
    else
      _mlir_ciface_tfc_uk_attention_kv2_f32_bf16(&mq, &mk0, &mk1, &mv0, &mv1,
                                                 &mm, &mo, scale, flags, causal,
                                                 c.softcap, c.window);
  };
  if (values == Values::F32 || values == Values::Bf16InF32)
    call(float());
  else
    call(uint16_t());

  Errors e;
  double vMax = 0, total = 0;
  int64_t count = 0;
  for (float x : v)
    vMax = std::max(vMax, double(std::fabs(x)));
  int64_t group = c.Hq / c.Hkv, offset = c.Skv - c.Sq;
  std::vector<double> s(size_t(c.Skv));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.Sq; ++i) {
        int64_t kh = h / group;
        const float *qi = &q[size_t(((b * c.Hq + h) * c.Sq + i) * c.D)];
        double mx = -INFINITY;
        for (int64_t j = 0; j < c.Skv; ++j) {
          const float *kj = &k[size_t(((b * c.Hkv + kh) * c.Skv + j) * c.D)];
          double dot = 0;
          for (int64_t x = 0; x < c.D; ++x)
            dot += double(qi[x]) * kj[x];
          double m =
              mask[size_t((b * mRows + (mRows > 1 ? i : 0)) * c.Skv + j)];
          double x = dot * scale;
          if (c.softcap > 0)
            x = c.softcap * std::tanh(x / c.softcap);
          bool hidden = (c.causal && j > i + offset) ||
                        (c.window > 0 && i + offset - j >= c.window);
          s[size_t(j)] = hidden ? -INFINITY : x + m;
          mx = std::max(mx, s[size_t(j)]);
        }
        std::vector<double> acc(size_t(c.Dv), 0.0);
        double sum = 0;
        if (mx != -INFINITY)
          for (int64_t j = 0; j < c.Skv; ++j) {
            double w = std::exp(s[size_t(j)] - mx);
            sum += w;
            const float *vj = &v[size_t(((b * c.Hkv + kh) * c.Skv + j) * c.Dv)];
            for (int64_t x = 0; x < c.Dv; ++x)
              acc[size_t(x)] += w * vj[x];
          }
        const float *o = &out[size_t(((b * c.Hq + h) * c.Sq + i) * c.Dv)];
        for (int64_t x = 0; x < c.Dv; ++x) {
          double ref = sum > 0 ? acc[size_t(x)] / sum : 0.0;
          double err = std::fabs(double(o[x]) - ref) / vMax;
          e.worst = std::isnan(err) ? INFINITY : std::max(e.worst, err);
          total += err;
          ++count;
        }
      }
  e.mean = total / double(std::max<int64_t>(count, 1));
  if (outputs)
    *outputs = out;
  return e;
}

class AttentionMaskTest : public ::testing::TestWithParam<Case> {};

/// The bound on |out - ref| / max|V|: the kernels' exp2 is within 5.4e-7
/// relative (AVX-512's exp2Lookup; AVX2's exp2 is closer), which moves an
/// output by at most twice that times max|V|, and the scores carry f32
/// dot-product rounding. A dropped or extra key moves it by 1e-2 or more.
constexpr double kBound = 4e-6;

TEST_P(AttentionMaskTest, MatchesFloat64) {
  const Case &c = GetParam();
  double worst = run(c, unsigned(c.Skv * 7 + c.Sq)).worst;
  EXPECT_LE(worst, kBound) << ::testing::PrintToString(c);
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", worst);
  RecordProperty("worst", text);
}

/// The keys and values in two parts: split where a decoder's cache ends and
/// its new keys begin, and inside the used keys (a part boundary within a
/// key range). The cases of more than a few query rows go through the
/// parts' concatenation.
TEST_P(AttentionMaskTest, TwoPartsMatchFloat64) {
  const Case &c = GetParam();
  for (int64_t split : {c.Skv - c.Sq, c.Skv / 3, int64_t(0)}) {
    double worst = run(c, unsigned(c.Skv * 7 + c.Sq), split).worst;
    EXPECT_LE(worst, kBound)
        << ::testing::PrintToString(c) << ", keys split at " << split;
  }
}

/// Q, K and V of bf16 values (TFC_UK_ATTENTION_BF16): query blocks may
/// multiply them as bf16 pairs, whose products are exact, and then round
/// the softmax's weights to bf16 (relative error at most 2^-8 each) for the
/// product with V. An output is a weighted mean of V's rows, so those
/// roundings move it by at most 2^-8 max|V| (on top of kBound), and by far
/// less on average (independent roundings of many weights partly cancel;
/// a row that sees one key has the exact weight 1): the mean error is held
/// to an eighth of that. A dropped or extra key moves an output by 1e-2
/// or more. On the test's two threads, the query-block cases of four or
/// more K/V heads (over the batch) pair K and V head by head in the tasks,
/// the others all heads ahead of them.
/// The same with K and V passed as bf16 (the _f32_bf16 entries), in one
/// buffer and in two parts.
TEST_P(AttentionMaskTest, Bf16ValuesMatchFloat64) {
  const Case &c = GetParam();
  constexpr double kRounding = 1.0 / 256;
  for (Values values : {Values::Bf16InF32, Values::Bf16})
    for (int64_t split : {int64_t(-1), c.Skv - c.Sq, c.Skv / 3}) {
      if (values == Values::Bf16InF32 && split >= 0)
        continue;
      Errors e = run(c, unsigned(c.Skv * 7 + c.Sq), split, values);
      std::string what = ::testing::PrintToString(c) +
                         (values == Values::Bf16 ? ", K and V bf16" : "") +
                         (split >= 0 ? ", keys split" : "");
      EXPECT_LE(e.worst, kRounding + kBound) << what;
      EXPECT_LE(e.mean, kRounding / 8) << what;
      if (values == Values::Bf16InF32) {
        char text[64];
        std::snprintf(text, sizeof text, "%.2e (mean %.2e)", e.worst, e.mean);
        RecordProperty("worst", text);
      }
    }
}

/// Q, K, V and the output stored as bf16 (the _bf16 entries, in one
/// buffer and in two parts): the same computation as the _f32_bf16 entries
/// on the same values, its output rounded to bf16 (to nearest, ties to
/// even) bit for bit, whichever path runs it (the query blocks read and
/// write bf16 themselves; a few rows run on widened copies); and so within
/// Bf16ValuesMatchFloat64's bounds plus that rounding (2^-8 of an output,
/// at most 2^-8 max|V|).
TEST_P(AttentionMaskTest, Bf16StoredIsRoundedF32Output) {
  const Case &c = GetParam();
  constexpr double kRounding = 1.0 / 256, kOutputRounding = 1.0 / 256;
  for (int64_t split : {int64_t(-1), c.Skv - c.Sq, c.Skv / 3}) {
    std::vector<float> f32Out, bf16Out;
    unsigned seed = unsigned(c.Skv * 7 + c.Sq);
    (void)run(c, seed, split, Values::Bf16, &f32Out);
    Errors e = run(c, seed, split, Values::Bf16Stored, &bf16Out);
    std::string what =
        ::testing::PrintToString(c) + (split >= 0 ? ", keys split" : "");
    int64_t differ = 0;
    for (size_t i = 0; i < f32Out.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &f32Out[i], 4);
      bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000u;
      float rounded;
      std::memcpy(&rounded, &bits, 4);
      differ += std::memcmp(&rounded, &bf16Out[i], 4) != 0;
    }
    EXPECT_EQ(differ, 0) << what;
    EXPECT_LE(e.worst, kRounding + kOutputRounding + kBound) << what;
    EXPECT_LE(e.mean, kRounding / 8 + kOutputRounding) << what;
  }
}

/// f16 values with K and V passed as f16 (the _f32_f16 entries): the
/// kernels widen them exactly and compute as in f32, within kBound.
TEST_P(AttentionMaskTest, F16KeysValuesMatchFloat64) {
  const Case &c = GetParam();
  for (int64_t split : {int64_t(-1), c.Skv - c.Sq, c.Skv / 3}) {
    double worst = run(c, unsigned(c.Skv * 7 + c.Sq), split, Values::F16).worst;
    EXPECT_LE(worst, kBound) << ::testing::PrintToString(c) << ", K and V f16"
                             << (split >= 0 ? ", keys split" : "");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Masks, AttentionMaskTest,
    ::testing::Values(
        // Decode steps over a cache of 1024 slots: the used ones and the new
        // keys after the unused ones (two key ranges), grouped-query heads.
        Case{"decode_fixed_cache",
             2,
             8,
             2,
             1,
             1025,
             64,
             64,
             true,
             Mask::FixedCache,
             {10, 700}},
        Case{"decode_chunk_fixed_cache",
             2,
             4,
             4,
             3,
             603,
             40,
             24,
             true,
             Mask::FixedCache,
             {0, 37}},
        // Over 8 MiB of keys and values: the kernel prefetches them.
        Case{"decode_streamed_kv",
             1,
             8,
             4,
             1,
             4100,
             128,
             128,
             true,
             Mask::FixedCache,
             {3000}},
        // A batch element with no visible key: its rows average over all.
        Case{"decode_one_empty",
             2,
             2,
             1,
             1,
             300,
             32,
             32,
             false,
             Mask::RightPadding,
             {120, 0}},
        Case{"decode_right_padding_inf",
             2,
             4,
             2,
             2,
             530,
             64,
             64,
             false,
             Mask::RightPaddingInf,
             {513, 3}},
        Case{"decode_left_padding",
             2,
             4,
             2,
             1,
             777,
             64,
             64,
             true,
             Mask::LeftPadding,
             {500, 60}},
        // Few causal rows, the first ones seeing hidden keys only.
        Case{"few_rows_left_padding_causal",
             1,
             2,
             1,
             6,
             300,
             32,
             32,
             true,
             Mask::LeftPadding,
             {297}},
        Case{"few_rows_per_query",
             1,
             2,
             1,
             5,
             200,
             16,
             16,
             false,
             Mask::PerQuery,
             {}},
        // Query blocks (prefill): padding past the batch's last visible key;
        // left padding under a causal mask leaves rows that see no visible
        // key.
        Case{"prefill_right_padding",
             3,
             3,
             3,
             77,
             77,
             64,
             64,
             false,
             Mask::RightPadding,
             {50, 20, 5}},
        Case{"prefill_right_padding_causal",
             2,
             4,
             2,
             100,
             100,
             32,
             32,
             true,
             Mask::RightPadding,
             {30, 45}},
        Case{"prefill_left_padding_causal",
             2,
             2,
             2,
             70,
             70,
             32,
             40,
             true,
             Mask::LeftPadding,
             {0, 25}},
        Case{"prefill_per_query",
             1,
             2,
             2,
             40,
             40,
             24,
             24,
             false,
             Mask::PerQuery,
             {}},
        // Soft-capped scores (cap 1.5 to 3 on scores of unit variance: far
        // from linear) through every path: query blocks with a padding
        // mask, a per-query mask and none; decode over a fixed cache; few
        // rows without a mask.
        Case{"prefill_softcap_right_padding_causal",
             2,
             4,
             2,
             45,
             45,
             32,
             32,
             true,
             Mask::RightPadding,
             {45, 30},
             1.5f},
        Case{"prefill_softcap_per_query",
             1,
             2,
             1,
             20,
             33,
             24,
             16,
             false,
             Mask::PerQuery,
             {},
             2.0f},
        Case{"prefill_softcap_no_mask_causal",
             1,
             3,
             3,
             130,
             130,
             64,
             64,
             true,
             Mask::None,
             {},
             1.5f},
        Case{"prefill_no_mask", 1, 2, 1, 50, 61, 16, 24, false, Mask::None, {}},
        // One query block of 16 rows (13-16 queries), wide heads (D = 128:
        // four tiles of K's pairs on AMX).
        Case{"prefill_one_block_wide_heads_right_padding_causal",
             2,
             4,
             2,
             14,
             200,
             128,
             80,
             true,
             Mask::RightPadding,
             {150, 197}},
        // Odd head dimensions and key count (bf16 pairs of channels and of
        // keys with a lone last half).
        Case{"prefill_odd_dims_right_padding_causal",
             1,
             3,
             1,
             45,
             77,
             33,
             19,
             true,
             Mask::RightPadding,
             {70}},
        Case{"decode_softcap_fixed_cache",
             2,
             8,
             2,
             1,
             301,
             64,
             64,
             true,
             Mask::FixedCache,
             {10, 200},
             1.5f},
        Case{"few_rows_softcap_no_mask_causal",
             1,
             4,
             1,
             2,
             150,
             40,
             40,
             true,
             Mask::None,
             {},
             3.0f},
        // Sliding windows. Query blocks: a window shorter than a block of
        // rows and one longer, over more keys than a key block; right
        // padding that leaves the last rows' windows with hidden keys only
        // (they average over those); left padding under a window that
        // starts after it; no causal limit; a per-query mask.
        Case{"prefill_window_causal",
             1,
             4,
             2,
             600,
             600,
             32,
             32,
             true,
             Mask::None,
             {},
             0.0f,
             37},
        Case{"prefill_window_long_right_padding_causal",
             2,
             2,
             1,
             531,
             531,
             64,
             48,
             true,
             Mask::RightPadding,
             {531, 400},
             0.0f,
             300},
        Case{"prefill_window_short_right_padding_causal",
             2,
             2,
             2,
             90,
             90,
             32,
             32,
             true,
             Mask::RightPadding,
             {80, 70},
             0.0f,
             5},
        Case{"prefill_window_left_padding_softcap_causal",
             2,
             2,
             2,
             150,
             150,
             32,
             32,
             true,
             Mask::LeftPadding,
             {0, 40},
             2.0f,
             64},
        Case{"prefill_window_no_causal",
             1,
             2,
             1,
             70,
             300,
             16,
             16,
             false,
             Mask::RightPadding,
             {250},
             0.0f,
             100},
        Case{"prefill_window_per_query",
             1,
             2,
             2,
             40,
             60,
             24,
             24,
             true,
             Mask::PerQuery,
             {},
             0.0f,
             9},
        // Decode steps through a window over a fixed cache (the keys before
        // it skipped), one whose window holds unused slots and the new key, and
        // a few rows of a chunk.
        Case{"decode_window_fixed_cache",
             2,
             8,
             2,
             1,
             1025,
             64,
             64,
             true,
             Mask::FixedCache,
             {1000, 700},
             0.0f,
             200},
        Case{"decode_window_over_unused_slots",
             1,
             4,
             1,
             1,
             513,
             32,
             32,
             true,
             Mask::FixedCache,
             {100},
             0.0f,
             20},
        Case{"few_rows_window_causal",
             1,
             4,
             1,
             5,
             700,
             40,
             40,
             true,
             Mask::None,
             {},
             0.0f,
             123}));

} // namespace
