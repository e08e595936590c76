//===- NormMatchers.cpp - Recognise softmax and norms in TOSA graphs ------===//
//
// The matchers of softmax, layer_norm and rms_norm (Matchers.h): each
// returns the first condition that failed, checked from the root upwards.
//
//===----------------------------------------------------------------------===//

#include "Matchers.h"

#include "tfc/Dialect/Transformer/IR/Transformer.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;

namespace tfc::transformer::fusion {

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

MatchOr<SoftmaxMatch> matchSoftmax(Value probs) {
  if (auto sm = probs.getDefiningOp<SoftmaxOp>()) {
    SoftmaxMatch m;
    m.input = sm.getInput();
    m.axis = sm.getDimension();
    m.root = sm;
    m.inputUsers = {sm};
    return m;
  }
  auto mul = probs.getDefiningOp<tosa::MulOp>();
  if (!mul)
    return mismatch("not a softmax (no mul of an exp by its reciprocal sum)");
  if (!hasZeroShift(mul))
    return mismatch("mul has a non-zero shift");
  tosa::ExpOp exp;
  tosa::ReciprocalOp rec;
  for (int i = 0; i < 2 && !rec; ++i) {
    exp = mul->getOperand(i).getDefiningOp<tosa::ExpOp>();
    rec = mul->getOperand(1 - i).getDefiningOp<tosa::ReciprocalOp>();
    if (!exp)
      rec = {};
  }
  if (!exp)
    return mismatch("not a softmax (no exp operand)");
  if (!rec)
    return mismatch("exp is not multiplied by the reciprocal of its sum");
  auto sum = rec.getInput1().getDefiningOp<tosa::ReduceSumOp>();
  if (!sum)
    return mismatch("reciprocal is not of a reduce_sum");
  if (sum.getInput() != exp.getOutput())
    return mismatch("the sum is not of the same exp");
  int64_t axis = sum.getAxis();
  Value e = exp.getOutput();
  if (!llvm::hasNItems(e.getUses(), 2) ||
      !llvm::all_of(e.getUsers(),
                    [&](Operation *u) { return u == sum || u == mul; }))
    return mismatch("exp has another use");
  if (!sum.getOutput().hasOneUse())
    return mismatch("sum has another use");
  if (!rec.getOutput().hasOneUse())
    return mismatch("reciprocal has another use");

  SoftmaxMatch m;
  m.axis = axis;
  m.root = mul;
  m.input = exp.getInput1();
  m.inputUsers = {exp};
  auto sub = exp.getInput1().getDefiningOp<tosa::SubOp>();
  auto max = sub ? sub.getInput2().getDefiningOp<tosa::ReduceMaxOp>()
                 : tosa::ReduceMaxOp();
  if (max) {
    if (max.getInput() != sub.getInput1())
      return mismatch("the maximum is taken of another tensor");
    if (max.getAxis() != axis)
      return mismatch("reduce_max axis " + llvm::Twine(max.getAxis()) +
                      " differs from reduce_sum axis " + llvm::Twine(axis));
    if (!sub.getOutput().hasOneUse())
      return mismatch("x - max has another use");
    if (!max.getOutput().hasOneUse())
      return mismatch("max has another use");
    m.input = sub.getInput1();
    m.inputUsers = {max, sub};
  }
  if (m.input.getType() != probs.getType())
    return mismatch("softmax input and result types differ");
  return m;
}

bool isSoftmaxCandidate(Operation *op) {
  auto mul = dyn_cast<tosa::MulOp>(op);
  return mul && (mul.getInput1().getDefiningOp<tosa::ExpOp>() ||
                 mul.getInput2().getDefiningOp<tosa::ExpOp>());
}

//===----------------------------------------------------------------------===//
// Layer normalisation
//===----------------------------------------------------------------------===//

/// `reduce_sum(x, last) * 1/N`: returns x.
static MatchOr<Value> matchMean(Value v, StringRef what) {
  auto mul = v.getDefiningOp<tosa::MulOp>();
  if (!mul || !hasZeroShift(mul))
    return mismatch(what + " is not a reduce_sum times 1/N");
  tosa::ReduceSumOp sum;
  std::optional<double> factor;
  for (int i = 0; i < 2 && !sum; ++i) {
    sum = mul->getOperand(i).getDefiningOp<tosa::ReduceSumOp>();
    MatchOr<double> s = matchScale(mul->getOperand(1 - i));
    if (sum && !s)
      return mismatch(what + " sum is scaled by a non-constant");
    if (sum)
      factor = *s;
  }
  if (!sum)
    return mismatch(what + " is not a reduce_sum times 1/N");
  RankedTensorType in = rankedType(sum.getInput());
  if (!in || sum.getAxis() != in.getRank() - 1)
    return mismatch(what + " is reduced over axis " +
                    llvm::Twine(sum.getAxis()) + ", not the last axis");
  int64_t n = in.getDimSize(in.getRank() - 1);
  if (ShapedType::isDynamic(n))
    return mismatch(what + " is over a dynamic last dim");
  if (std::abs(*factor * static_cast<double>(n) - 1.0) > 1e-6)
    return mismatch(what + " sum is scaled by " + std::to_string(*factor) +
                    ", not 1/N = 1/" + llvm::Twine(n));
  return sum.getInput();
}

/// gamma or beta as an elementwise operand: [1, ..., 1, N].
static bool isParamShaped(Value v, RankedTensorType x) {
  RankedTensorType t = rankedType(v);
  if (!t || !t.hasStaticShape() || t.getRank() != x.getRank() ||
      t.getElementType() != x.getElementType())
    return false;
  int64_t r = t.getRank();
  for (int64_t i = 0; i + 1 < r; ++i)
    if (t.getDimSize(i) != 1)
      return false;
  return t.getDimSize(r - 1) == x.getDimSize(r - 1);
}

/// The parameter (gamma, beta) of the single user of `root`'s result when
/// that user is an `OpTy` whose other operand is parameter shaped: the user
/// becomes the root. Null, the root unchanged, otherwise.
template <typename OpTy>
static Value matchParamUser(Operation *&root, RankedTensorType x) {
  Value v = root->getResult(0);
  if (!v.hasOneUse())
    return {};
  auto op = dyn_cast<OpTy>(*v.getUsers().begin());
  if (!op || op->getResult(0).getType() != x)
    return {};
  if constexpr (std::is_same_v<OpTy, tosa::MulOp>)
    if (!hasZeroShift(op))
      return {};
  Value other = op->getOperand(0) == v ? op->getOperand(1) : op->getOperand(0);
  if (other == v || !isParamShaped(other, x))
    return {};
  root = op;
  return other;
}

namespace {
/// `rsqrt(mean(square) + eps)`: what layer_norm and rms_norm share.
struct MeanSquare {
  double epsilon;
  /// The value squared: x - mean for a layer_norm, x for an rms_norm.
  Value base;
};
} // namespace

static MatchOr<MeanSquare> matchMeanSquare(tosa::RsqrtOp rsqrt,
                                           StringRef what) {
  auto add = rsqrt.getInput1().getDefiningOp<tosa::AddOp>();
  if (!add)
    return mismatch("rsqrt input is not " + what + " + epsilon");
  std::optional<double> eps;
  Value var;
  for (int i = 0; i < 2 && !eps; ++i) {
    eps = getSplatFloat(add->getOperand(i));
    var = add->getOperand(1 - i);
  }
  if (!eps)
    return mismatch("epsilon is not a constant");
  if (!std::isfinite(*eps) || *eps < 0)
    return mismatch("epsilon is negative or not finite");
  MatchOr<Value> square = matchMean(var, what);
  if (!square)
    return square.takeMismatch();
  if (auto sq = (*square).getDefiningOp<tosa::MulOp>();
      sq && sq.getInput1() == sq.getInput2() && hasZeroShift(sq))
    return MeanSquare{*eps, sq.getInput1()};
  if (auto pow = (*square).getDefiningOp<tosa::PowOp>();
      pow && getSplatFloat(pow.getInput2()) == 2.0)
    return MeanSquare{*eps, pow.getInput1()};
  return mismatch(what + " is not the mean of a square");
}

/// `x - mean(x)` over the last axis: the centred input of a layer_norm.
static bool isCentred(Value v) {
  auto sub = v.getDefiningOp<tosa::SubOp>();
  if (!sub)
    return false;
  MatchOr<Value> meanOf = matchMean(sub.getInput2(), "mean");
  return meanOf && *meanOf == sub.getInput1();
}

/// The single use of `r` (an rsqrt's result) if it is `base * r` of
/// `base`'s type.
static tosa::MulOp matchNormalise(Value r, Value base) {
  if (!r.hasOneUse())
    return {};
  auto norm = dyn_cast<tosa::MulOp>(*r.getUsers().begin());
  if (!norm || !hasZeroShift(norm) ||
      !(norm.getInput1() == base || norm.getInput2() == base) ||
      norm.getOutput().getType() != base.getType())
    return {};
  return norm;
}

MatchOr<LayerNormMatch> matchLayerNorm(tosa::RsqrtOp rsqrt) {
  MatchOr<MeanSquare> ms = matchMeanSquare(rsqrt, "variance");
  if (!ms)
    return ms.takeMismatch();
  double eps = ms->epsilon;
  Value centred = ms->base;
  auto sub = centred.getDefiningOp<tosa::SubOp>();
  if (!sub)
    return mismatch("variance input is not centred (x - mean)");
  Value x = sub.getInput1();
  MatchOr<Value> meanOf = matchMean(sub.getInput2(), "mean");
  if (!meanOf)
    return meanOf.takeMismatch();
  if (*meanOf != x)
    return mismatch("mean is not of the centred tensor");
  RankedTensorType xt = rankedType(x);
  if (!xt || !xt.hasStaticShape() || centred.getType() != xt)
    return mismatch("input shape is not static");

  tosa::MulOp norm = matchNormalise(rsqrt.getOutput(), centred);
  if (!norm)
    return mismatch("rsqrt is not applied (alone) to the centred input");

  LayerNormMatch m;
  m.input = x;
  m.epsilon = eps;
  m.root = norm;
  m.gamma = matchParamUser<tosa::MulOp>(m.root, xt);
  m.beta = matchParamUser<tosa::AddOp>(m.root, xt);
  return m;
}

bool isRmsNormCandidate(tosa::RsqrtOp rsqrt) {
  // rsqrt(reduce_sum(square(v)) * c + c'), the constants unchecked: an
  // rms_norm unless v is a difference (a layer_norm's x - mean).
  auto add = rsqrt.getInput1().getDefiningOp<tosa::AddOp>();
  if (!add)
    return false;
  for (Value side : add->getOperands()) {
    auto scaled = side.getDefiningOp<tosa::MulOp>();
    for (Value m : scaled ? scaled->getOperands() : ValueRange()) {
      auto sum = m.getDefiningOp<tosa::ReduceSumOp>();
      if (!sum)
        continue;
      Value v;
      if (auto sq = sum.getInput().getDefiningOp<tosa::MulOp>();
          sq && sq.getInput1() == sq.getInput2())
        v = sq.getInput1();
      else if (auto pow = sum.getInput().getDefiningOp<tosa::PowOp>())
        v = pow.getInput1();
      if (v)
        return !v.getDefiningOp<tosa::SubOp>();
    }
  }
  return false;
}

MatchOr<RmsNormMatch> matchRmsNorm(tosa::RsqrtOp rsqrt) {
  MatchOr<MeanSquare> ms = matchMeanSquare(rsqrt, "mean square");
  if (!ms)
    return ms.takeMismatch();
  Value x = ms->base;
  if (isCentred(x))
    return mismatch("the mean square is of a centred input (a layer_norm)");
  RankedTensorType xt = rankedType(x);
  if (!xt || !xt.hasStaticShape())
    return mismatch("input shape is not static");
  tosa::MulOp norm = matchNormalise(rsqrt.getOutput(), x);
  if (!norm)
    return mismatch("rsqrt is not applied (alone) to the input");

  RmsNormMatch m;
  m.input = x;
  m.epsilon = ms->epsilon;
  m.root = norm;
  // An f32 normalisation of an f16/bf16 value rounded back to that type
  // (transformers' LlamaRMSNorm): the op of the narrow type.
  Value y = norm.getOutput();
  if (auto widen = x.getDefiningOp<tosa::CastOp>(); widen && y.hasOneUse())
    if (auto narrow = dyn_cast<tosa::CastOp>(*y.getUsers().begin())) {
      Type t = rankedType(widen.getInput()).getElementType();
      if (xt.getElementType().isF32() && (t.isF16() || t.isBF16()) &&
          narrow.getType() == widen.getInput().getType()) {
        m.input = widen.getInput();
        m.root = narrow;
      }
    }
  m.gamma = matchParamUser<tosa::MulOp>(m.root, rankedType(m.input));
  return m;
}

} // namespace tfc::transformer::fusion
