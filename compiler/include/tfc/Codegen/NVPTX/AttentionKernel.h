//===- AttentionKernel.h - Flash-attention GPU kernels ----------*- C++ -*-===//
//
// Builds the gpu.func of one fused attention, specialised to its static
// shapes, element type and options.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_CODEGEN_NVPTX_ATTENTIONKERNEL_H
#define TFC_CODEGEN_NVPTX_ATTENTIONKERNEL_H

#include "tfc/Codegen/NVPTX/KernelLaunch.h"

namespace tfc {

struct AttentionShape {
  int64_t batch, headsQ, headsKV, seqQ, seqKV, headDim, valueDim;
  /// Mask dimensions (each 1 or full) when the op has a mask, else empty.
  llvm::SmallVector<int64_t, 4> mask;
  bool causal = false;
  double scale = 1.0;
  /// > 0: the scaled scores are capped, softcap * tanh(s / softcap).
  double softcap = 0;
  /// > 0 (and < seqKV): a sliding window, key j hidden from query i when
  /// i + seqKV - seqQ - j >= window; blocks skip the key tiles below the
  /// window of their first row.
  int64_t window = 0;
  /// f16/bf16: fragments of K and V by ldmatrix (V staged row-major and
  /// loaded transposed) instead of 4-byte shared loads of a transposed V.
  bool ldmatrix = false;
  /// f16/bf16 with head dimensions that are multiples of 8: K and V tiles
  /// go from global to shared memory by cp.async, double-buffered (no
  /// staging in registers); fragments by ldmatrix. Other shapes ignore it.
  bool asyncCopy = false;
  /// f16/bf16: query rows per warp, 16 (blocks of 64 rows) or 32 (blocks
  /// of 128: each K and V fragment read from shared memory serves two
  /// mma.sync instead of one, at the price of twice the accumulators).
  int64_t warpRows = 16;
  /// f16/bf16 with head dimensions that are multiples of 8, sm_90a only:
  /// the async-copy kernel with Q·Kᵀ and P·V on wgmma (the block's 4 warps
  /// are one warpgroup; K and V tiles in core-matrix layout) instead of
  /// mma.sync. Other shapes ignore it.
  bool wgmma = false;
  /// wgmma: warpgroups per block, 1 (64 query rows) or 2 (128 rows: each K
  /// and V tile copied once serves both).
  int64_t wgmmaWarpgroups = 1;
  /// wgmma: K and V tiles by TMA (one thread issues each tile's copies,
  /// completion on mbarriers; 128-byte swizzled rows) instead of cp.async.
  /// The launch then takes tensor maps of K and V.
  bool tma = false;
  /// TMA with two warpgroups: a third warpgroup of the block is the
  /// producer (FlashAttention-3's warp specialisation): one of its threads
  /// issues every copy, the others exit, and its registers (setmaxnreg:
  /// 24 per thread) go to the two consumer warpgroups (240 each). Other
  /// builds ignore it.
  bool tmaProducer = false;
  mlir::Type elementType; // f32, f16 or bf16
  /// The shape takes the decode kernel (DecodeKernel.h) instead.
  bool decode = false;
  /// Decode kernel: when not 0, K and V come in two buffers each along the
  /// key axis, the first holding keys [0, keySplit) (a decoder's cache) and
  /// the second the others (its new tokens'), read where they are; the
  /// inputs are then q, k0, k1, v0, v1[, mask].
  int64_t keySplit = 0;
  /// Decode kernel: the blocks its chunks of keys aim at, per SM of an
  /// H200 (132 SMs), and the cp.async stages each block copies its K and V
  /// tiles into (2: the next tile in flight while one is computed).
  int64_t decodeBlocksPerSM = 4, decodeStages = 2;
  /// Decode kernel, f16/bf16 with D and Dv multiples of 16: Q·Kᵀ and P·V on
  /// tensor cores (mma.sync, the query rows as M) instead of CUDA cores.
  bool decodeMma = false;
};

/// What kernels that pre-scale Q multiply it by: scale * log2(e), which
/// leaves the dot products as scores in base 2; with a soft cap, scale /
/// softcap, which leaves them as the cap's tanh argument u (the score in
/// base 2 is then softcap * log2(e) * tanh(u)).
double queryFactor(const AttentionShape &s);

/// The memref types of q, k, v[, mask] and of the output of `shape`.
llvm::SmallVector<mlir::Type, 4> attentionInputTypes(const AttentionShape &s);
mlir::MemRefType attentionOutputType(const AttentionShape &s);

/// Whether the kernel for `shape` fits in a block's shared memory (static:
/// head dimensions up to about 330 in f16/bf16; the async-copy variant's
/// two stages may take up to 100 KiB of dynamic shared memory).
bool attentionKernelFits(const AttentionShape &shape);

/// Appends a kernel to `module`: arguments q, k, v, [mask,] out as memrefs
/// of the static shapes in `shape`. f16 and bf16 run on tensor cores
/// (mma.sync m16n8k16, f32 accumulation); f32 uses FMA in registers.
KernelLaunch buildAttentionKernel(mlir::OpBuilder &builder,
                                  mlir::gpu::GPUModuleOp module,
                                  llvm::StringRef name,
                                  const AttentionShape &shape);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_ATTENTIONKERNEL_H
