//===- SimdTest.cpp - exp2, exp2Lookup and transpose16 of simd.h ----------===//

#include "simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace {

/// Largest relative error of `f` against exp2 in double precision over a
/// dense sweep of [lo, hi] with random offsets, for results of at least
/// the smallest normal f32 (2^-126).
template <typename F> double worstRelativeError(F f, double lo, double hi) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> jitter(0.0f, 1.0f / 4096);
  double worst = 0;
  for (double x0 = lo; x0 < hi; x0 += 16.0 / 4096) {
    alignas(64) float x[16], y[16];
    for (int i = 0; i < 16; ++i)
      x[i] = float(x0 + i / 4096.0) + jitter(rng);
    _mm512_store_ps(y, f(_mm512_load_ps(x)));
    for (int i = 0; i < 16; ++i) {
      double ref = std::exp2(double(x[i]));
      if (ref >= std::numeric_limits<float>::min())
        worst = std::max(worst, std::fabs(y[i] - ref) / ref);
    }
  }
  return worst;
}

template <typename F> float at(F f, float x) {
  return _mm512_cvtss_f32(f(_mm512_set1_ps(x)));
}

auto exp2Poly = [](__m512 x) { return tfc::uk::exp2(x); };
auto exp2Table = [](__m512 x) { return tfc::uk::exp2Lookup(x); };

TEST(Exp2, PolynomialWithinItsStatedError) {
  EXPECT_LT(worstRelativeError(exp2Poly, -126, 127), 2.4e-7);
}

TEST(Exp2, LookupWithinItsStatedError) {
  EXPECT_LT(worstRelativeError(exp2Table, -126, 127), 5.5e-7);
}

TEST(Exp2, NegativeInfinityAndFarBelowGiveZero) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {-inf, -1e30f, -300.0f, -201.0f}) {
    EXPECT_EQ(at(exp2Poly, x), 0.0f) << x;
    EXPECT_EQ(at(exp2Table, x), 0.0f) << x;
  }
}

/// Below kExp2Min (-126) the result is 0, from there on a normal number:
/// never a subnormal one, which costs an Intel core a microcode assist.
template <typename F> void expectZeroOrNormal(F f, const char *name) {
  for (float x0 = -150.0f; x0 < -110.0f; x0 += 1.0f / 64)
    for (float x : {x0, std::nextafter(x0, 0.0f)}) {
      float y = at(f, x);
      if (x < tfc::uk::kExp2Min)
        EXPECT_EQ(y, 0.0f) << name << " at " << x;
      else
        EXPECT_GE(y, std::numeric_limits<float>::min()) << name << " at " << x;
    }
}

TEST(Exp2, ResultsAreZeroOrNormal) {
  expectZeroOrNormal(exp2Poly, "exp2");
  expectZeroOrNormal(exp2Table, "exp2Lookup");
}

TEST(Transpose16, MovesEveryElement) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) {
    alignas(64) float row[16];
    for (int j = 0; j < 16; ++j)
      row[j] = float(i * 16 + j);
    r[i] = _mm512_load_ps(row);
  }
  tfc::uk::transpose16(r);
  for (int i = 0; i < 16; ++i) {
    alignas(64) float row[16];
    _mm512_store_ps(row, r[i]);
    for (int j = 0; j < 16; ++j)
      EXPECT_EQ(row[j], float(j * 16 + i)) << i << "," << j;
  }
}

TEST(HorizontalSums16, EachLaneSumsItsVector) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-1000, 1000);
  __m512 x[16];
  double expect[16];
  for (int j = 0; j < 16; ++j) {
    alignas(64) float row[16];
    expect[j] = 0;
    for (int i = 0; i < 16; ++i) {
      // Integers: every order of the additions gives the exact sum.
      row[i] = float(small(rng));
      expect[j] += row[i];
    }
    x[j] = _mm512_load_ps(row);
  }
  alignas(64) float got[16];
  _mm512_store_ps(got, tfc::uk::horizontalSums16(x));
  for (int j = 0; j < 16; ++j)
    EXPECT_EQ(got[j], float(expect[j])) << j;
}

} // namespace
