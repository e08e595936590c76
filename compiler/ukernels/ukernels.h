//===- ukernels.h - CPU micro-kernels linked into compiled models -*- C++ -*-//
//
// tfc lowers `transformer.attention`, `transformer.softmax`,
// `transformer.layer_norm` and `transformer.rms_norm` on the CPU to calls
// into these kernels, which
// tfc-compile links into every model library (as IREE links its ukernels).
// They take MLIR memref descriptors (the `llvm.emit_c_interface` convention)
// so that any strided view can be passed without a copy. Their names and
// flags, which the compiler shares, are in tfc/ukernels/symbols.h.
//
// This library includes nothing from LLVM or MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UKERNELS_UKERNELS_H
#define TFC_UKERNELS_UKERNELS_H

#include "tfc/ukernels/symbols.h"

#include <cstdint>
#include <type_traits>

namespace tfc::uk {

/// The layout of a ranked MLIR memref descriptor (f16 and bf16 elements
/// as their uint16_t bits).
template <int Rank, typename T = float> struct MemRef {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];

  T *data() const { return aligned + offset; }
};

} // namespace tfc::uk

extern "C" {
struct tfc_packed_weight; // abi.h

/// The arguments of the attention kernels (Q and the output of element QO,
/// K and V of element KV: float, or uint16_t for the bits of bf16 or f16):
/// out[B,Hq,Sq,Dv] = attention(q[B,Hq,Sq,D], k[B,Hkv,Skv,D], v[B,Hkv,Skv,Dv],
/// mask broadcast to [B,Hq,Sq,Skv] (size-1 dims broadcast), scale, causal,
/// softcap, window): `transformer.attention`. `flags`: TFC_UK_ATTENTION_*
/// (symbols.h); `softcap` <= 0 leaves the scores uncapped; `window` > 0
/// hides key j from query i when i + Skv - Sq - j >= window (a sliding
/// window), <= 0 none.
#define TFC_UK_ATTENTION_ARGS(QO, KV)                                          \
  tfc::uk::MemRef<4, QO> *q, tfc::uk::MemRef<4, KV> *k,                        \
      tfc::uk::MemRef<4, KV> *v, tfc::uk::MemRef<4> *mask,                     \
      tfc::uk::MemRef<4, QO> *out, float scale, int32_t flags, int32_t causal, \
      float softcap, int64_t window
/// ... of their kv2 forms: the keys and values in two parts along the key
/// axis, k = concat(k0, k1), v = concat(v0, v1) (a decoder's cache and its
/// new tokens), read where they are.
#define TFC_UK_ATTENTION_KV2_ARGS(QO, KV)                                      \
  tfc::uk::MemRef<4, QO> *q, tfc::uk::MemRef<4, KV> *k0,                       \
      tfc::uk::MemRef<4, KV> *k1, tfc::uk::MemRef<4, KV> *v0,                  \
      tfc::uk::MemRef<4, KV> *v1, tfc::uk::MemRef<4> *mask,                    \
      tfc::uk::MemRef<4, QO> *out, float scale, int32_t flags, int32_t causal, \
      float softcap, int64_t window
#define TFC_UK_DECLARE_ATTENTION(function, QO, KV)                             \
  void TFC_UK_CIFACE(function)(TFC_UK_ATTENTION_ARGS(QO, KV));
#define TFC_UK_DECLARE_ATTENTION_KV2(function, QO, KV)                         \
  void TFC_UK_CIFACE(function)(TFC_UK_ATTENTION_KV2_ARGS(QO, KV));

/// Q, K, V and the output of f32.
TFC_UK_DECLARE_ATTENTION(tfc_uk_attention_f32, float, float)
TFC_UK_DECLARE_ATTENTION_KV2(tfc_uk_attention_kv2_f32, float, float)

/// K and V of bf16 or f16 values (their bits; q, mask and out f32): what a
/// 16-bit model's attention reads, without widening its keys and values (a
/// decoder's cache) to f32 first.
TFC_UK_DECLARE_ATTENTION(tfc_uk_attention_f32_bf16, float, uint16_t)
TFC_UK_DECLARE_ATTENTION(tfc_uk_attention_f32_f16, float, uint16_t)
TFC_UK_DECLARE_ATTENTION_KV2(tfc_uk_attention_kv2_f32_bf16, float, uint16_t)
TFC_UK_DECLARE_ATTENTION_KV2(tfc_uk_attention_kv2_f32_f16, float, uint16_t)

/// Q, K, V and the output stored as bf16 (a bf16 model's attention):
/// TFC_UK_ATTENTION_BF16 holds without the flag, and the output is the
/// f32 result rounded to bf16 (to nearest, ties to even). Query blocks on
/// bf16 products read Q and write the output as they are; the other paths
/// run the _f32_bf16 entries on Q widened and round their output.
TFC_UK_DECLARE_ATTENTION(tfc_uk_attention_bf16, uint16_t, uint16_t)
TFC_UK_DECLARE_ATTENTION_KV2(tfc_uk_attention_kv2_bf16, uint16_t, uint16_t)

/// The arguments of the matmul kernels, of rank 3 (c[b] (+)= a[b] . b[b]
/// for a [B,M,K], b [B,K,N], c [B,M,N]) or 2 (c (+)= a . b for a [M,K],
/// b [K,N], c [M,N]); any strides (a transposed view of b reads along K).
/// `flags`: TFC_UK_ACCUMULATE, TFC_UK_CONSTANT_B, TFC_UK_QUANTIZE_*,
/// TFC_UK_A_BF16 (symbols.h).
#define TFC_UK_MATMUL_ARGS(RANK, A, B)                                         \
  tfc::uk::MemRef<RANK, A> *a, tfc::uk::MemRef<RANK, B> *b,                    \
      tfc::uk::MemRef<RANK> *c, int32_t flags
#define TFC_UK_DECLARE_MATMUL(function, RANK, A, B)                            \
  void TFC_UK_CIFACE(function)(TFC_UK_MATMUL_ARGS(RANK, A, B));

TFC_UK_DECLARE_MATMUL(tfc_uk_batch_matmul_f32, 3, float, float)
TFC_UK_DECLARE_MATMUL(tfc_uk_matmul_f32, 2, float, float)

/// The same products with b in f16 or bf16 (a weight of a model computing
/// in that type): packed in 16-bit panels (once for a constant b), widened
/// to f32 as the kernel loads them; the products and sums are those of an
/// f32 b holding the same values.
TFC_UK_DECLARE_MATMUL(tfc_uk_batch_matmul_f32_f16, 3, float, uint16_t)
TFC_UK_DECLARE_MATMUL(tfc_uk_batch_matmul_f32_bf16, 3, float, uint16_t)
TFC_UK_DECLARE_MATMUL(tfc_uk_matmul_f32_f16, 2, float, uint16_t)
TFC_UK_DECLARE_MATMUL(tfc_uk_matmul_f32_bf16, 2, float, uint16_t)

/// A stored as bf16 (its bits) times a bf16 B: TFC_UK_A_BF16 holds without
/// the flag. The bf16 dot products read A as it is; every other way of
/// computing the product (a quantized B, no bf16 dot products, a strided C)
/// widens it to f32 first.
TFC_UK_DECLARE_MATMUL(tfc_uk_batch_matmul_bf16_bf16, 3, uint16_t, uint16_t)
TFC_UK_DECLARE_MATMUL(tfc_uk_matmul_bf16_bf16, 2, uint16_t, uint16_t)

/// Drops the packed copies of constant B operands; the model's
/// tfc_model_weights_changed calls it when the runtime binds new weights.
void tfc_uk_forget_packed_weights(void);

/// The packed copies of constant B operands, for a model's
/// tfc_model_packed_format, tfc_model_packed_weights and
/// tfc_model_adopt_packed_weight (abi.h, "Packed weights").
const char *tfc_uk_packed_format(void);
int32_t tfc_uk_packed_weights(tfc_packed_weight *out, int32_t capacity);
int32_t tfc_uk_adopt_packed_weight(const tfc_packed_weight *weight);

/// 1 when this process's matmuls run their bf16 dot products and int8
/// weights times int8 activations on AMX tiles (kernels built with AMX, a
/// CPU with it, Linux's permission granted, TFC_AMX not 0), else 0.
int32_t tfc_uk_uses_amx(void);

/// Softmax along the last dimension of a [rows, n] view.
void TFC_UK_CIFACE(tfc_uk_softmax_f32)(tfc::uk::MemRef<2> *in,
                                       tfc::uk::MemRef<2> *out);

/// Layer normalisation along the last dimension of a [rows, n] view.
void TFC_UK_CIFACE(tfc_uk_layer_norm_f32)(tfc::uk::MemRef<2> *in,
                                          tfc::uk::MemRef<1> *gamma,
                                          tfc::uk::MemRef<1> *beta,
                                          tfc::uk::MemRef<2> *out,
                                          float epsilon);
/// ... of bf16 values, with bf16 gamma and beta, computed in f32 as the f32
/// kernel does and rounded to bf16 (to nearest, ties to even).
void TFC_UK_CIFACE(tfc_uk_layer_norm_bf16)(tfc::uk::MemRef<2, uint16_t> *in,
                                           tfc::uk::MemRef<1, uint16_t> *gamma,
                                           tfc::uk::MemRef<1, uint16_t> *beta,
                                           tfc::uk::MemRef<2, uint16_t> *out,
                                           float epsilon);

/// RMS normalisation along the last dimension of a [rows, n] view:
/// x * rsqrt(mean(x * x) + epsilon) * gamma.
void TFC_UK_CIFACE(tfc_uk_rms_norm_f32)(tfc::uk::MemRef<2> *in,
                                        tfc::uk::MemRef<1> *gamma,
                                        tfc::uk::MemRef<2> *out, float epsilon);
}

namespace tfc::uk {
/// Whether the C strings a and b are equal.
constexpr bool sameName(const char *a, const char *b) {
  return *a == *b && (*a == '\0' || sameName(a + 1, b + 1));
}
} // namespace tfc::uk

// Every kernel of symbols.h is declared above, under the name the compiler
// calls.
#define TFC_UK_CHECK_NAME(ID, function)                                        \
  static_assert(tfc::uk::sameName(TFC_UK_##ID##_NAME, #function),              \
                "TFC_UK_" #ID "_NAME is not \"" #function "\"");
#define TFC_UK_CHECK_MEMREF(ID, function)                                      \
  static_assert(std::is_function_v<decltype(TFC_UK_CIFACE(function))>);
#define TFC_UK_CHECK_PLAIN(ID, function)                                       \
  static_assert(std::is_function_v<decltype(function)>);
TFC_UK_KERNELS(TFC_UK_CHECK_NAME)
TFC_UK_MEMREF_KERNELS(TFC_UK_CHECK_MEMREF)
TFC_UK_PLAIN_KERNELS(TFC_UK_CHECK_PLAIN)
#undef TFC_UK_CHECK_NAME
#undef TFC_UK_CHECK_MEMREF
#undef TFC_UK_CHECK_PLAIN

#endif // TFC_UKERNELS_UKERNELS_H
