//===- FuseElementwise.cpp - Elementwise fusion that spares matmuls -------===//

#include "tfc/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

struct FuseElementwisePass : impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // Only a producer with one use: fusing one with several copies its
    // computation into each consumer, and along a residual stream (GPT-2's
    // h = h + f(h), no LayerNorm in between) every add would recompute all
    // the adds and the embedding gather before it.
    linalg::ControlFusionFn control = [](OpOperand *operand) {
      auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
      return producer && linalg::isElementwise(producer) &&
             producer->hasOneUse() &&
             isa<linalg::GenericOp>(operand->getOwner());
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace tfc
