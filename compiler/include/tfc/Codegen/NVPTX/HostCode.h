//===- HostCode.h - Host code of a GPU model --------------------*- C++ -*-===//

#ifndef TFC_CODEGEN_NVPTX_HOSTCODE_H
#define TFC_CODEGEN_NVPTX_HOSTCODE_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace tfc {

/// True for ops of host functions, outside every kernel body.
inline bool isHostCode(mlir::Operation *op) {
  return !op->getParentOfType<mlir::gpu::LaunchOp>() &&
         !op->getParentOfType<mlir::gpu::GPUFuncOp>();
}

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_HOSTCODE_H
