//===- GemmKernel.h - What the GEMM and GEMV kernels share ------*- C++ -*-===//

#ifndef TFC_CODEGEN_NVPTX_GEMMKERNEL_H
#define TFC_CODEGEN_NVPTX_GEMMKERNEL_H

#include "KernelBuilder.h"
#include "tfc/Codegen/NVPTX/Gemm.h"

namespace tfc {

/// How a GEMM kernel covers C: a tileM x tileN tile per block of
/// `threads`; the launch passes `dynamicShared` bytes (0: static tiles).
struct GemmTiling {
  int64_t tileM, tileN, threads;
  int64_t dynamicShared = 0;
};

/// A GEMM kernel with its shared tiles, its arguments, and where its
/// block's tile of C starts: grid x = (batch, column block of tileN
/// columns), which allows 2^31 - 1 blocks; y = row block of tileM rows.
struct GemmKernel {
  mlir::gpu::GPUFuncOp func;
  SmallVector<Value> tiles;
  Value A, B, C, tid, warp, lane, m0, n0;
  SmallVector<Value> lead; // the batch index, when batched
};

/// Declares the kernel and emits its entry; `b` is left at its end.
GemmKernel beginGemmKernel(mlir::OpBuilder &builder,
                           mlir::gpu::GPUModuleOp module, llvm::StringRef name,
                           const GemmShape &s, mlir::TypeRange args,
                           ArrayRef<mlir::MemRefType> tiles, GemmTiling &t,
                           ImplicitLocOpBuilder &b, Arith &a);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_GEMMKERNEL_H
