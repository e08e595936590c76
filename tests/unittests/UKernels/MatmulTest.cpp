//===- MatmulTest.cpp - The packed f32 matmul micro-kernel ----------------===//
//
// tfc_uk_matmul_f32 and tfc_uk_batch_matmul_f32 against a double-precision
// reference, element by element within the error bound of an f32 dot
// product of length K (|C - ref| <= K u |A| |B|, u = 2^-24). The shapes
// cover both ways the threads split a product (few rows: the panels; else
// the rows, each thread packing its A), odd panels and K slices, a B that
// does not fit L2 (prefetched slice by slice), and the operand layouts a
// model hands over: a weight stored [N, K] (B transposed, constant), a
// transposed A, C accumulated into, a batch; and B in f16 or bf16. A
// weight quantized to int8 or int4 as it is packed (TFC_UK_QUANTIZE_I8,
// _I4) is checked against the product with the quantized weight, computed
// here from the flags' definition; with A quantized too
// (TFC_UK_QUANTIZE_A8), against the product of both quantized operands,
// whose sums are exact: the bound is then only that of the blocks' scaling
// and adding, and one value of A's rounded the other way puts a row 50 to
// 700 times over it. A bf16 B times an A of bf16 values (TFC_UK_A_BF16:
// bf16 dot products where AVX-512 BF16 is) is held to the f32 bound.
//
//===----------------------------------------------------------------------===//

#include "ukernels.h"

#include "tfc/runtime/abi.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using tfc::uk::MemRef;

/// B's element type: f16 and bf16 go to the _f16 / _bf16 entry points.
enum class BType { F32, F16, BF16 };

struct Case {
  int64_t batch, m, k, n;
  bool transposeA, weightB, accumulate;
  int threads;
  BType bType = BType::F32;
  int quantBits = 0;        // with weightB: 8 (TFC_UK_QUANTIZE_I8) or 4 (_I4)
  bool quantizeA = false;   // with quantBits: TFC_UK_QUANTIZE_A8
  bool aBf16 = false;       // A of bf16 values: TFC_UK_A_BF16
  bool aStoredBf16 = false; // with a bf16 B: A as its bf16 bits (_bf16_bf16)
  bool unalignedB = false;  // B's elements one byte past an aligned address
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << c.batch << "x" << c.m << "x" << c.k << "x" << c.n
      << (c.transposeA ? " A^T" : "") << (c.weightB ? " weight B" : "")
      << (c.accumulate ? " C +=" : "") << " on " << c.threads << " threads"
      << (c.bType == BType::F16    ? ", B f16"
          : c.bType == BType::BF16 ? ", B bf16"
                                   : "")
      << (c.quantBits ? ", quantized to int" + std::to_string(c.quantBits) : "")
      << (c.quantizeA ? ", A to int8" : "")
      << (c.aStoredBf16 ? ", A stored as bf16"
          : c.aBf16     ? ", A bf16 values"
                        : "")
      << (c.unalignedB ? ", B unaligned" : "");
}

/// Rows of a quantization group: all K for int8, 128 for int4.
int64_t quantGroup(const Case &c) { return c.quantBits == 4 ? 128 : c.k; }

/// The K values b[at + l * ls] quantized in f32 as ukernels.h defines it,
/// in groups of `group` with values in [-qmax, qmax]: replaced by their
/// quantized values; returns the scale of each.
std::vector<float> quantizeLine(std::vector<float> &b, int64_t at, int64_t ls,
                                int64_t K, int64_t group, float qmax) {
  std::vector<float> scales(static_cast<size_t>(K));
  for (int64_t l0 = 0; l0 < K; l0 += group) {
    int64_t l1 = std::min(K, l0 + group);
    float top = 0;
    for (int64_t l = l0; l < l1; ++l)
      top = std::max(top, std::fabs(b[at + l * ls]));
    float scale = top / qmax;
    for (int64_t l = l0; l < l1; ++l) {
      float &x = b[at + l * ls];
      x = scale == 0
              ? 0.0f
              : std::min(qmax, std::max(-qmax, std::nearbyint(x / scale)));
      scales[size_t(l)] = scale;
    }
  }
  return scales;
}

/// TFC_UK_QUANTIZE_I8 / _I4 of B's column whose element l is b[at + l * ls].
std::vector<float> quantizeColumn(std::vector<float> &b, int64_t at, int64_t ls,
                                  const Case &c) {
  return quantizeLine(b, at, ls, c.k, quantGroup(c),
                      c.quantBits == 4 ? 7.0f : 127.0f);
}

/// Rounds b to the 16-bit type (f16: to nearest; bf16: truncated, any
/// bf16 values will do) and returns their bits; b then holds the values
/// exactly, for the reference.
std::vector<uint16_t> toBits16(std::vector<float> &b, BType type) {
  std::vector<uint16_t> bits(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    if (type == BType::F16) {
      _Float16 h = _Float16(b[i]);
      std::memcpy(&bits[i], &h, 2);
      b[i] = float(h);
    } else {
      uint32_t u;
      std::memcpy(&u, &b[i], 4);
      bits[i] = uint16_t(u >> 16);
      u &= 0xffff0000u;
      std::memcpy(&b[i], &u, 4);
    }
  }
  return bits;
}

/// One call through the entry point for A's and B's types and the rank.
template <typename T>
void call(std::vector<float> &a, T *b, std::vector<float> &out, const Case &c,
          const int64_t *as, const int64_t *bs, int32_t flags) {
  int64_t B = c.batch, M = c.m, K = c.k, N = c.n;
  if constexpr (std::is_same_v<T, uint16_t>) {
    if (c.aStoredBf16) {
      std::vector<float> values = a;
      std::vector<uint16_t> bits = toBits16(values, BType::BF16);
      uint16_t *pa = bits.data();
      if (B == 1) {
        MemRef<2, uint16_t> ma{pa, pa, 0, {M, K}, {as[1], as[2]}};
        MemRef<2, uint16_t> mb{b, b, 0, {K, N}, {bs[1], bs[2]}};
        MemRef<2> mc{out.data(), out.data(), 0, {M, N}, {N, 1}};
        _mlir_ciface_tfc_uk_matmul_bf16_bf16(&ma, &mb, &mc, flags);
      } else {
        MemRef<3, uint16_t> ma{pa, pa, 0, {B, M, K}, {as[0], as[1], as[2]}};
        MemRef<3, uint16_t> mb{b, b, 0, {B, K, N}, {bs[0], bs[1], bs[2]}};
        MemRef<3> mc{out.data(), out.data(), 0, {B, M, N}, {M * N, N, 1}};
        _mlir_ciface_tfc_uk_batch_matmul_bf16_bf16(&ma, &mb, &mc, flags);
      }
      return;
    }
  }
  if (B == 1) {
    MemRef<2> ma{a.data(), a.data(), 0, {M, K}, {as[1], as[2]}};
    MemRef<2, T> mb{b, b, 0, {K, N}, {bs[1], bs[2]}};
    MemRef<2> mc{out.data(), out.data(), 0, {M, N}, {N, 1}};
    if constexpr (std::is_same_v<T, float>)
      _mlir_ciface_tfc_uk_matmul_f32(&ma, &mb, &mc, flags);
    else if (c.bType == BType::F16)
      _mlir_ciface_tfc_uk_matmul_f32_f16(&ma, &mb, &mc, flags);
    else
      _mlir_ciface_tfc_uk_matmul_f32_bf16(&ma, &mb, &mc, flags);
    return;
  }
  MemRef<3> ma{a.data(), a.data(), 0, {B, M, K}, {as[0], as[1], as[2]}};
  MemRef<3, T> mb{b, b, 0, {B, K, N}, {bs[0], bs[1], bs[2]}};
  MemRef<3> mc{out.data(), out.data(), 0, {B, M, N}, {M * N, N, 1}};
  if constexpr (std::is_same_v<T, float>)
    _mlir_ciface_tfc_uk_batch_matmul_f32(&ma, &mb, &mc, flags);
  else if (c.bType == BType::F16)
    _mlir_ciface_tfc_uk_batch_matmul_f32_f16(&ma, &mb, &mc, flags);
  else
    _mlir_ciface_tfc_uk_batch_matmul_f32_bf16(&ma, &mb, &mc, flags);
}

std::vector<float> randomVector(size_t n, std::mt19937 &rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

/// Runs one case through the batch entry point (or the 2-D one for a batch
/// of 1) and returns the largest |C - ref| / (K u |A| |B|).
double run(const Case &c, unsigned seed) {
  std::mt19937 rng(seed);
  int64_t B = c.batch, M = c.m, K = c.k, N = c.n;
  std::vector<float> a = randomVector(B * M * K, rng);
  std::vector<float> b = randomVector(B * K * N, rng);
  std::vector<float> c0 = randomVector(B * M * N, rng);
  std::vector<float> out = c0;
  // Element (i, l) of A[bt] and (l, j) of B[bt], by layout.
  int64_t as[3] = {M * K, K, 1}, bs[3] = {K * N, N, 1};
  if (c.transposeA) // stored [K, M]
    as[1] = 1, as[2] = M;
  if (c.weightB) // stored [N, K]
    bs[1] = 1, bs[2] = K;
  int32_t flags = (c.accumulate ? TFC_UK_ACCUMULATE : 0) |
                  (c.weightB ? TFC_UK_CONSTANT_B : 0) |
                  (c.quantBits == 8   ? TFC_UK_QUANTIZE_I8
                   : c.quantBits == 4 ? TFC_UK_QUANTIZE_I4
                                      : 0) |
                  (c.quantizeA ? TFC_UK_QUANTIZE_A8 : 0) |
                  (c.aBf16 ? TFC_UK_A_BF16 : 0);
  if (c.aBf16 || c.aStoredBf16) // A's values rounded to bf16, as promised
    (void)toBits16(a, BType::BF16);
  omp_set_num_threads(c.threads);
  std::vector<uint16_t> b16;
  if (c.bType != BType::F32)
    b16 = toBits16(b, c.bType);
  // B's bytes one past a 64-byte boundary where asked (a weight bound in
  // place at any offset of its file: every load of B is unaligned).
  std::vector<char> unaligned;
  auto place = [&](auto *data, size_t n) {
    if (!c.unalignedB)
      return data;
    size_t bytes = n * sizeof(*data);
    unaligned.assign(bytes + 128, 0);
    char *at = unaligned.data() +
               (64 - reinterpret_cast<uintptr_t>(unaligned.data()) % 64) + 1;
    std::memcpy(at, data, bytes);
    return reinterpret_cast<decltype(data)>(at);
  };
  float *b32 = c.bType == BType::F32 ? place(b.data(), b.size()) : nullptr;
  uint16_t *b16p =
      c.bType != BType::F32 ? place(b16.data(), b16.size()) : nullptr;
  // Twice: a constant B is packed on the first call and reused after.
  for (int pass = 0; pass < 2; ++pass) {
    out = c0;
    if (c.bType == BType::F32)
      call(a, b32, out, c, as, bs, flags);
    else
      call(a, b16p, out, c, as, bs, flags);
  }
  tfc_uk_forget_packed_weights();
  // The reference's B: the quantized values, and the scale of each
  // element.
  std::vector<std::vector<float>> scales(size_t(B * N),
                                         std::vector<float>(size_t(K), 1.0f));
  if (c.quantBits)
    for (int64_t bt = 0; bt < B; ++bt)
      for (int64_t j = 0; j < N; ++j)
        scales[size_t(bt * N + j)] =
            quantizeColumn(b, bt * bs[0] + j * bs[2], bs[1], c);
  // ... and A's values and the scale of each (1 unquantized).
  std::vector<std::vector<float>> aScales(size_t(B * M),
                                          std::vector<float>(size_t(K), 1.0f));
  if (c.quantizeA)
    for (int64_t bt = 0; bt < B; ++bt)
      for (int64_t i = 0; i < M; ++i)
        aScales[size_t(bt * M + i)] =
            quantizeLine(a, bt * as[0] + i * as[1], as[2], K, 128, 127.0f);
  // A quantized product rounds twice more per group: its sum times its
  // scale, added to the others. With A quantized too, a block's sum is
  // exact (in int32, then f32: at most 128 * 127 * 127 < 2^24), and only
  // the product of the scales, its product with the sum and the adding
  // round.
  int64_t groups = c.quantBits ? (K + quantGroup(c) - 1) / quantGroup(c) : 0;
  double roundings = c.quantizeA ? double(3 * ((K + 127) / 128) + 1)
                                 : double(K + 1 + 2 * groups);
  double worst = 0;
  for (int64_t bt = 0; bt < B; ++bt)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double ref = 0, scale = 0;
        for (int64_t l = 0; l < K; ++l) {
          double x = double(a[bt * as[0] + i * as[1] + l * as[2]]) *
                     aScales[size_t(bt * M + i)][size_t(l)];
          double y = double(b[bt * bs[0] + l * bs[1] + j * bs[2]]) *
                     scales[size_t(bt * N + j)][size_t(l)];
          ref += x * y;
          scale += std::fabs(x * y);
        }
        double c0v = c0[(bt * M + i) * N + j];
        if (c.accumulate) {
          ref += c0v;
          scale += std::fabs(c0v);
        }
        double err = std::fabs(out[(bt * M + i) * N + j] - ref);
        worst = std::max(worst, err / (roundings * std::ldexp(1.0, -24) *
                                       std::max(scale, 1e-30)));
      }
  return worst;
}

class MatmulTest : public ::testing::TestWithParam<Case> {};

TEST_P(MatmulTest, WithinDotProductBound) {
  const Case &c = GetParam();
  double w = run(c, unsigned(c.m * 131 + c.n * 7 + c.k));
  EXPECT_LE(w, 1.0) << ::testing::PrintToString(c);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulTest,
    ::testing::Values(
        // Few rows (panels split): one row, a decode step's GEMV.
        Case{1, 1, 300, 70, false, true, false, 2},
        Case{1, 11, 64, 33, false, false, true, 2},
        // Few rows with a B of over 512 KiB: on the threads; one to three
        // rows keep several sets of accumulators (a K of 1100 leaves a
        // tail of steps after the last full set).
        Case{1, 1, 1100, 300, false, true, false, 2},
        Case{1, 2, 777, 300, false, true, true, 2},
        Case{1, 3, 1100, 130, true, true, false, 2},
        Case{1, 1, 1100, 600, false, true, true, 2, BType::BF16},
        Case{1, 1, 1025, 520, false, true, false, 2, BType::F16},
        // Rows split, one block per thread, odd heights and N.
        Case{1, 128, 768, 65, false, true, false, 2},
        Case{1, 25, 260, 17, true, false, false, 2},
        Case{1, 131, 513, 40, false, true, true, 3},
        // B past L2 (1.3 MiB packed): the rows prefetch its next slice,
        // a short last one included.
        Case{1, 64, 1100, 300, false, true, false, 2},
        // More blocks than threads (kMC = 96 rows at most each).
        Case{1, 301, 129, 48, false, true, false, 2},
        Case{1, 200, 40, 31, true, true, true, 1},
        // B in f16 and bf16 (a weight of a model computing in them, and
        // a product of activations), packed in 16-bit panels and widened
        // as the kernel loads them.
        Case{1, 1, 300, 70, false, true, false, 2, BType::F16},
        Case{1, 130, 700, 33, false, true, true, 2, BType::BF16},
        Case{3, 70, 300, 50, true, false, false, 2, BType::F16},
        Case{4, 9, 40, 17, false, false, true, 1, BType::BF16},
        // A 16-bit weight past L2 (1.3 MiB of bf16 panels): prefetched.
        Case{1, 64, 1100, 600, false, true, false, 2, BType::BF16},
        // Weights quantized to int8 as they are packed: a decode GEMV on
        // the threads, rows split with B past L2 (prefetched), odd N and
        // K slices, a bf16 weight, accumulation, a batch of weights.
        Case{1, 1, 1100, 300, false, true, false, 2, BType::F32, 8},
        Case{1, 3, 777, 130, false, true, true, 2, BType::F32, 8},
        Case{1, 64, 1100, 600, false, true, false, 2, BType::F32, 8},
        Case{1, 131, 513, 40, true, true, true, 3, BType::F32, 8},
        Case{1, 1, 1025, 520, false, true, false, 2, BType::BF16, 8},
        Case{3, 20, 300, 50, false, true, true, 2, BType::F32, 8},
        // ... and to int4, groups of 128 rows: K a multiple of the group and
        // not (a short last group), B past L2, few and many rows, odd N.
        Case{1, 1, 1024, 300, false, true, false, 2, BType::F32, 4},
        Case{1, 2, 777, 130, false, true, true, 2, BType::F32, 4},
        Case{1, 64, 1100, 600, false, true, false, 2, BType::F32, 4},
        Case{1, 131, 300, 40, true, true, true, 3, BType::F32, 4},
        Case{1, 1, 1025, 520, false, true, false, 2, BType::BF16, 4},
        Case{2, 20, 130, 17, false, true, true, 2, BType::F32, 4},
        // Batches: small products spread over the threads, large ones
        // each on all of them.
        Case{5, 13, 37, 21, false, false, false, 2},
        Case{3, 70, 300, 50, true, false, true, 2}));

// B at an address one byte past an aligned one, as a weight bound in place
// at any offset of its file (abi.h, tfc_model_weight_alignment): every
// packing of it, f32, f16 and bf16 panels, transposed or not, a weight
// quantized to int8 or int4 (with A quantized too), the bf16 dot products.
INSTANTIATE_TEST_SUITE_P(
    UnalignedB, MatmulTest,
    ::testing::Values(Case{1, 1, 300, 70, false, true, false, 2, BType::F32, 0,
                           false, false, false, true},
                      Case{1, 64, 1100, 300, false, true, false, 2, BType::F32,
                           0, false, false, false, true},
                      Case{1, 25, 260, 17, true, false, false, 2, BType::F32, 0,
                           false, false, false, true},
                      Case{1, 130, 700, 33, false, true, true, 2, BType::BF16,
                           0, false, false, false, true},
                      Case{3, 70, 300, 50, true, false, false, 2, BType::F16, 0,
                           false, false, false, true},
                      Case{1, 3, 777, 130, false, true, true, 2, BType::F32, 8,
                           false, false, false, true},
                      Case{1, 2, 777, 130, false, true, true, 2, BType::F32, 4,
                           false, false, false, true},
                      Case{1, 5, 777, 130, false, true, true, 2, BType::F32, 8,
                           true, false, false, true},
                      Case{1, 37, 301, 45, false, true, false, 2, BType::BF16,
                           0, false, true, true, true}));

// Weights quantized with A quantized too (integer dot products; the
// emulated-VNNI build of the kernels runs these alone).
INSTANTIATE_TEST_SUITE_P(
    QuantizedActivations, MatmulTest,
    ::testing::Values(
        // A decode GEMV,
        // one to seven rows (the kernel runs them four at a time), K not a
        // multiple of 4 or of a block, odd N, prefill heights, transposed
        // A, accumulation, a bf16 weight, a batch.
        Case{1, 1, 1100, 300, false, true, false, 2, BType::F32, 8, true},
        Case{1, 5, 777, 130, false, true, true, 2, BType::F32, 8, true},
        Case{1, 131, 513, 40, true, true, true, 3, BType::F32, 8, true},
        Case{1, 1, 1025, 520, false, true, false, 2, BType::BF16, 8, true},
        Case{3, 6, 301, 50, false, true, true, 2, BType::F32, 8, true},
        // With 512-bit VNNI, int8 weights run six rows by two panels:
        // every short last block of rows (one to five), an odd panel count
        // (a lone last panel, N = 40 and 70) and an even one with a partial
        // second panel (N = 17, 63), more rows than one unit (kMC = 96),
        // fewer units than threads.
        Case{1, 11, 300, 40, false, true, false, 2, BType::F32, 8, true},
        Case{1, 9, 129, 17, false, true, true, 3, BType::F32, 8, true},
        Case{1, 8, 640, 63, true, true, false, 2, BType::F32, 8, true},
        Case{1, 200, 257, 70, false, true, true, 2, BType::F32, 8, true},
        Case{1, 100, 1100, 96, false, true, false, 2, BType::F32, 8, true},
        Case{1, 1, 1024, 300, false, true, false, 2, BType::F32, 4, true},
        Case{1, 7, 777, 130, false, true, true, 2, BType::F32, 4, true},
        Case{1, 64, 1100, 600, false, true, false, 2, BType::F32, 4, true},
        Case{1, 131, 300, 40, true, true, true, 3, BType::F32, 4, true},
        Case{2, 2, 130, 17, false, true, true, 1, BType::F32, 4, true},
        // int4 weights on the six-row, two-panel VNNI-512 kernel too: short
        // last row blocks of five and three rows, a lone last panel.
        Case{1, 11, 513, 63, false, true, false, 2, BType::F32, 4, true},
        Case{1, 9, 300, 70, true, true, true, 3, BType::F32, 4, true},
        // Where the int8 weights run on AMX tiles (units of up to 32 rows
        // by two panels): the fewest rows it takes (4) and one fewer, one
        // whole tile of rows against exactly two panels and one block of
        // K, 33 rows (a last unit of one row) by three panels (a lone last
        // one), several units of rows with transposed A.
        Case{1, 4, 128, 16, false, true, false, 2, BType::F32, 8, true},
        Case{1, 3, 200, 40, false, true, true, 2, BType::F32, 8, true},
        Case{1, 16, 256, 32, false, true, false, 2, BType::F32, 8, true},
        Case{1, 33, 520, 48, false, true, true, 2, BType::F32, 8, true},
        Case{1, 96, 384, 200, true, true, false, 2, BType::F32, 8, true},
        // int4 weights on AMX (unpacked per thread and pair of panels, every
        // block of rows against them): the fewest rows it takes (12) and one
        // fewer, 33 rows by three panels with a K not a multiple of a
        // block, several units of rows and pairs of panels.
        Case{1, 12, 256, 32, false, true, false, 2, BType::F32, 4, true},
        Case{1, 11, 256, 32, false, true, true, 2, BType::F32, 4, true},
        Case{1, 33, 520, 48, false, true, true, 2, BType::F32, 4, true},
        Case{1, 96, 384, 200, true, true, false, 2, BType::F32, 4, true}));

// A bf16 weight (or B) times an A of bf16 values (TFC_UK_A_BF16; bf16 dot
// products where AVX-512 BF16 is, which the emulated-BF16 build of a host
// without it runs alone): a decode GEMV, one to fifteen rows (eight at a
// time: short blocks of one, five and seven rows), rows split over the
// threads with a short block of six, odd K (a last pair padded), odd N (a
// partial last panel),
// transposed A, accumulation, a B of activations (packed per call), a
// batch, B past L2.
INSTANTIATE_TEST_SUITE_P(
    Bf16Products, MatmulTest,
    ::testing::Values(
        Case{1, 1, 1100, 300, false, true, false, 2, BType::BF16, 0, false,
             true},
        Case{1, 13, 777, 130, false, true, true, 2, BType::BF16, 0, false,
             true},
        Case{1, 131, 513, 40, true, true, true, 3, BType::BF16, 0, false, true},
        Case{1, 5, 301, 33, false, false, false, 2, BType::BF16, 0, false,
             true},
        Case{1, 15, 260, 50, false, true, true, 2, BType::BF16, 0, false, true},
        Case{1, 70, 300, 70, false, true, false, 2, BType::BF16, 0, false,
             true},
        Case{4, 9, 40, 17, false, false, true, 1, BType::BF16, 0, false, true},
        Case{1, 64, 1100, 600, false, true, false, 2, BType::BF16, 0, false,
             true},
        // Where they run on AMX tiles (K in tiles of 16 pairs, rows in
        // units of 32): the fewest rows (2), a K shorter than one tile of
        // pairs, one whole tile of rows by two panels, 33 rows (a last
        // unit of one row) by three panels, a B of activations.
        Case{1, 2, 64, 16, false, true, false, 2, BType::BF16, 0, false, true},
        Case{1, 16, 31, 32, false, true, true, 2, BType::BF16, 0, false, true},
        Case{1, 33, 100, 48, false, true, true, 2, BType::BF16, 0, false, true},
        Case{1, 47, 1025, 20, true, false, false, 2, BType::BF16, 0, false,
             true},
        // The flag with an f32 B changes nothing.
        Case{1, 7, 300, 50, false, true, false, 2, BType::F32, 0, false,
             true}));

// A stored as bf16 (the _bf16_bf16 entries, which a bf16 model's matmuls
// call): read as bf16 pairs by the bf16 dot products (on AMX tiles from
// two rows up where the host has them, else AVX-512) in rows in place and
// transposed, odd K (a last pair padded) past one store of 32 values, odd
// N, accumulation, a B of activations, a batch; widened to f32 first where
// the weight is quantized (int8 and int4, with A quantized too or not; A
// transposed).
INSTANTIATE_TEST_SUITE_P(
    Bf16StoredA, MatmulTest,
    ::testing::Values(
        Case{1, 1, 1100, 300, false, true, false, 2, BType::BF16, 0, false,
             false, true},
        Case{1, 13, 777, 130, false, true, true, 2, BType::BF16, 0, false,
             false, true},
        Case{1, 131, 513, 40, true, true, true, 3, BType::BF16, 0, false, false,
             true},
        Case{1, 33, 63, 48, false, true, false, 2, BType::BF16, 0, false, false,
             true},
        Case{1, 70, 301, 70, false, false, false, 2, BType::BF16, 0, false,
             false, true},
        Case{4, 9, 40, 17, false, false, true, 1, BType::BF16, 0, false, false,
             true},
        Case{3, 40, 97, 33, true, false, false, 2, BType::BF16, 0, false, false,
             true},
        // Whole tiles of rows and of K (on AMX the tiles read A's rows where
        // they are): a weight, and a batch of activations.
        Case{1, 64, 384, 70, false, true, true, 2, BType::BF16, 0, false, false,
             true},
        Case{3, 32, 64, 48, false, false, false, 2, BType::BF16, 0, false,
             false, true},
        Case{1, 20, 300, 50, true, true, true, 2, BType::BF16, 8, false, false,
             true},
        Case{1, 20, 300, 50, false, true, false, 2, BType::BF16, 4, true, false,
             true},
        Case{1, 5, 1025, 520, false, true, false, 2, BType::BF16, 8, true,
             false, true}));

// A quantized weight's values exactly: each group's largest magnitude is
// qmax times a power of two s, the others halfway between two multiples
// of s (or on one), which must round to nearest with ties to even (and
// 0.5 s to 0) in every packed layout: int8 and int4 panels (f32 A), and
// both with A quantized (integer dot products, on AMX where it is). Row i
// of A is `unit` times row i of the identity (127: A's scale is then 1),
// so C's row i is exactly unit * q(B's row i) * s. B in f32 (quantized in
// place) and bf16 (widened first); K past one group of int4, and a panel
// of columns left partly empty.
TEST(MatmulQuantized, TiesRoundToEvenInEveryLayout) {
  const int64_t K = 300, M = K, N = 40;
  for (int bits : {8, 4})
    for (bool quantizeA : {false, true})
      for (BType bType : {BType::F32, BType::BF16})
        for (int threads : {1, 2}) {
          float qmax = bits == 8 ? 127.0f : 7.0f;
          int64_t group = bits == 8 ? K : 128;
          std::vector<float> halves;
          for (float t : {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 0.25f,
                          0.75f, 0.0f, 1.0f, 63.5f, 64.5f, 125.5f, 126.5f})
            if (t <= qmax)
              halves.push_back(t), halves.push_back(-t);
          // b stored [N, K]: column j's value l at j * K + l.
          std::vector<float> b(size_t(N * K)), expected(size_t(M * N));
          float unit = quantizeA ? 127.0f : 1.0f;
          for (int64_t j = 0; j < N; ++j)
            for (int64_t l = 0; l < K; ++l) {
              float s = std::ldexp(1.0f, -int(j % 5)), t;
              if (l % group == 0)
                t = (j % 2 ? -1.0f : 1.0f) * qmax;
              else
                t = halves[size_t(l * 7 + j * 3) % halves.size()];
              b[size_t(j * K + l)] = t * s;
              expected[size_t(l * N + j)] = unit * std::nearbyint(t) * s;
            }
          std::vector<float> a(size_t(M * K), 0.0f), out(size_t(M * N));
          for (int64_t i = 0; i < M; ++i)
            a[size_t(i * K + i)] = unit;
          Case c{1,     M,       K,     N,    false,    true,
                 false, threads, bType, bits, quantizeA};
          int64_t as[3] = {M * K, K, 1}, bs[3] = {K * N, 1, K};
          int32_t flags =
              TFC_UK_CONSTANT_B |
              (bits == 8 ? TFC_UK_QUANTIZE_I8 : TFC_UK_QUANTIZE_I4) |
              (quantizeA ? TFC_UK_QUANTIZE_A8 : 0);
          omp_set_num_threads(threads);
          std::vector<uint16_t> b16;
          if (bType == BType::F32) {
            call(a, b.data(), out, c, as, bs, flags);
          } else {
            b16 = toBits16(b, bType); // exact: at most 8 significant bits
            call(a, b16.data(), out, c, as, bs, flags);
          }
          tfc_uk_forget_packed_weights();
          int64_t wrong = 0;
          size_t first = 0;
          for (size_t e = out.size(); e-- > 0;)
            if (out[e] != expected[e])
              ++wrong, first = e;
          EXPECT_EQ(wrong, 0) << ::testing::PrintToString(c) << ": C["
                              << first / N << "][" << first % N << "] is "
                              << out[first] << ", expected " << expected[first];
        }
}

// A weight packed where another was before (the allocator hands the
// address back once the first is forgotten): nothing of the first may
// stay in use. On AMX an int4 weight's panels are unpacked per thread and
// product, which must not take an earlier product's for this one's.
TEST(MatmulAmx, NewWeightAtAnOldAddress) {
  for (int bits : {8, 4})
    for (unsigned seed : {1u, 2u, 3u}) {
      Case c{1, 40, 300, 40, false, true, false, 2, BType::F32, bits, true};
      EXPECT_LE(run(c, seed), 1.0) << ::testing::PrintToString(c);
    }
}

// The packed copies a model lists and adopts (abi.h, "Packed weights"):
// a listed copy, adopted again after the kernels forgot theirs, gives the
// same C, and is what they read (zeroed, it makes C zero); a copy of the
// wrong size or kind is refused. For each packed layout: f32 panels, int8
// panels, int8 and int4 integer-dot panels.
TEST(MatmulPackedWeights, AdoptedCopiesAreReadAndChecked) {
  if (std::string(tfc_uk_packed_format()).empty())
    GTEST_SKIP() << "the scalar kernels pack no weights";
  for (auto [bits, quantizeA] :
       {std::pair{0, false}, {8, false}, {8, true}, {4, true}}) {
    Case c{1, 5, 200, 40, false, true, false, 1, BType::F32, bits, quantizeA};
    SCOPED_TRACE(::testing::PrintToString(c));
    std::mt19937 rng(7);
    std::vector<float> a = randomVector(c.m * c.k, rng);
    std::vector<float> b = randomVector(c.k * c.n, rng);
    int64_t as[3] = {c.m * c.k, c.k, 1}, bs[3] = {c.k * c.n, 1, c.k};
    int32_t flags = TFC_UK_CONSTANT_B |
                    (bits == 8   ? TFC_UK_QUANTIZE_I8
                     : bits == 4 ? TFC_UK_QUANTIZE_I4
                                 : 0) |
                    (quantizeA ? TFC_UK_QUANTIZE_A8 : 0);
    tfc_uk_forget_packed_weights();
    std::vector<float> own(size_t(c.m * c.n));
    call(a, b.data(), own, c, as, bs, flags);
    ASSERT_EQ(tfc_uk_packed_weights(nullptr, 0), 1);
    tfc_packed_weight listed;
    ASSERT_EQ(tfc_uk_packed_weights(&listed, 1), 1);
    EXPECT_EQ(listed.source, b.data());
    EXPECT_EQ(listed.k, c.k);
    EXPECT_EQ(listed.n, c.n);
    std::vector<float> copy((listed.bytes + 63) / 4 + 16);
    auto *aligned = reinterpret_cast<char *>(
        (reinterpret_cast<uintptr_t>(copy.data()) + 63) / 64 * 64);
    std::memcpy(aligned, listed.data, listed.bytes);
    tfc_uk_forget_packed_weights();
    EXPECT_EQ(tfc_uk_packed_weights(nullptr, 0), 0);

    tfc_packed_weight w = listed;
    w.data = aligned;
    tfc_packed_weight wrong = w;
    wrong.bytes += 64;
    EXPECT_EQ(tfc_uk_adopt_packed_weight(&wrong), -1);
    wrong = w;
    wrong.kind[1] = 7;
    EXPECT_EQ(tfc_uk_adopt_packed_weight(&wrong), -1);
    EXPECT_EQ(tfc_uk_packed_weights(nullptr, 0), 0);
    ASSERT_EQ(tfc_uk_adopt_packed_weight(&w), 0);
    std::vector<float> adopted(own.size());
    call(a, b.data(), adopted, c, as, bs, flags);
    EXPECT_EQ(adopted, own);
    tfc_packed_weight now;
    ASSERT_EQ(tfc_uk_packed_weights(&now, 1), 1);
    EXPECT_EQ(now.data, static_cast<const void *>(aligned));

    tfc_uk_forget_packed_weights();
    std::memset(aligned, 0, listed.bytes);
    ASSERT_EQ(tfc_uk_adopt_packed_weight(&w), 0);
    call(a, b.data(), adopted, c, as, bs, flags);
    EXPECT_EQ(adopted, std::vector<float>(own.size(), 0.0f));
    tfc_uk_forget_packed_weights();
  }
}

// Whether the matmul runs on AMX: where the kernels were built with it
// (TFC_TEST_KERNELS_HAVE_AMX: the host that built them has it), unless
// TFC_AMX=0 turns it off; nowhere else. ctest runs the cases above both
// ways on such a host.
TEST(MatmulAmx, OnWhereBuiltUnlessTurnedOff) {
#ifdef TFC_TEST_KERNELS_HAVE_AMX
  const char *setting = std::getenv("TFC_AMX");
  bool off = setting && std::string(setting) == "0";
  EXPECT_EQ(tfc_uk_uses_amx(), off ? 0 : 1);
#else
  EXPECT_EQ(tfc_uk_uses_amx(), 0);
#endif
}

} // namespace
