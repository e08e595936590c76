//===- Passes.h - tfc conversion passes -------------------------*- C++ -*-===//

#ifndef TFC_CONVERSION_PASSES_H
#define TFC_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace tfc {

#define GEN_PASS_DECL
#include "tfc/Conversion/Passes.h.inc"

/// Patterns lowering transformer ops to CPU micro-kernel calls. The kernel
/// declarations are added to the enclosing module on demand.
void populateTransformerToCPUPatterns(mlir::RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "tfc/Conversion/Passes.h.inc"

} // namespace tfc

#endif // TFC_CONVERSION_PASSES_H
