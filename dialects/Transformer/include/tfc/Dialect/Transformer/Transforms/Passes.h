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

/// Softmax chains (`exp`, `reduce_sum`, `reciprocal`, `mul`, with or
/// without `reduce_max`) to `transformer.softmax`.
void populateFuseSoftmaxPatterns(mlir::RewritePatternSet &patterns);

/// Mean/centre/variance/rsqrt/scale/shift chains to `transformer.layer_norm`.
void populateFuseLayerNormPatterns(mlir::RewritePatternSet &patterns);

/// Mean-square/rsqrt/scale chains to `transformer.rms_norm`.
void populateFuseRmsNormPatterns(mlir::RewritePatternSet &patterns);

/// `matmul -> scale -> mask -> softmax -> matmul` to `transformer.attention`.
void populateFuseAttentionPatterns(mlir::RewritePatternSet &patterns);

/// All of the above.
void populateFusePatterns(mlir::RewritePatternSet &patterns);

/// Kinds of fusion candidates that `explainMissedFusions` reports on.
enum class FusionKind : unsigned {
  Softmax = 1,
  LayerNorm = 2,
  Attention = 4,
  RmsNorm = 8,
  All = 15,
};

/// Emits a remark at every candidate under `root` of the given kinds
/// (a bit set of `FusionKind`) that does not match, naming the first failed
/// condition.
void explainMissedFusions(mlir::Operation *root, unsigned kinds);

/// What each fusion pass runs: the patterns `populate` adds, applied
/// greedily under `root` to a fixpoint, then with `explainMissed` the
/// remarks of `explainMissedFusions` on the candidates of `kind` left.
void runFusion(mlir::Operation *root,
               void (*populate)(mlir::RewritePatternSet &), FusionKind kind,
               bool explainMissed);

#define GEN_PASS_REGISTRATION
#include "tfc/Dialect/Transformer/Transforms/Passes.h.inc"

} // namespace tfc::transformer

#endif // TFC_DIALECT_TRANSFORMER_TRANSFORMS_PASSES_H
