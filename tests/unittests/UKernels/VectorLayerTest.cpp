//===- VectorLayerTest.cpp - The vector layer of simd.h, either ISA -------===//
//
// The operations the shared kernels are written against (VecF, LaneMask),
// on whichever ISA the kernels were built for here (AVX-512 or AVX2), against
// scalar references: lane masks, masked loads and stores that touch nothing
// outside their lanes, reductions, vexp2, vtanh and toLog2Domain.
//
//===----------------------------------------------------------------------===//

#include "simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace {

using namespace tfc::uk;

std::vector<float> lanesOf(VecF v) {
  std::vector<float> out(kLanes);
  vstoreu(out.data(), v);
  return out;
}

TEST(VectorLayer, MaskedLoadsAndStoresTouchOnlyTheirLanes) {
  for (int64_t n = -1; n <= kLanes + 1; ++n) {
    // The vector ends a page-sized buffer's last lanes: nothing past it is
    // read (a fault would end the test) or written.
    std::vector<float> src(kLanes * 4), dst(kLanes * 4, -7.0f);
    for (size_t i = 0; i < src.size(); ++i)
      src[i] = float(i + 1);
    LaneMask m = firstLanes(n);
    std::vector<float> got = lanesOf(vloadLanes(src.data() + kLanes, m));
    vstoreLanes(dst.data() + kLanes, m, vloadu(src.data() + kLanes));
    for (int64_t i = 0; i < kLanes; ++i) {
      bool in = i < n;
      EXPECT_EQ(got[i], in ? float(kLanes + i + 1) : 0.0f) << n << " " << i;
      EXPECT_EQ(dst[kLanes + i], in ? float(kLanes + i + 1) : -7.0f);
    }
    EXPECT_EQ(dst[kLanes - 1], -7.0f);
    EXPECT_EQ(dst[2 * kLanes], -7.0f);
  }
}

TEST(VectorLayer, ReductionsAndSelect) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> x(kLanes), y(kLanes);
    for (auto &v : x)
      v = dist(rng);
    for (auto &v : y)
      v = dist(rng);
    double sum = 0;
    float mx = -INFINITY;
    for (float v : x) {
      sum += v;
      mx = std::max(mx, v);
    }
    VecF vx = vloadu(x.data()), vy = vloadu(y.data());
    EXPECT_NEAR(vreduceAdd(vx), sum, 1e-5 * kLanes);
    EXPECT_EQ(vreduceMax(vx), mx);
    int64_t n = trial % (kLanes + 1);
    std::vector<float> sel = lanesOf(vselect(firstLanes(n), vx, vy));
    for (int64_t i = 0; i < kLanes; ++i)
      EXPECT_EQ(sel[i], i < n ? x[i] : y[i]);
  }
}

TEST(VectorLayer, Exp2WithinTwoUlpsWhereNormal) {
  // Every x on a grid of [-126, 127] with random offsets; below the normal
  // range the result is 0 or a denormal, never above 2^-126.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> jitter(0.0f, 1.0f / 1024);
  double worst = 0;
  for (double x0 = -126; x0 < 127; x0 += double(kLanes) / 1024) {
    std::vector<float> x(kLanes);
    for (int64_t i = 0; i < kLanes; ++i)
      x[i] = std::min(float(x0 + i / 1024.0) + jitter(rng), 127.0f);
    std::vector<float> y = lanesOf(vexp2(vloadu(x.data())));
    for (int64_t i = 0; i < kLanes; ++i) {
      double ref = std::exp2(double(x[i]));
      if (ref >= 0x1p-125)
        worst = std::max(worst, std::fabs(y[i] - ref) / ref);
    }
  }
  EXPECT_LT(worst, 2.5e-7); // the polynomial's 2.4e-7 (about 2 ulps)
  for (float x : {-126.5f, -150.0f, -1e30f, -INFINITY}) {
    float y = lanesOf(vexp2(vset1(x)))[0];
    EXPECT_GE(y, 0.0f) << x;
    EXPECT_LE(y, 0x1p-126f) << x;
  }
  EXPECT_NEAR(lanesOf(vexp2(vset1(0.0f)))[0], 1.0f, 2.5e-7);
}

TEST(VectorLayer, ToLog2DomainKeepsFiniteValuesFinite) {
  const float big = std::numeric_limits<float>::max();
  VecF log2e = vset1(kLog2e);
  struct Case {
    float x, expected;
  } cases[] = {{1.0f, kLog2e}, {-2.0f, -2.0f * kLog2e}, {-big, -big},
               {big, big},     {-INFINITY, -INFINITY},  {INFINITY, INFINITY}};
  for (const Case &c : cases)
    EXPECT_EQ(lanesOf(toLog2Domain(vset1(c.x), log2e))[0], c.expected) << c.x;
}

TEST(VectorLayer, TanhWithinItsStatedError) {
  // A dense sweep of [-12, 12] with random offsets, tiny values, and the
  // saturated ends.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> jitter(0.0f, 1.0f / 8192);
  double worstAbs = 0, worstRel = 0;
  for (double x0 = -12; x0 < 12; x0 += double(kLanes) / 8192) {
    std::vector<float> x(kLanes);
    for (int64_t i = 0; i < kLanes; ++i)
      x[i] = float(x0 + double(i) / 8192) + jitter(rng);
    std::vector<float> y = lanesOf(vtanh(vloadu(x.data())));
    for (int64_t i = 0; i < kLanes; ++i) {
      double ref = std::tanh(double(x[i]));
      double err = std::fabs(y[i] - ref);
      worstAbs = std::max(worstAbs, err);
      if (std::fabs(x[i]) > 1e-3)
        worstRel = std::max(worstRel, err / std::fabs(ref));
    }
  }
  EXPECT_LT(worstAbs, 3e-7);
  EXPECT_LT(worstRel, 3e-7);
  for (float x : {1e-30f, -3e-8f, 2.5e-4f, -7e-4f}) {
    float y = lanesOf(vtanh(vset1(x)))[0];
    EXPECT_NEAR(y, x, 3e-7 * std::fabs(x)) << x;
  }
  for (float x : {8.0f, 100.0f, 3e38f, INFINITY}) {
    EXPECT_NEAR(lanesOf(vtanh(vset1(x)))[0], 1.0f, 3e-7) << x;
    EXPECT_NEAR(lanesOf(vtanh(vset1(-x)))[0], -1.0f, 3e-7) << x;
  }
}

} // namespace
