//===- NormsTest.cpp - The rms_norm and layer_norm micro-kernels ----------===//
//
// Each kernel against a double-precision reference: dense rows through the
// vector path (whole groups of 64 and masked tails), rows too short for a
// vector, and strided views (the packed-copy path).
//
//===----------------------------------------------------------------------===//

#include "ukernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

using tfc::uk::MemRef;

struct Rows {
  std::vector<float> x, gamma, beta;
  int64_t rows, n, colStride;
};

Rows randomRows(int64_t rows, int64_t n, int64_t colStride, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(1.5f, 3.0f);
  Rows r{std::vector<float>(rows * n * colStride),
         std::vector<float>(n),
         std::vector<float>(n),
         rows,
         n,
         colStride};
  for (float &v : r.x)
    v = d(rng);
  for (int64_t j = 0; j < n; ++j) {
    r.gamma[j] = d(rng);
    r.beta[j] = d(rng);
  }
  return r;
}

MemRef<2> view(float *data, int64_t rows, int64_t n, int64_t colStride) {
  return {data, data, 0, {rows, n}, {n * colStride, colStride}};
}

MemRef<1> vec(std::vector<float> &v) {
  return {v.data(), v.data(), 0, {int64_t(v.size())}, {1}};
}

/// Largest relative error of `out` [rows, n] (dense) against `ref(r, j)`.
template <typename Ref>
double worst(const std::vector<float> &out, int64_t rows, int64_t n, Ref ref) {
  double w = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double want = ref(r, j);
      w = std::max(w, std::fabs(out[r * n + j] - want) /
                          std::max(std::fabs(want), 1.0));
    }
  return w;
}

class NormsTest : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(NormsTest, RmsNormMatchesDouble) {
  int64_t n = std::get<0>(GetParam()), colStride = std::get<1>(GetParam());
  Rows r = randomRows(5, n, colStride, 1 + n);
  std::vector<float> out(r.rows * n);
  MemRef<2> in = view(r.x.data(), r.rows, n, colStride);
  MemRef<2> o = view(out.data(), r.rows, n, 1);
  MemRef<1> g = vec(r.gamma);
  float eps = 1e-6f;
  _mlir_ciface_tfc_uk_rms_norm_f32(&in, &g, &o, eps);
  auto at = [&](int64_t row, int64_t j) {
    return double(r.x[(row * n + j) * colStride]);
  };
  double w = worst(out, r.rows, n, [&](int64_t row, int64_t j) {
    double sq = 0;
    for (int64_t k = 0; k < n; ++k)
      sq += at(row, k) * at(row, k);
    return at(row, j) / std::sqrt(sq / n + double(eps)) * r.gamma[j];
  });
  EXPECT_LT(w, 1e-5) << "n = " << n << ", column stride " << colStride;
}

TEST_P(NormsTest, LayerNormMatchesDouble) {
  int64_t n = std::get<0>(GetParam()), colStride = std::get<1>(GetParam());
  Rows r = randomRows(5, n, colStride, 100 + n);
  std::vector<float> out(r.rows * n);
  MemRef<2> in = view(r.x.data(), r.rows, n, colStride);
  MemRef<2> o = view(out.data(), r.rows, n, 1);
  MemRef<1> g = vec(r.gamma), b = vec(r.beta);
  float eps = 1e-5f;
  _mlir_ciface_tfc_uk_layer_norm_f32(&in, &g, &b, &o, eps);
  auto at = [&](int64_t row, int64_t j) {
    return double(r.x[(row * n + j) * colStride]);
  };
  double w = worst(out, r.rows, n, [&](int64_t row, int64_t j) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < n; ++k)
      mean += at(row, k) / n;
    for (int64_t k = 0; k < n; ++k)
      var += (at(row, k) - mean) * (at(row, k) - mean) / n;
    return (at(row, j) - mean) / std::sqrt(var + double(eps)) * r.gamma[j] +
           r.beta[j];
  });
  EXPECT_LT(w, 1e-5) << "n = " << n << ", column stride " << colStride;
}

/// The bits of x rounded to bf16 (to nearest, ties to even).
uint16_t bf16BitsOf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

/// x rounded to bf16, as f32.
float roundToBf16(float x) {
  uint32_t bits = uint32_t(bf16BitsOf(x)) << 16;
  std::memcpy(&x, &bits, 4);
  return x;
}

// tfc_uk_layer_norm_bf16 (bf16 rows, gamma, beta and result): the f32
// kernel's result on the same values, rounded to bf16, bit for bit; and so
// within the double reference's bound plus that rounding (2^-8 relative).
TEST_P(NormsTest, LayerNormBf16IsRoundedF32) {
  int64_t n = std::get<0>(GetParam()), colStride = std::get<1>(GetParam());
  Rows r = randomRows(37, n, colStride, 300 + n);
  for (std::vector<float> *v : {&r.x, &r.gamma, &r.beta})
    for (float &e : *v)
      e = roundToBf16(e);
  float eps = 1e-5f;
  std::vector<float> f32Out(r.rows * n);
  MemRef<2> in = view(r.x.data(), r.rows, n, colStride);
  MemRef<2> o = view(f32Out.data(), r.rows, n, 1);
  MemRef<1> g = vec(r.gamma), b = vec(r.beta);
  _mlir_ciface_tfc_uk_layer_norm_f32(&in, &g, &b, &o, eps);

  auto bits = [](const std::vector<float> &v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      h[i] = bf16BitsOf(v[i]);
    return h;
  };
  std::vector<uint16_t> x16 = bits(r.x), g16 = bits(r.gamma),
                        b16 = bits(r.beta), out16(r.rows * n, 0x7fc0);
  MemRef<2, uint16_t> in16{
      x16.data(), x16.data(), 0, {r.rows, n}, {n * colStride, colStride}};
  MemRef<2, uint16_t> o16{out16.data(), out16.data(), 0, {r.rows, n}, {n, 1}};
  MemRef<1, uint16_t> gv{g16.data(), g16.data(), 0, {n}, {1}},
      bv{b16.data(), b16.data(), 0, {n}, {1}};
  _mlir_ciface_tfc_uk_layer_norm_bf16(&in16, &gv, &bv, &o16, eps);

  int64_t differ = 0;
  std::vector<float> out(out16.size());
  for (size_t i = 0; i < out16.size(); ++i) {
    differ += out16[i] != bf16BitsOf(f32Out[i]);
    uint32_t wide = uint32_t(out16[i]) << 16;
    std::memcpy(&out[i], &wide, 4);
  }
  EXPECT_EQ(differ, 0) << "n = " << n << ", column stride " << colStride;
  auto at = [&](int64_t row, int64_t j) {
    return double(r.x[(row * n + j) * colStride]);
  };
  std::vector<double> mean(r.rows, 0.0), var(r.rows, 0.0);
  for (int64_t row = 0; row < r.rows; ++row) {
    for (int64_t k = 0; k < n; ++k)
      mean[row] += at(row, k) / n;
    for (int64_t k = 0; k < n; ++k)
      var[row] += (at(row, k) - mean[row]) * (at(row, k) - mean[row]) / n;
  }
  double w = worst(out, r.rows, n, [&](int64_t row, int64_t j) {
    return (at(row, j) - mean[row]) / std::sqrt(var[row] + double(eps)) *
               r.gamma[j] +
           r.beta[j];
  });
  EXPECT_LT(w, 1e-5 + 1.0 / 256)
      << "n = " << n << ", column stride " << colStride;
}

// n: shorter than a vector, a masked tail only, whole groups of 64 plus a
// tail, LLaMA-sized; dense and every other column.
INSTANTIATE_TEST_SUITE_P(Shapes, NormsTest,
                         ::testing::Values(std::pair{7, 1}, std::pair{40, 1},
                                           std::pair{200, 1},
                                           std::pair{4096, 1}, std::pair{77, 2},
                                           std::pair{200, 3}));

} // namespace
