//===- FuseElementwise.cpp - Elementwise fusion that spares matmuls -------===//

#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// An elementwise op none of whose operands comes from another elementwise
/// op, with no gather (tensor.extract) in its body.
bool isCheapLeaf(linalg::GenericOp op) {
  for (Value in : op.getDpsInputs()) {
    auto def = in.getDefiningOp<linalg::GenericOp>();
    if (def && linalg::isElementwise(def))
      return false;
  }
  return !op.getBody()
              ->walk([](tensor::ExtractOp) { return WalkResult::interrupt(); })
              .wasInterrupted();
}

struct FuseElementwisePass : impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // A producer with several uses is copied into each consumer. That pays
    // for a leaf (all its operands computed by something other than an
    // elementwise op, and no gather inside): LayerNorm's x - mean, read
    // twice, is recomputed instead of stored. A producer that is itself
    // the end of an elementwise chain is not copied: along a residual
    // stream (GPT-2's h = h + f(h), no LayerNorm between the adds) every
    // add would recompute all earlier adds and the embedding gather.
    linalg::ControlFusionFn control = [](OpOperand *operand) {
      auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
      if (!producer || !linalg::isElementwise(producer) ||
          !isa<linalg::GenericOp>(operand->getOwner()))
        return false;
      return producer->hasOneUse() || isCheapLeaf(producer);
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace tfc
