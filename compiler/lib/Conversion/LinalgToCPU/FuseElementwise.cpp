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
    linalg::ControlFusionFn control = [](OpOperand *operand) {
      auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
      return producer && linalg::isElementwise(producer) &&
             isa<linalg::GenericOp>(operand->getOwner());
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace tfc
