//===- Gemv.h - Matmul kernels for few rows of A ----------------*- C++ -*-===//

#ifndef TFC_CODEGEN_NVPTX_GEMV_H
#define TFC_CODEGEN_NVPTX_GEMV_H

#include "GemmKernel.h"

namespace tfc {

/// Whether the GEMV kernel takes the matmul: few rows of A, and its
/// narrower column blocks within the grid's 2^31 - 1 blocks.
bool useGemv(const GemmShape &s);

/// How the GEMV kernel covers C: given B as [N, K], 16 columns of C per
/// block (4 per warp); as [K, N], kGemvChunks chunks of columns per block.
GemmTiling gemvTiling(const GemmShape &s);

/// C (+)= A·B for few rows of A (per batch: useGemv), f32 accumulation
/// for every type: f16/bf16 with B given as [N, K] on tensor cores, else
/// by FMA. B given as [N, K] (a weight as stored):
/// each warp takes 4 rows of it, its lanes walking K in 16-byte chunks
/// (a warp reads 512 contiguous bytes of each row per step, with the same
/// chunk of every row of A), then a butterfly of shuffles sums each
/// column over the lanes. B as [K, N]: thread t takes chunk t % 2 of the
/// block's columns in rows t / 2, + 64, ... of B (kGemvUnroll of them per
/// step; a warp reads 16 rows of 32 bytes), multiplied by A's element of
/// that row; the 16 row groups of a warp combine by shuffles, the 4 warps
/// through shared memory.
mlir::gpu::GPUFuncOp buildGemvKernel(mlir::OpBuilder &builder,
                                     mlir::gpu::GPUModuleOp module,
                                     llvm::StringRef name, const GemmShape &s,
                                     mlir::TypeRange args);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_GEMV_H
