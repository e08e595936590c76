//===- RowKernels.h - Softmax and normalisation GPU kernels -----*- C++ -*-===//

#ifndef TFC_CONVERSION_GPU_ROWKERNELS_H
#define TFC_CONVERSION_GPU_ROWKERNELS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

namespace tfc {

struct RowLaunch {
  mlir::gpu::GPUFuncOp kernel;
  int64_t gridX, blockX;
};

/// softmax over the last dimension of x [rows, n] into y [rows, n]
/// (arguments x, y). A row of -inf gives zeros.
RowLaunch buildSoftmaxKernel(mlir::OpBuilder &builder,
                             mlir::gpu::GPUModuleOp module,
                             llvm::StringRef name, int64_t rows, int64_t n,
                             mlir::Type elementType);

/// layer_norm over the last dimension of x [rows, n] (arguments x, gamma
/// [n], beta [n], y [rows, n]).
RowLaunch buildLayerNormKernel(mlir::OpBuilder &builder,
                               mlir::gpu::GPUModuleOp module,
                               llvm::StringRef name, int64_t rows, int64_t n,
                               double epsilon, mlir::Type elementType);

/// rms_norm over the last dimension of x [rows, n] (arguments x, gamma [n],
/// y [rows, n]).
RowLaunch buildRmsNormKernel(mlir::OpBuilder &builder,
                             mlir::gpu::GPUModuleOp module,
                             llvm::StringRef name, int64_t rows, int64_t n,
                             double epsilon, mlir::Type elementType);

} // namespace tfc

#endif // TFC_CONVERSION_GPU_ROWKERNELS_H
