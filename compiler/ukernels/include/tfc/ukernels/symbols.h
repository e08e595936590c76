//===- symbols.h - Micro-kernel symbols and flags shared with tfc -*- C -*-===//
//
// The contract between the code tfc generates and the CPU micro-kernels
// (compiler/ukernels): the name of every kernel the compiler calls and
// every flag it passes them. The compiler takes the names as string
// literals (TFC_UK_<KERNEL>_NAME); ukernels.h declares the kernels through
// the same lists and checks each name against its function, so that a
// kernel renamed on one side no longer builds on the other.
//
// Plain C: included by C++ on both sides, by C where a runtime needs it.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_UKERNELS_SYMBOLS_H
#define TFC_UKERNELS_SYMBOLS_H

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

// The kernels that take MLIR memref descriptors, as X(ID, function): the
// compiler declares `function` with `llvm.emit_c_interface` and calls it by
// TFC_UK_<ID>_NAME; its C interface, which the kernels define, is
// TFC_UK_CIFACE(function).

/// transformer.attention: f32 Q and output with K and V of f32, bf16 or f16
/// (_f32_bf16, _f32_f16), or all of them bf16 (_bf16); the kv2 forms take K
/// and V in two parts along the key axis.
#define TFC_UK_ATTENTION_KERNELS(X)                                            \
  X(ATTENTION_F32, tfc_uk_attention_f32)                                       \
  X(ATTENTION_F32_BF16, tfc_uk_attention_f32_bf16)                             \
  X(ATTENTION_F32_F16, tfc_uk_attention_f32_f16)                               \
  X(ATTENTION_BF16, tfc_uk_attention_bf16)                                     \
  X(ATTENTION_KV2_F32, tfc_uk_attention_kv2_f32)                               \
  X(ATTENTION_KV2_F32_BF16, tfc_uk_attention_kv2_f32_bf16)                     \
  X(ATTENTION_KV2_F32_F16, tfc_uk_attention_kv2_f32_f16)                       \
  X(ATTENTION_KV2_BF16, tfc_uk_attention_kv2_bf16)

/// linalg.matmul (rank 2) and linalg.batch_matmul (rank 3) with an f32
/// result: A of f32 times B of f32, f16 or bf16, or both bf16 (_bf16_bf16).
#define TFC_UK_MATMUL_KERNELS(X)                                               \
  X(MATMUL_F32, tfc_uk_matmul_f32)                                             \
  X(MATMUL_F32_F16, tfc_uk_matmul_f32_f16)                                     \
  X(MATMUL_F32_BF16, tfc_uk_matmul_f32_bf16)                                   \
  X(MATMUL_BF16_BF16, tfc_uk_matmul_bf16_bf16)                                 \
  X(BATCH_MATMUL_F32, tfc_uk_batch_matmul_f32)                                 \
  X(BATCH_MATMUL_F32_F16, tfc_uk_batch_matmul_f32_f16)                         \
  X(BATCH_MATMUL_F32_BF16, tfc_uk_batch_matmul_f32_bf16)                       \
  X(BATCH_MATMUL_BF16_BF16, tfc_uk_batch_matmul_bf16_bf16)

/// transformer.softmax, .layer_norm and .rms_norm along the last dimension.
#define TFC_UK_ROW_KERNELS(X)                                                  \
  X(SOFTMAX_F32, tfc_uk_softmax_f32)                                           \
  X(LAYER_NORM_F32, tfc_uk_layer_norm_f32)                                     \
  X(LAYER_NORM_BF16, tfc_uk_layer_norm_bf16)                                   \
  X(RMS_NORM_F32, tfc_uk_rms_norm_f32)

#define TFC_UK_MEMREF_KERNELS(X)                                               \
  TFC_UK_ATTENTION_KERNELS(X)                                                  \
  TFC_UK_MATMUL_KERNELS(X)                                                     \
  TFC_UK_ROW_KERNELS(X)

/// The plain C functions of the packed weights' cache, as X(ID, function):
/// the model library's tfc_model_weights_changed, tfc_model_packed_format,
/// tfc_model_packed_weights and tfc_model_adopt_packed_weight (abi.h)
/// forward to the first four; the last says whether the matmuls run on AMX.
#define TFC_UK_PLAIN_KERNELS(X)                                                \
  X(FORGET_PACKED_WEIGHTS, tfc_uk_forget_packed_weights)                       \
  X(PACKED_FORMAT, tfc_uk_packed_format)                                       \
  X(PACKED_WEIGHTS, tfc_uk_packed_weights)                                     \
  X(ADOPT_PACKED_WEIGHT, tfc_uk_adopt_packed_weight)                           \
  X(USES_AMX, tfc_uk_uses_amx)

/// Every kernel symbol.
#define TFC_UK_KERNELS(X)                                                      \
  TFC_UK_MEMREF_KERNELS(X)                                                     \
  TFC_UK_PLAIN_KERNELS(X)

/// The C interface of memref kernel `function` (MLIR's
/// `llvm.emit_c_interface`): the symbol the kernels define.
#define TFC_UK_CIFACE(function) TFC_UK_CIFACE_(function)
#define TFC_UK_CIFACE_(function) _mlir_ciface_##function

// The names the compiler calls: TFC_UK_<ID>_NAME is "function" of X(ID,
// function) above.
#define TFC_UK_ATTENTION_F32_NAME "tfc_uk_attention_f32"
#define TFC_UK_ATTENTION_F32_BF16_NAME "tfc_uk_attention_f32_bf16"
#define TFC_UK_ATTENTION_F32_F16_NAME "tfc_uk_attention_f32_f16"
#define TFC_UK_ATTENTION_BF16_NAME "tfc_uk_attention_bf16"
#define TFC_UK_ATTENTION_KV2_F32_NAME "tfc_uk_attention_kv2_f32"
#define TFC_UK_ATTENTION_KV2_F32_BF16_NAME "tfc_uk_attention_kv2_f32_bf16"
#define TFC_UK_ATTENTION_KV2_F32_F16_NAME "tfc_uk_attention_kv2_f32_f16"
#define TFC_UK_ATTENTION_KV2_BF16_NAME "tfc_uk_attention_kv2_bf16"
#define TFC_UK_MATMUL_F32_NAME "tfc_uk_matmul_f32"
#define TFC_UK_MATMUL_F32_F16_NAME "tfc_uk_matmul_f32_f16"
#define TFC_UK_MATMUL_F32_BF16_NAME "tfc_uk_matmul_f32_bf16"
#define TFC_UK_MATMUL_BF16_BF16_NAME "tfc_uk_matmul_bf16_bf16"
#define TFC_UK_BATCH_MATMUL_F32_NAME "tfc_uk_batch_matmul_f32"
#define TFC_UK_BATCH_MATMUL_F32_F16_NAME "tfc_uk_batch_matmul_f32_f16"
#define TFC_UK_BATCH_MATMUL_F32_BF16_NAME "tfc_uk_batch_matmul_f32_bf16"
#define TFC_UK_BATCH_MATMUL_BF16_BF16_NAME "tfc_uk_batch_matmul_bf16_bf16"
#define TFC_UK_SOFTMAX_F32_NAME "tfc_uk_softmax_f32"
#define TFC_UK_LAYER_NORM_F32_NAME "tfc_uk_layer_norm_f32"
#define TFC_UK_LAYER_NORM_BF16_NAME "tfc_uk_layer_norm_bf16"
#define TFC_UK_RMS_NORM_F32_NAME "tfc_uk_rms_norm_f32"
#define TFC_UK_FORGET_PACKED_WEIGHTS_NAME "tfc_uk_forget_packed_weights"
#define TFC_UK_PACKED_FORMAT_NAME "tfc_uk_packed_format"
#define TFC_UK_PACKED_WEIGHTS_NAME "tfc_uk_packed_weights"
#define TFC_UK_ADOPT_PACKED_WEIGHT_NAME "tfc_uk_adopt_packed_weight"
#define TFC_UK_USES_AMX_NAME "tfc_uk_uses_amx"

//===----------------------------------------------------------------------===//
// Flags
//===----------------------------------------------------------------------===//

// The `flags` argument of the attention kernels.

/// `mask` is read (else ignored).
#define TFC_UK_ATTENTION_MASK 1
/// q, k and v hold bf16 values (bf16 tensors widened to f32): where
/// AVX-512 BF16 is, query blocks of more than a few rows may run both
/// products on bf16 dot products (vdpbf16ps): the scores' products exact
/// with f32 sums, the softmax in f32, its weights rounded to bf16 for the
/// product with V (as FlashAttention's tensor cores take them).
#define TFC_UK_ATTENTION_BF16 2

// The `flags` argument of the matmul kernels.

/// c += a . b (else c = a . b).
#define TFC_UK_ACCUMULATE 1
/// b is a weight: packed once, on first use.
#define TFC_UK_CONSTANT_B 2
/// With TFC_UK_CONSTANT_B: b is quantized to int8 as it is packed, with a
/// scale per column (symmetric: max|column| / 127, values rounded to
/// nearest, ties to even), and the product uses those values:
/// c (+)= (a . q) * scale. A weight-only quantization: a and c stay f32.
#define TFC_UK_QUANTIZE_I8 4
/// With TFC_UK_CONSTANT_B: b quantized to int4 as it is packed, in groups
/// of TFC_UK_QUANTIZE_BLOCK rows of a column (the last one shorter), each
/// with its own scale max|group| / 7 and values rounded to nearest (ties to
/// even) in [-7, 7]; c (+)= sum over groups of (a . q) * scale.
#define TFC_UK_QUANTIZE_I4 8
/// With TFC_UK_QUANTIZE_I8 or _I4: a is quantized too, each row in blocks
/// of TFC_UK_QUANTIZE_BLOCK values of K (the last one shorter), each with
/// its own scale max|block| / 127 and values rounded to nearest (ties to
/// even) in [-127, 127], and the products are integer sums: c (+)= the sum
/// over blocks g, in order, of float(qa_g . qb_g) * (scale_a_g * scale_b),
/// where qa_g . qb_g is exact and scale_b the scale of b's values in
/// block g (of the column, or of its group of rows for int4).
#define TFC_UK_QUANTIZE_A8 16
/// a's values are bf16 values (a bf16 tensor widened to f32): with a
/// bf16 b, unquantized, the kernel may multiply them as bf16 pairs
/// (AVX-512 BF16's vdpbf16ps: the products exact, the sums f32 in
/// another order, subnormal inputs and sums flushed to zero).
#define TFC_UK_A_BF16 32

/// Rows of an int4 weight's quantization groups and values of K per block
/// of a quantized a (TFC_UK_QUANTIZE_I4, TFC_UK_QUANTIZE_A8).
#define TFC_UK_QUANTIZE_BLOCK 128

#endif // TFC_UKERNELS_SYMBOLS_H
