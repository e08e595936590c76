//===- FuseSoftmax.cpp - TOSA softmax chains to transformer.softmax -------===//

#include "Matchers.h"

#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Transforms/Passes.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

namespace tfc::transformer {
#define GEN_PASS_DEF_TRANSFORMERFUSESOFTMAX
#include "tfc/Dialect/Transformer/Transforms/Passes.h.inc"
} // namespace tfc::transformer

namespace tfc::transformer {
namespace {

/// Rooted at the final `mul` of the chain; see `fusion::matchSoftmax`.
struct FuseSoftmaxPattern : OpRewritePattern<tosa::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tosa::MulOp op,
                                PatternRewriter &rewriter) const override {
    fusion::MatchOr<fusion::SoftmaxMatch> m =
        fusion::matchSoftmax(op.getOutput());
    if (!m)
      return rewriter.notifyMatchFailure(op, m.getReason());
    rewriter.replaceOpWithNewOp<SoftmaxOp>(op, m->input,
                                           rewriter.getI64IntegerAttr(m->axis));
    return success();
  }
};

struct FuseSoftmaxPass : impl::TransformerFuseSoftmaxBase<FuseSoftmaxPass> {
  using Base::Base;
  void runOnOperation() override {
    runFusion(getOperation(), populateFuseSoftmaxPatterns, FusionKind::Softmax,
              explainMissed);
  }
};

} // namespace

void populateFuseSoftmaxPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseSoftmaxPattern>(patterns.getContext());
}

} // namespace tfc::transformer
