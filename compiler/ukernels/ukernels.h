//===- ukernels.h - CPU micro-kernels linked into compiled models -*- C++ -*-//
//
// tfc lowers `transformer.attention`, `transformer.softmax`,
// `transformer.layer_norm` and `transformer.rms_norm` on the CPU to calls
// into these kernels, which
// tfc-compile links into every model library (as IREE links its ukernels).
// They take MLIR memref descriptors (the `llvm.emit_c_interface` convention)
// so that any strided view can be passed without a copy.
//
// This library includes nothing from LLVM or MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UKERNELS_UKERNELS_H
#define TFC_UKERNELS_UKERNELS_H

#include <cstdint>

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

/// Flags of the attention kernels.
enum : int32_t {
  TFC_UK_ATTENTION_MASK = 1, ///< `mask` is read (else ignored)
  /// q, k and v hold bf16 values (bf16 tensors widened to f32): where
  /// AVX-512 BF16 is, query blocks of more than a few rows may run both
  /// products on bf16 dot products (vdpbf16ps): the scores' products exact
  /// with f32 sums, the softmax in f32, its weights rounded to bf16 for the
  /// product with V (as FlashAttention's tensor cores take them).
  TFC_UK_ATTENTION_BF16 = 2,
};

/// out[B,Hq,Sq,Dv] = attention(q[B,Hq,Sq,D], k[B,Hkv,Skv,D], v[B,Hkv,Skv,Dv],
/// mask broadcast to [B,Hq,Sq,Skv] (size-1 dims broadcast), scale, causal,
/// softcap, window): `transformer.attention`. `flags`: TFC_UK_ATTENTION_*;
/// `softcap` <= 0 leaves the scores uncapped; `window` > 0 hides key j from
/// query i when i + Skv - Sq - j >= window (a sliding window), <= 0 none.
void _mlir_ciface_tfc_uk_attention_f32(
    tfc::uk::MemRef<4> *q, tfc::uk::MemRef<4> *k, tfc::uk::MemRef<4> *v,
    tfc::uk::MemRef<4> *mask, tfc::uk::MemRef<4> *out, float scale,
    int32_t flags, int32_t causal, float softcap, int64_t window);

/// The same attention with the keys and values in two parts along the key
/// axis: k = concat(k0, k1), v = concat(v0, v1) (a decoder's cache and its
/// new tokens), read where they are.
void _mlir_ciface_tfc_uk_attention_kv2_f32(
    tfc::uk::MemRef<4> *q, tfc::uk::MemRef<4> *k0, tfc::uk::MemRef<4> *k1,
    tfc::uk::MemRef<4> *v0, tfc::uk::MemRef<4> *v1, tfc::uk::MemRef<4> *mask,
    tfc::uk::MemRef<4> *out, float scale, int32_t flags, int32_t causal,
    float softcap, int64_t window);

/// The same two attentions with K and V of bf16 or f16 values (their bits;
/// q, mask and out f32): what a 16-bit model's attention reads, without
/// widening its keys and values (a decoder's cache) to f32 first.
void _mlir_ciface_tfc_uk_attention_f32_bf16(
    tfc::uk::MemRef<4> *q, tfc::uk::MemRef<4, uint16_t> *k,
    tfc::uk::MemRef<4, uint16_t> *v, tfc::uk::MemRef<4> *mask,
    tfc::uk::MemRef<4> *out, float scale, int32_t flags, int32_t causal,
    float softcap, int64_t window);
void _mlir_ciface_tfc_uk_attention_f32_f16(tfc::uk::MemRef<4> *q,
                                           tfc::uk::MemRef<4, uint16_t> *k,
                                           tfc::uk::MemRef<4, uint16_t> *v,
                                           tfc::uk::MemRef<4> *mask,
                                           tfc::uk::MemRef<4> *out, float scale,
                                           int32_t flags, int32_t causal,
                                           float softcap, int64_t window);
void _mlir_ciface_tfc_uk_attention_kv2_f32_bf16(
    tfc::uk::MemRef<4> *q, tfc::uk::MemRef<4, uint16_t> *k0,
    tfc::uk::MemRef<4, uint16_t> *k1, tfc::uk::MemRef<4, uint16_t> *v0,
    tfc::uk::MemRef<4, uint16_t> *v1, tfc::uk::MemRef<4> *mask,
    tfc::uk::MemRef<4> *out, float scale, int32_t flags, int32_t causal,
    float softcap, int64_t window);
void _mlir_ciface_tfc_uk_attention_kv2_f32_f16(
    tfc::uk::MemRef<4> *q, tfc::uk::MemRef<4, uint16_t> *k0,
    tfc::uk::MemRef<4, uint16_t> *k1, tfc::uk::MemRef<4, uint16_t> *v0,
    tfc::uk::MemRef<4, uint16_t> *v1, tfc::uk::MemRef<4> *mask,
    tfc::uk::MemRef<4> *out, float scale, int32_t flags, int32_t causal,
    float softcap, int64_t window);

/// Q, K, V and the output stored as bf16 (a bf16 model's attention):
/// TFC_UK_ATTENTION_BF16 holds without the flag, and the output is the
/// f32 result rounded to bf16 (to nearest, ties to even). Query blocks on
/// bf16 products read Q and write the output as they are; the other paths
/// run the _f32_bf16 entries on Q widened and round their output.
void _mlir_ciface_tfc_uk_attention_bf16(
    tfc::uk::MemRef<4, uint16_t> *q, tfc::uk::MemRef<4, uint16_t> *k,
    tfc::uk::MemRef<4, uint16_t> *v, tfc::uk::MemRef<4> *mask,
    tfc::uk::MemRef<4, uint16_t> *out, float scale, int32_t flags,
    int32_t causal, float softcap, int64_t window);
void _mlir_ciface_tfc_uk_attention_kv2_bf16(
    tfc::uk::MemRef<4, uint16_t> *q, tfc::uk::MemRef<4, uint16_t> *k0,
    tfc::uk::MemRef<4, uint16_t> *k1, tfc::uk::MemRef<4, uint16_t> *v0,
    tfc::uk::MemRef<4, uint16_t> *v1, tfc::uk::MemRef<4> *mask,
    tfc::uk::MemRef<4, uint16_t> *out, float scale, int32_t flags,
    int32_t causal, float softcap, int64_t window);

/// Flags of the matmul kernels.
enum : int32_t {
  TFC_UK_ACCUMULATE = 1, ///< c += a . b (else c = a . b)
  TFC_UK_CONSTANT_B = 2, ///< b is a weight: packed once, on first use
  /// With TFC_UK_CONSTANT_B: b is quantized to int8 as it is packed, with a
  /// scale per column (symmetric: max|column| / 127, values rounded to
  /// nearest, ties to even), and the product uses those values:
  /// c (+)= (a . q) * scale. A weight-only quantization: a and c stay f32.
  TFC_UK_QUANTIZE_I8 = 4,
  /// With TFC_UK_CONSTANT_B: b quantized to int4 as it is packed, in groups
  /// of 128 rows of a column (the last one shorter), each with its own
  /// scale max|group| / 7 and values rounded to nearest (ties to even) in
  /// [-7, 7]; c (+)= sum over groups of (a . q) * scale.
  TFC_UK_QUANTIZE_I4 = 8,
  /// With TFC_UK_QUANTIZE_I8 or _I4: a is quantized too, each row in blocks
  /// of 128 values of K (the last one shorter), each with its own scale
  /// max|block| / 127 and values rounded to nearest (ties to even) in
  /// [-127, 127], and the products are integer sums: c (+)= the sum over
  /// blocks g, in order, of float(qa_g . qb_g) * (scale_a_g * scale_b),
  /// where qa_g . qb_g is exact and scale_b the scale of b's values in
  /// block g (of the column, or of its group of 128 rows for int4).
  TFC_UK_QUANTIZE_A8 = 16,
  /// a's values are bf16 values (a bf16 tensor widened to f32): with a
  /// bf16 b, unquantized, the kernel may multiply them as bf16 pairs
  /// (AVX-512 BF16's vdpbf16ps: the products exact, the sums f32 in
  /// another order, subnormal inputs and sums flushed to zero).
  TFC_UK_A_BF16 = 32,
};

/// c[b] (+)= a[b] . b[b] for a [B,M,K], b [B,K,N], c [B,M,N]; any strides
/// (a transposed view of b reads along K).
void _mlir_ciface_tfc_uk_batch_matmul_f32(tfc::uk::MemRef<3> *a,
                                          tfc::uk::MemRef<3> *b,
                                          tfc::uk::MemRef<3> *c, int32_t flags);
/// c (+)= a . b for a [M,K], b [K,N], c [M,N].
void _mlir_ciface_tfc_uk_matmul_f32(tfc::uk::MemRef<2> *a,
                                    tfc::uk::MemRef<2> *b,
                                    tfc::uk::MemRef<2> *c, int32_t flags);

/// The same products with b in f16 or bf16 (a weight of a model computing
/// in that type): packed in 16-bit panels (once for a constant b), widened
/// to f32 as the kernel loads them; the products and sums are those of an
/// f32 b holding the same values.
void _mlir_ciface_tfc_uk_batch_matmul_f32_f16(tfc::uk::MemRef<3> *a,
                                              tfc::uk::MemRef<3, uint16_t> *b,
                                              tfc::uk::MemRef<3> *c,
                                              int32_t flags);
void _mlir_ciface_tfc_uk_batch_matmul_f32_bf16(tfc::uk::MemRef<3> *a,
                                               tfc::uk::MemRef<3, uint16_t> *b,
                                               tfc::uk::MemRef<3> *c,
                                               int32_t flags);
void _mlir_ciface_tfc_uk_matmul_f32_f16(tfc::uk::MemRef<2> *a,
                                        tfc::uk::MemRef<2, uint16_t> *b,
                                        tfc::uk::MemRef<2> *c, int32_t flags);
void _mlir_ciface_tfc_uk_matmul_f32_bf16(tfc::uk::MemRef<2> *a,
                                         tfc::uk::MemRef<2, uint16_t> *b,
                                         tfc::uk::MemRef<2> *c, int32_t flags);

/// A stored as bf16 (its bits) times a bf16 B: TFC_UK_A_BF16 holds without
/// the flag. The bf16 dot products read A as it is; every other way of
/// computing the product (a quantized B, no bf16 dot products, a strided C)
/// widens it to f32 first.
void _mlir_ciface_tfc_uk_batch_matmul_bf16_bf16(tfc::uk::MemRef<3, uint16_t> *a,
                                                tfc::uk::MemRef<3, uint16_t> *b,
                                                tfc::uk::MemRef<3> *c,
                                                int32_t flags);
void _mlir_ciface_tfc_uk_matmul_bf16_bf16(tfc::uk::MemRef<2, uint16_t> *a,
                                          tfc::uk::MemRef<2, uint16_t> *b,
                                          tfc::uk::MemRef<2> *c, int32_t flags);

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
void _mlir_ciface_tfc_uk_softmax_f32(tfc::uk::MemRef<2> *in,
                                     tfc::uk::MemRef<2> *out);

/// Layer normalisation along the last dimension of a [rows, n] view.
void _mlir_ciface_tfc_uk_layer_norm_f32(tfc::uk::MemRef<2> *in,
                                        tfc::uk::MemRef<1> *gamma,
                                        tfc::uk::MemRef<1> *beta,
                                        tfc::uk::MemRef<2> *out, float epsilon);
/// ... of bf16 values, with bf16 gamma and beta, computed in f32 as the f32
/// kernel does and rounded to bf16 (to nearest, ties to even).
void _mlir_ciface_tfc_uk_layer_norm_bf16(tfc::uk::MemRef<2, uint16_t> *in,
                                         tfc::uk::MemRef<1, uint16_t> *gamma,
                                         tfc::uk::MemRef<1, uint16_t> *beta,
                                         tfc::uk::MemRef<2, uint16_t> *out,
                                         float epsilon);

/// RMS normalisation along the last dimension of a [rows, n] view:
/// x * rsqrt(mean(x * x) + epsilon) * gamma.
void _mlir_ciface_tfc_uk_rms_norm_f32(tfc::uk::MemRef<2> *in,
                                      tfc::uk::MemRef<1> *gamma,
                                      tfc::uk::MemRef<2> *out, float epsilon);
}

#endif // TFC_UKERNELS_UKERNELS_H
