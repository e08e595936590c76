//===- Fuse.cpp - All transformer fusions to a fixpoint -------------------===//

#include "Matchers.h"

#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Transforms/Passes.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace tfc::transformer {
#define GEN_PASS_DEF_TRANSFORMERFUSE
#include "tfc/Dialect/Transformer/Transforms/Passes.h.inc"
} // namespace tfc::transformer

namespace tfc::transformer {

void populateFusePatterns(RewritePatternSet &patterns) {
  populateFuseSoftmaxPatterns(patterns);
  populateFuseLayerNormPatterns(patterns);
  populateFuseRmsNormPatterns(patterns);
  populateFuseAttentionPatterns(patterns);
}

void explainMissedFusions(Operation *root, unsigned kinds) {
  auto has = [&](FusionKind k) { return kinds & static_cast<unsigned>(k); };
  // Run after the rewrites converged: what is left is what did not fuse.
  root->walk([&](Operation *op) {
    if (has(FusionKind::Attention) && fusion::isAttentionCandidate(op)) {
      auto m = fusion::matchAttention(cast<tosa::MatMulOp>(op));
      if (!m)
        op->emitRemark() << "attention not fused: " << m.getReason();
    }
    if (has(FusionKind::Softmax) && fusion::isSoftmaxCandidate(op)) {
      auto m = fusion::matchSoftmax(op->getResult(0));
      if (!m)
        op->emitRemark() << "softmax not fused: " << m.getReason();
    }
    // An rsqrt is explained as the normalisation its mean square is of.
    if (auto rsqrt = dyn_cast<tosa::RsqrtOp>(op)) {
      if (fusion::isRmsNormCandidate(rsqrt)) {
        auto m = fusion::matchRmsNorm(rsqrt);
        if (!m && has(FusionKind::RmsNorm))
          op->emitRemark() << "rms_norm not fused: " << m.getReason();
      } else if (has(FusionKind::LayerNorm)) {
        auto m = fusion::matchLayerNorm(rsqrt);
        if (!m)
          op->emitRemark() << "layer_norm not fused: " << m.getReason();
      }
    }
  });
}

void runFusion(Operation *root, void (*populate)(RewritePatternSet &),
               FusionKind kind, bool explainMissed) {
  RewritePatternSet patterns(root->getContext());
  populate(patterns);
  (void)applyPatternsGreedily(root, std::move(patterns));
  if (explainMissed)
    explainMissedFusions(root, static_cast<unsigned>(kind));
}

namespace {

struct FusePass : impl::TransformerFuseBase<FusePass> {
  using Base::Base;
  void runOnOperation() override {
    runFusion(getOperation(), populateFusePatterns, FusionKind::All,
              explainMissed);
  }
};

} // namespace
} // namespace tfc::transformer
