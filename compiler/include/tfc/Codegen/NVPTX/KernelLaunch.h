//===- KernelLaunch.h - A built GPU kernel and its launch -------*- C++ -*-===//
//
// What a kernel builder returns: the kernel, its grid and block, the
// dynamic shared memory it takes and the TMA tensor maps the host code
// makes for it; and the host code that launches it.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_CODEGEN_NVPTX_KERNELLAUNCH_H
#define TFC_CODEGEN_NVPTX_KERNELLAUNCH_H

#include "tfc/Codegen/NVPTX/TensorMap.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

namespace tfc {

struct KernelLaunch {
  mlir::gpu::GPUFuncOp kernel;
  /// gridX x gridY blocks of blockX threads.
  int64_t gridX = 1, gridY = 1, blockX = 1;
  /// Dynamic shared memory the launch passes (0: static tiles only).
  int64_t dynamicSharedBytes = 0;
  /// Tensor maps the host makes before the launch, passed after the
  /// buffers.
  llvm::SmallVector<TensorMapSpec, 2> tensorMaps;
};

/// Launches `launch.kernel` on `buffers`, followed by the device addresses
/// of its tensor maps (of those buffers).
void createLaunch(mlir::OpBuilder &b, mlir::Location loc,
                  const KernelLaunch &launch, mlir::ValueRange buffers);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_KERNELLAUNCH_H
