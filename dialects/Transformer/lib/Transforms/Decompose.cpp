//===- Decompose.cpp - transformer ops back to primitives -----------------===//

#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;

namespace tfc::transformer {
#define GEN_PASS_DEF_TRANSFORMERDECOMPOSE
#include "tfc/Dialect/Transformer/Transforms/Passes.h.inc"
} // namespace tfc::transformer

namespace tfc::transformer {
namespace {

/// Replaces one aggregated op of the transformer dialect by its
/// decomposition.
struct DecomposeAggregatedOp
    : OpInterfaceRewritePattern<linalg::AggregatedOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::AggregatedOpInterface op,
                                PatternRewriter &rewriter) const override {
    if (!isa<TransformerDialect>(op->getDialect()))
      return failure();
    FailureOr<SmallVector<Value>> values = op.decomposeOperation(rewriter);
    if (failed(values))
      return rewriter.notifyMatchFailure(op, "operands are not static");
    rewriter.replaceOp(op, *values);
    return success();
  }
};

struct DecomposePass : impl::TransformerDecomposeBase<DecomposePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateDecomposePatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
    WalkResult r = getOperation()->walk([](Operation *op) {
      if (isa<TransformerDialect>(op->getDialect())) {
        op->emitError() << "cannot decompose '" << op->getName()
                        << "': its operands need static shapes";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void populateDecomposePatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeAggregatedOp>(patterns.getContext());
}

} // namespace tfc::transformer
