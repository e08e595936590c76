//===- Passes.h - tfc conversion passes -------------------------*- C++ -*-===//

#ifndef TFC_CONVERSION_PASSES_H
#define TFC_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class DialectRegistry;
class RewritePatternSet;
} // namespace mlir

namespace tfc {

#define GEN_PASS_DECL
#include "tfc/Conversion/Passes.h.inc"

/// Patterns that put transformer ops in the form the CPU micro-kernels take
/// (f32, rank-4 mask, [rows, n] for softmax and layer_norm).
void populateTransformerToCPUPatterns(mlir::RewritePatternSet &patterns);

/// Bufferization of transformer ops in kernel form into micro-kernel calls
/// (one-shot bufferization then sees each call read its operands where the
/// op stands). Register it where the CPU pipeline runs.
void registerCPUBufferizationModels(mlir::DialectRegistry &registry);

#define GEN_PASS_REGISTRATION
#include "tfc/Conversion/Passes.h.inc"

} // namespace tfc

#endif // TFC_CONVERSION_PASSES_H
