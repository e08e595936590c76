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

/// Whether `type` is static with no elements.
bool isEmpty(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && t.hasStaticShape() && t.getNumElements() == 0;
}

/// The results of `op` when an operand or result is empty: tensor.empty
/// for each empty result, zeros for the others (attention over no keys);
/// nullopt when nothing is empty.
std::optional<SmallVector<Value>> emptyResults(Operation *op,
                                               PatternRewriter &rewriter) {
  if (llvm::none_of(op->getOperandTypes(), isEmpty) &&
      llvm::none_of(op->getResultTypes(), isEmpty))
    return std::nullopt;
  SmallVector<Value> values;
  for (Type type : op->getResultTypes()) {
    auto t = cast<RankedTensorType>(type);
    if (isEmpty(t)) {
      values.push_back(tensor::EmptyOp::create(
          rewriter, op->getLoc(), t.getShape(), t.getElementType()));
      continue;
    }
    if (!isa<AttentionOp>(op) || !t.hasStaticShape())
      return std::nullopt;
    values.push_back(arith::ConstantOp::create(
        rewriter, op->getLoc(),
        DenseElementsAttr::get(t, rewriter.getZeroAttr(t.getElementType()))));
  }
  return values;
}

/// Replaces one aggregated op of the transformer dialect by its
/// decomposition.
struct DecomposeAggregatedOp
    : OpInterfaceRewritePattern<linalg::AggregatedOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::AggregatedOpInterface op,
                                PatternRewriter &rewriter) const override {
    if (!isa<TransformerDialect>(op->getDialect()))
      return failure();
    // Empty tensors have no elements to compute (and TOSA takes none):
    // an empty result is any empty tensor; attention over no keys gives
    // zeros (every row sees no key).
    if (std::optional<SmallVector<Value>> empty = emptyResults(op, rewriter)) {
      rewriter.replaceOp(op, *empty);
      return success();
    }
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
      // A collective is no aggregate of primitives: it stays.
      if (isa<TransformerDialect>(op->getDialect()) &&
          !isa<AllReduceOp, AllGatherOp, ParallelRankOp>(op)) {
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
