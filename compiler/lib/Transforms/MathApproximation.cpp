//===- MathApproximation.cpp - Vectorisable forms of math ops -------------===//

#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_MATHAPPROXIMATION
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// Whether every use of `value` (f32, scalar or vector) ends, through
/// elementwise float arithmetic, in a rounding to a float type of at most
/// 11 significant bits (f16, bf16): a GELU of a bf16 model computes in f32
/// and stores its result as bf16.
bool onlyReachesNarrowFloats(Value value) {
  SmallVector<Value> work{value};
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!work.empty()) {
    for (Operation *user : work.pop_back_val().getUsers()) {
      if (!seen.insert(user).second)
        continue;
      if (auto trunc = dyn_cast<arith::TruncFOp>(user)) {
        auto type = cast<FloatType>(getElementTypeOrSelf(trunc.getType()));
        if (type.getFPMantissaWidth() > 11)
          return false;
        continue;
      }
      if (!isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
               arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp,
               arith::MaxNumFOp, arith::MinNumFOp, math::FmaOp>(user))
        return false;
      work.push_back(user->getResult(0));
    }
  }
  return true;
}

/// erf(x) = x P(x^2) / Q(x^2) on |x| <= 4 (and +-1 beyond), P of degree 6
/// and Q of degree 5, for an f32 erf whose result is only ever rounded to a
/// 16-bit float (a bf16 or f16 model's GELU). About 20 operations against
/// the 50 of MLIR's form, which picks its coefficients among three
/// intervals; the largest error is 6.1 units of f32's last place against
/// 4, a difference the rounding to 8 or 11 significant bits hides.
/// fit_erf.py fits the coefficients and measures that error.
struct NarrowErfApproximation : OpRewritePattern<math::ErfOp> {
  NarrowErfApproximation(MLIRContext *context)
      : OpRewritePattern(context, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(math::ErfOp op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    if (!getElementTypeOrSelf(type).isF32() ||
        !onlyReachesNarrowFloats(op.getResult()))
      return failure();
    static constexpr float p[] = {
        1.128379226e+00f, 1.852030605e-01f, 5.431690067e-02f, 3.849606495e-03f,
        3.796092060e-04f, 4.684790383e-06f, -1.320228726e-08f};
    static constexpr float q[] = {1.000000000e+00f, 4.974653423e-01f,
                                  1.139583588e-01f, 1.546208095e-02f,
                                  1.307569328e-03f, 6.311070319e-05f};
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto constant = [&](float value) -> Value {
      Attribute attr = b.getF32FloatAttr(value);
      if (auto vector = dyn_cast<VectorType>(type))
        attr = SplatElementsAttr::get(vector, attr);
      return arith::ConstantOp::create(b, cast<TypedAttr>(attr));
    };
    auto horner = [&](ArrayRef<float> c, Value t) {
      Value acc = constant(c.back());
      for (float k : llvm::reverse(c.drop_back()))
        acc = math::FmaOp::create(b, acc, t, constant(k));
      return acc;
    };
    Value x = op.getOperand();
    // |x| capped at 4 (a NaN is put back at the end), and the sign of x.
    Value a =
        arith::MinNumFOp::create(b, math::AbsFOp::create(b, x), constant(4.0f));
    Value t = arith::MulFOp::create(b, a, a);
    Value ratio = arith::DivFOp::create(
        b, arith::MulFOp::create(b, a, horner(p, t)), horner(q, t));
    Value magnitude = arith::MinNumFOp::create(b, ratio, constant(1.0f));
    Value result = math::CopySignOp::create(b, magnitude, x);
    Value isNaN = arith::CmpFOp::create(b, arith::CmpFPredicate::UNO, x, x);
    rewriter.replaceOp(op, arith::SelectOp::create(b, isNaN, x, result));
    return success();
  }
};

struct MathApproximationPass
    : impl::MathApproximationBase<MathApproximationPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<NarrowErfApproximation>(&getContext());
    populateMathPolynomialApproximationPatterns(
        patterns, MathPolynomialApproximationOptions{});
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace tfc
