//===- RowKernels.h - Softmax and normalisation GPU kernels -----*- C++ -*-===//

#ifndef TFC_CODEGEN_NVPTX_ROWKERNELS_H
#define TFC_CODEGEN_NVPTX_ROWKERNELS_H

#include "tfc/Codegen/NVPTX/KernelLaunch.h"

namespace tfc {

/// softmax over the last dimension of x [rows, n] into y [rows, n]
/// (arguments x, y). A row of -inf gives zeros.
KernelLaunch buildSoftmaxKernel(mlir::OpBuilder &builder,
                                mlir::gpu::GPUModuleOp module,
                                llvm::StringRef name, int64_t rows, int64_t n,
                                mlir::Type elementType);

/// layer_norm over the last dimension of x [rows, n] (arguments x, gamma
/// [n], beta [n], y [rows, n]).
KernelLaunch buildLayerNormKernel(mlir::OpBuilder &builder,
                                  mlir::gpu::GPUModuleOp module,
                                  llvm::StringRef name, int64_t rows, int64_t n,
                                  double epsilon, mlir::Type elementType);

/// rms_norm over the last dimension of x [rows, n] (arguments x, gamma [n],
/// y [rows, n]).
KernelLaunch buildRmsNormKernel(mlir::OpBuilder &builder,
                                mlir::gpu::GPUModuleOp module,
                                llvm::StringRef name, int64_t rows, int64_t n,
                                double epsilon, mlir::Type elementType);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_ROWKERNELS_H
