//===- entry.cpp - The matmul entry points of ukernels.h ------------------===//
//
// Each entry describes its product as a Matmul and runs it on the packed
// kernels (gemm.cpp) where C's rows are contiguous, else on the scalar
// reference; an A stored as bf16 is widened first unless the bf16 dot
// products read it.
//
//===----------------------------------------------------------------------===//

#include "matmul/matmul.h"

namespace tfc::uk::matmul {
namespace {

/// The scale of group g of column j of batch element bt of B.
template <BType T>
float groupScale(const Matmul &p, int64_t bt, int64_t j, int64_t g) {
  float top = 0;
  for (int64_t l = g * p.group(); l < std::min(p.k, (g + 1) * p.group()); ++l)
    top = std::max(top, std::fabs(p.bAt<T>(bt, l, j)));
  return top / p.qmax();
}

/// p with A's bf16 bits (aBits) widened to f32 in `storage`, [batch, m, k]
/// in order.
Matmul withF32A(const Matmul &p, std::vector<float> &storage) {
  Matmul q = p;
  int64_t size = p.batch * p.m * p.k;
  storage.resize(size_t(size));
  float *a = storage.data();
#pragma omp parallel for collapse(2) schedule(static) if (size >= (1 << 16))
  for (int64_t bt = 0; bt < p.batch; ++bt)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t l = 0; l < p.k; ++l)
        a[(bt * p.m + i) * p.k + l] =
            bf16Value(p.aBits[bt * p.as[0] + i * p.as[1] + l * p.as[2]]);
  q.a = a;
  q.aBits = nullptr;
  q.as[0] = p.m * p.k;
  q.as[1] = p.k;
  q.as[2] = 1;
  return q;
}

} // namespace

void matmulReference(const Matmul &p) {
  withBType(p.btype, [&](auto type) {
    constexpr BType T = decltype(type)::value;
    if constexpr (T != BType::I8 && T != BType::I4) {
      bool quantize = p.quant != Quant::None;
      // The rows of K summed before scaling: a group of B's or a block of
      // A's (which lies in one group of B's).
      int64_t step = p.quantizeA ? kABlock : quantize ? p.group() : p.k;
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t bt = 0; bt < p.batch; ++bt)
        for (int64_t j = 0; j < p.n; ++j)
          for (int64_t i = 0; i < p.m; ++i) {
            auto aAt = [&](int64_t l) {
              return p.a[bt * p.as[0] + i * p.as[1] + l * p.as[2]];
            };
            float sum = 0;
            for (int64_t l0 = 0; l0 < p.k; l0 += step) {
              int64_t l1 = std::min(p.k, l0 + step);
              float scale =
                  quantize ? groupScale<T>(p, bt, j, l0 / p.group()) : 1.0f;
              if (p.quantizeA) {
                float top = 0;
                for (int64_t l = l0; l < l1; ++l)
                  top = std::max(top, std::fabs(aAt(l)));
                float aScale = top / kAMax;
                int32_t dot = 0;
                for (int64_t l = l0; l < l1; ++l)
                  dot += quantized(aAt(l), aScale, kAMax) *
                         quantized(p.bAt<T>(bt, l, j), scale, p.qmax());
                sum += float(dot) * (aScale * scale);
                continue;
              }
              float acc = 0;
              for (int64_t l = l0; l < l1; ++l) {
                float b = p.bAt<T>(bt, l, j);
                acc += aAt(l) *
                       (quantize ? float(quantized(b, scale, p.qmax())) : b);
              }
              sum += acc * scale;
            }
            float &c = p.c[bt * p.cs[0] + i * p.cs[1] + j * p.cs[2]];
            c = p.accumulate ? c + sum : sum;
          }
    }
  });
}

namespace {

void run(const Matmul &p) {
  if (p.m == 0 || p.n == 0 || p.k == 0 || p.batch == 0)
    return;
#ifdef TFC_UK_VECTOR
  if (p.cs[2] == 1) {
    // Only the bf16 dot products read A's bf16 bits as they are.
    if (p.aBits && !bf16Dot(p)) {
      static thread_local std::vector<float> wide;
      matmulPacked(withF32A(p, wide));
    } else {
      matmulPacked(p);
    }
    return;
  }
#endif
  if (p.aBits) {
    std::vector<float> wide;
    matmulReference(withF32A(p, wide));
    return;
  }
  matmulReference(p);
}

} // namespace
} // namespace tfc::uk::matmul

using namespace tfc::uk::matmul;
using tfc::uk::MemRef;

extern "C" int32_t tfc_uk_uses_amx(void) {
#ifdef TFC_UK_AMX
  return tfc::uk::amx::enabled() ? 1 : 0;
#else
  return 0;
#endif
}

/// The product of memref descriptors a, b, c (rank 2 or 3; rank 2 is a
/// batch of one) with B's elements of type `btype`.
template <int Rank, typename AElement, typename BElement>
void runDescriptors(MemRef<Rank, AElement> *a, MemRef<Rank, BElement> *b,
                    MemRef<Rank> *c, int32_t flags, BType btype) {
  // A of f32, or of bf16 bits (whose values are then bf16 values).
  constexpr bool aBits = std::is_same_v<AElement, uint16_t>;
  constexpr int d = Rank - 2; // the first matrix dimension
  bool constantB = (flags & TFC_UK_CONSTANT_B) != 0;
  Quant quant = !constantB                          ? Quant::None
                : (flags & TFC_UK_QUANTIZE_I8) != 0 ? Quant::I8
                : (flags & TFC_UK_QUANTIZE_I4) != 0 ? Quant::I4
                                                    : Quant::None;
  Matmul p{(flags & TFC_UK_ACCUMULATE) != 0,
           constantB,
           quant,
           quant != Quant::None && (flags & TFC_UK_QUANTIZE_A8) != 0,
           aBits || (flags & TFC_UK_A_BF16) != 0,
           btype,
           Rank == 3 ? c->sizes[0] : 1,
           c->sizes[d],
           c->sizes[d + 1],
           a->sizes[d + 1],
           nullptr,
           b->data(),
           c->data(),
           {},
           {},
           {}};
  if constexpr (aBits)
    p.aBits = a->data();
  else
    p.a = a->data();
  for (int i = 0; i < Rank; ++i) {
    p.as[3 - Rank + i] = a->strides[i];
    p.bs[3 - Rank + i] = b->strides[i];
    p.cs[3 - Rank + i] = c->strides[i];
  }
  run(p);
}

// The entry points of ukernels.h: rank 3 (a batch) or 2, A of f32 or bf16
// and B of f32, f16 or bf16 (16-bit elements as their bits, uint16_t).
#define TFC_MATMUL_ENTRY(NAME, RANK, A_ELEMENT, B_ELEMENT, B_TYPE)             \
  extern "C" void TFC_UK_CIFACE(NAME)(                                         \
      TFC_UK_MATMUL_ARGS(RANK, A_ELEMENT, B_ELEMENT)) {                        \
    runDescriptors(a, b, c, flags, BType::B_TYPE);                             \
  }
TFC_MATMUL_ENTRY(tfc_uk_batch_matmul_f32, 3, float, float, F32)
TFC_MATMUL_ENTRY(tfc_uk_matmul_f32, 2, float, float, F32)
TFC_MATMUL_ENTRY(tfc_uk_batch_matmul_f32_f16, 3, float, uint16_t, F16)
TFC_MATMUL_ENTRY(tfc_uk_matmul_f32_f16, 2, float, uint16_t, F16)
TFC_MATMUL_ENTRY(tfc_uk_batch_matmul_f32_bf16, 3, float, uint16_t, BF16)
TFC_MATMUL_ENTRY(tfc_uk_matmul_f32_bf16, 2, float, uint16_t, BF16)
TFC_MATMUL_ENTRY(tfc_uk_batch_matmul_bf16_bf16, 3, uint16_t, uint16_t, BF16)
TFC_MATMUL_ENTRY(tfc_uk_matmul_bf16_bf16, 2, uint16_t, uint16_t, BF16)
#undef TFC_MATMUL_ENTRY
