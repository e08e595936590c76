//===- FuseLayerNorm.cpp - TOSA layer norm to transformer.layer_norm ------===//

#include "Matchers.h"

#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Transforms/Passes.h"
#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace tfc::transformer {
#define GEN_PASS_DEF_TRANSFORMERFUSELAYERNORM
#include "tfc/Dialect/Transformer/Transforms/Passes.h.inc"
} // namespace tfc::transformer

namespace tfc::transformer {
namespace {

/// gamma/beta as the op's rank-1 [N] operand: the value a [1, .., N]
/// reshape was taken of, a new reshape, or a constant when absent.
static Value asVector(TosaBuilder &t, Value param, int64_t n, Type et,
                      double absentValue) {
  if (!param)
    return t.constant(RankedTensorType::get({n}, et), absentValue);
  if (auto reshape = param.getDefiningOp<tosa::ReshapeOp>()) {
    auto in = cast<RankedTensorType>(reshape.getInput1().getType());
    if (in.getRank() == 1 && in.getDimSize(0) == n)
      return reshape.getInput1();
  }
  return t.reshape(param, {n});
}

/// Rooted at the `rsqrt`; see `fusion::matchLayerNorm`.
struct FuseLayerNormPattern : OpRewritePattern<tosa::RsqrtOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tosa::RsqrtOp op,
                                PatternRewriter &rewriter) const override {
    fusion::MatchOr<fusion::LayerNormMatch> m = fusion::matchLayerNorm(op);
    if (!m)
      return rewriter.notifyMatchFailure(op, m.getReason());
    auto xt = cast<RankedTensorType>(m->input.getType());
    int64_t n = xt.getDimSize(xt.getRank() - 1);
    Type et = xt.getElementType();
    rewriter.setInsertionPoint(m->root);
    TosaBuilder t(rewriter, m->root->getLoc());
    Value gamma = asVector(t, m->gamma, n, et, 1.0);
    Value beta = asVector(t, m->beta, n, et, 0.0);
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        m->root, m->input, gamma, beta,
        rewriter.getF32FloatAttr(static_cast<float>(m->epsilon)));
    return success();
  }
};

struct FuseLayerNormPass
    : impl::TransformerFuseLayerNormBase<FuseLayerNormPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseLayerNormPatterns(patterns);
    (void)applyPatternsGreedily(getOperation(), std::move(patterns));
    if (explainMissed)
      explainMissedFusions(getOperation(),
                           static_cast<unsigned>(FusionKind::LayerNorm));
  }
};

} // namespace

void populateFuseLayerNormPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseLayerNormPattern>(patterns.getContext());
}

} // namespace tfc::transformer
