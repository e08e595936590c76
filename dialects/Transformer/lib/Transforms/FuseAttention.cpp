//===- FuseAttention.cpp - TOSA attention to transformer.attention --------===//
//
// `fusion::matchAttention` decides, this file only rebuilds the operands in
// the op's layout ([B, H, S, X], un-repeated K/V, a rank-4 additive mask)
// and replaces the output. A second pattern moves a sliding-window band out
// of the mask into the op's `window` (fusion::matchWindowBand), where the
// kernels skip the keys it hides instead of adding a mask to every score.
//
//===----------------------------------------------------------------------===//

#include "Matchers.h"

#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Transforms/Passes.h"
#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

namespace tfc::transformer {
#define GEN_PASS_DEF_TRANSFORMERFUSEATTENTION
#include "tfc/Dialect/Transformer/Transforms/Passes.h.inc"
} // namespace tfc::transformer

namespace tfc::transformer {
namespace {

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// Swaps the two factors of the head dim of [B, A*C, S, X]: head a*C + c
/// moves to c*A + a. With (A, C) = (G, Hkv) this turns the `tile` order
/// (query head h reads kv head h % Hkv) into the op's order (h / G); with
/// (Hkv, G) it turns it back.
static Value swapHeadFactors(TosaBuilder &t, Value x, int64_t a, int64_t c) {
  ArrayRef<int64_t> s = shapeOf(x);
  SmallVector<int64_t> shape = {s[0], s[1], s[2], s[3]};
  Value split = t.reshape(x, {s[0], a, c, s[2], s[3]});
  Value swapped = t.transpose(split, {0, 2, 1, 3, 4});
  return t.reshape(swapped, shape);
}

/// A mask of the scores' rank (3 or 4) at rank 4.
static Value toRank4(TosaBuilder &t, const fusion::AttentionMatch &m,
                     Value mask) {
  ArrayRef<int64_t> s = shapeOf(mask);
  if (s.size() != 3)
    return mask;
  return s[0] == 1 ? t.reshape(mask, {1, 1, s[1], s[2]})
                   : t.reshape(mask, {m.batch, m.heads, s[1], s[2]});
}

/// The additive mask at rank 4, broadcastable to [B, Hq, Sq, Skv]: the sum
/// of the graph's additive masks, or its boolean mask made additive.
static Value buildMask(TosaBuilder &t, const fusion::AttentionMatch &m,
                       Type et) {
  Value mask;
  for (Value term : m.masks) {
    term = toRank4(t, m, term);
    mask = mask ? t.add(mask, term) : term;
  }
  if (m.booleanMask && m.booleanMask->condValue) {
    const fusion::BooleanMask &bm = *m.booleanMask;
    auto condType = cast<RankedTensorType>(bm.condValue.getType());
    Value zero = t.splat(0.0, et, condType.getRank());
    Value fill = t.splat(bm.fill, et, condType.getRank());
    mask = bm.visibleWhenTrue ? t.select(bm.condValue, zero, fill)
                              : t.select(bm.condValue, fill, zero);
  } else if (m.booleanMask) {
    const fusion::BooleanMask &bm = *m.booleanMask;
    auto condType = cast<ShapedType>(bm.cond.getType());
    auto type = RankedTensorType::get(condType.getShape(), et);
    SmallVector<Attribute> values;
    values.reserve(condType.getNumElements());
    Attribute zero = t.builder().getFloatAttr(et, 0.0);
    Attribute fill = t.builder().getFloatAttr(et, bm.fill);
    for (bool c : bm.cond.getValues<bool>())
      values.push_back(c == bm.visibleWhenTrue ? zero : fill);
    mask = tosa::ConstOp::create(t.builder(), t.getLoc(), type,
                                 DenseElementsAttr::get(type, values));
  }
  return mask ? toRank4(t, m, mask) : Value();
}

struct FuseAttentionPattern : OpRewritePattern<tosa::MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tosa::MatMulOp op,
                                PatternRewriter &rewriter) const override {
    fusion::MatchOr<fusion::AttentionMatch> match = fusion::matchAttention(op);
    if (!match)
      return rewriter.notifyMatchFailure(op, match.getReason());
    fusion::AttentionMatch &m = *match;

    Location loc = rewriter.getFusedLoc(
        {m.scoresMatmul.getLoc(), m.outputMatmul.getLoc()});
    Operation *anchor = m.outputReshape ? m.outputReshape.getOperation()
                                        : m.outputMatmul.getOperation();
    rewriter.setInsertionPoint(anchor);
    TosaBuilder t(rewriter, loc);

    int64_t b = m.batch, hq = m.heads, hkv = m.kvHeads;
    ArrayRef<int64_t> qm = shapeOf(m.scoresMatmul.getA());
    ArrayRef<int64_t> km = shapeOf(m.scoresMatmul.getB());
    ArrayRef<int64_t> vm = shapeOf(m.outputMatmul.getB());
    int64_t sq = qm[1], d = qm[2], skv = km[2], dv = vm[2];
    Type et = cast<RankedTensorType>(m.scoresMatmul.getA().getType())
                  .getElementType();

    Value q = t.reshape(m.query.source, {b, hq, sq, d});
    Value k = m.key.source;
    if (m.key.sequenceMajor)
      k = t.transpose(k, {0, 2, 1, 3});
    if (!m.key.swapped)
      k = shapeOf(k).size() == 3 ? t.transpose(k, {0, 2, 1})
                                 : t.transpose(k, {0, 1, 3, 2});
    k = t.reshape(k, {b, hkv, skv, d});
    Value v = t.reshape(m.value.source, {b, hkv, skv, dv});
    Value mask = buildMask(t, m, et);

    bool reorderHeads = m.interleavedGroups && hkv > 1 && m.groups > 1;
    if (reorderHeads) {
      q = swapHeadFactors(t, q, m.groups, hkv);
      if (mask && shapeOf(mask)[1] == hq)
        mask = swapHeadFactors(t, mask, m.groups, hkv);
    }

    Value out = AttentionOp::create(
        rewriter, loc, q, k, v, mask,
        rewriter.getF32FloatAttr(static_cast<float>(m.scale)), m.isCausal,
        m.softcap > 0 ? rewriter.getF32FloatAttr(static_cast<float>(m.softcap))
                      : FloatAttr(),
        IntegerAttr());
    if (reorderHeads)
      out = swapHeadFactors(t, out, hkv, m.groups);

    if (m.outputReshape && out.getType() == m.outputReshape.getType()) {
      rewriter.replaceOp(m.outputReshape, out);
      return success();
    }
    rewriter.setInsertionPoint(m.outputMatmul);
    rewriter.replaceOp(m.outputMatmul,
                       t.reshape(out, shapeOf(m.outputMatmul.getOutput())));
    return success();
  }
};

struct AbsorbWindowBandPattern : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getMask() || op.getWindowAttr())
      return failure();
    ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey());
    fusion::MatchOr<fusion::WindowBand> band =
        fusion::matchWindowBand(op.getMask(), q[2], k[2]);
    if (!band)
      return rewriter.notifyMatchFailure(op, band.getReason());
    rewriter.modifyOpInPlace(op, [&] {
      op.getMaskMutable().assign(band->rest ? ValueRange{band->rest}
                                            : ValueRange{});
      op.setWindowAttr(rewriter.getI64IntegerAttr(band->window));
    });
    return success();
  }
};

struct FuseAttentionPass
    : impl::TransformerFuseAttentionBase<FuseAttentionPass> {
  using Base::Base;
  void runOnOperation() override {
    runFusion(getOperation(), populateFuseAttentionPatterns,
              FusionKind::Attention, explainMissed);
  }
};

} // namespace

void populateFuseAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseAttentionPattern, AbsorbWindowBandPattern>(
      patterns.getContext());
}

} // namespace tfc::transformer
