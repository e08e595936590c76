//===- Passes.h - Transformer dialect passes --------------------*- C++ -*-===//

#ifndef TFC_DIALECT_TRANSFORMER_TRANSFORMS_PASSES_H
#define TFC_DIALECT_TRANSFORMER_TRANSFORMS_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
} // namespace mlir

namespace tfc::transformer {

#define GEN_PASS_DECL
#include "tfc/Dialect/Transformer/Transforms/Passes.h.inc"

/// Patterns that replace every transformer op by its decomposition.
void populateDecomposePatterns(mlir::RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "tfc/Dialect/Transformer/Transforms/Passes.h.inc"

} // namespace tfc::transformer

#endif // TFC_DIALECT_TRANSFORMER_TRANSFORMS_PASSES_H
