//===- FuseLayerNorm.cpp - TOSA normalisations to layer_norm / rms_norm ---===//
//
// Both normalisations are rooted at their `rsqrt` and share the rebuilding of
// gamma/beta as [N] operands; a mean square of a centred value is a
// layer_norm, of anything else an rms_norm.
//
//===----------------------------------------------------------------------===//

#include "Matchers.h"

#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Transforms/Passes.h"
#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/PatternMatch.h"

#include <type_traits>

using namespace mlir;

namespace tfc::transformer {
#define GEN_PASS_DEF_TRANSFORMERFUSELAYERNORM
#define GEN_PASS_DEF_TRANSFORMERFUSERMSNORM
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

/// Rooted at the `rsqrt`: `match` is fusion::matchLayerNorm (OpTy
/// LayerNormOp) or fusion::matchRmsNorm (RmsNormOp). The op replaces the
/// match's root, its gamma (1 when absent) and beta (0) as [N] operands.
template <typename OpTy, auto match>
struct FuseNormPattern : OpRewritePattern<tosa::RsqrtOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tosa::RsqrtOp op,
                                PatternRewriter &rewriter) const override {
    auto m = match(op);
    if (!m)
      return rewriter.notifyMatchFailure(op, m.getReason());
    auto xt = cast<RankedTensorType>(m->input.getType());
    int64_t n = xt.getDimSize(xt.getRank() - 1);
    Type et = xt.getElementType();
    rewriter.setInsertionPoint(m->root);
    TosaBuilder t(rewriter, m->root->getLoc());
    Value gamma = asVector(t, m->gamma, n, et, 1.0);
    FloatAttr eps = rewriter.getF32FloatAttr(static_cast<float>(m->epsilon));
    if constexpr (std::is_same_v<OpTy, LayerNormOp>) {
      Value beta = asVector(t, m->beta, n, et, 0.0);
      rewriter.replaceOpWithNewOp<OpTy>(m->root, m->input, gamma, beta, eps);
    } else {
      rewriter.replaceOpWithNewOp<OpTy>(m->root, m->input, gamma, eps);
    }
    return success();
  }
};

using FuseLayerNormPattern =
    FuseNormPattern<LayerNormOp, fusion::matchLayerNorm>;
using FuseRmsNormPattern = FuseNormPattern<RmsNormOp, fusion::matchRmsNorm>;

/// The f32 input (gamma, beta) of a layer_norm as the f16/bf16 value `t`
/// it was cast from, or null.
static Value castFrom(Value v, Type t) {
  auto castOp = v.getDefiningOp<tosa::CastOp>();
  if (!castOp)
    return {};
  Value in = castOp.getInput();
  return cast<RankedTensorType>(in.getType()).getElementType() == t ? in
                                                                    : Value();
}

/// cast(layer_norm(cast(x), cast(gamma), cast(beta))) back to x's f16 or
/// bf16 is the layer_norm of x, gamma and beta themselves: a layer_norm
/// of f16/bf16 computes in f32 and rounds once (see its decomposition),
/// which is what the casts spell out. Half-precision models write their
/// LayerNorm that way (and tfc's importer with --dtype does). Rooted at
/// the last cast.
struct FoldLayerNormCastsPattern : OpRewritePattern<tosa::CastOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tosa::CastOp op,
                                PatternRewriter &rewriter) const override {
    auto norm = op.getInput().getDefiningOp<LayerNormOp>();
    if (!norm || !norm->hasOneUse() || !norm.getType().getElementType().isF32())
      return failure();
    Type t = cast<RankedTensorType>(op.getType()).getElementType();
    if (!t.isF16() && !t.isBF16())
      return failure();
    Value x = castFrom(norm.getInput(), t),
          gamma = castFrom(norm.getGamma(), t),
          beta = castFrom(norm.getBeta(), t);
    if (!x || !gamma || !beta)
      return rewriter.notifyMatchFailure(
          op, "the layer_norm's operands are not all cast from its result's "
              "type");
    rewriter.replaceOpWithNewOp<LayerNormOp>(op, op.getType(), x, gamma, beta,
                                             norm.getEpsilonAttr());
    return success();
  }
};

struct FuseLayerNormPass
    : impl::TransformerFuseLayerNormBase<FuseLayerNormPass> {
  using Base::Base;
  void runOnOperation() override {
    runFusion(getOperation(), populateFuseLayerNormPatterns,
              FusionKind::LayerNorm, explainMissed);
  }
};

struct FuseRmsNormPass : impl::TransformerFuseRmsNormBase<FuseRmsNormPass> {
  using Base::Base;
  void runOnOperation() override {
    runFusion(getOperation(), populateFuseRmsNormPatterns, FusionKind::RmsNorm,
              explainMissed);
  }
};

} // namespace

void populateFuseLayerNormPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseLayerNormPattern, FoldLayerNormCastsPattern>(
      patterns.getContext());
}

void populateFuseRmsNormPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseRmsNormPattern>(patterns.getContext());
}

} // namespace tfc::transformer
