//===- PTX.h - The PTX of a lowered GPU model -------------------*- C++ -*-===//

#ifndef TFC_TARGET_PTX_H
#define TFC_TARGET_PTX_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace tfc {

/// Writes the PTX that `gpu-module-to-binary` (cubin-format=isa) stored in
/// the module's gpu.binary to `path`. A model without kernels is an error.
mlir::LogicalResult writePTX(mlir::ModuleOp module, const std::string &path,
                             std::string &error);

} // namespace tfc

#endif // TFC_TARGET_PTX_H
