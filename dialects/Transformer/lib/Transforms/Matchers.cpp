//===- Matchers.cpp - Recognise transformer blocks in TOSA graphs ---------===//
//
// Read-only matchers shared by the fusion patterns and by `explain-missed`.
// Each returns the first condition that failed; the conditions are checked
// in the order a reader follows the graph, from the root upwards.
//
//===----------------------------------------------------------------------===//

#include "Matchers.h"

#include "tfc/Dialect/Transformer/IR/Transformer.h"

#include "mlir/Dialect/Tosa/Utils/ConversionUtils.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

namespace tfc::transformer::fusion {

//===----------------------------------------------------------------------===//
// Small building blocks
//===----------------------------------------------------------------------===//

static RankedTensorType rankedType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

static std::string formatList(ArrayRef<int32_t> values) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(values, os);
  os << "]";
  return s;
}

std::optional<double> getSplatFloat(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

MatchOr<double> matchScale(Value v) {
  if (std::optional<double> c = getSplatFloat(v))
    return *c;
  if (auto rec = v.getDefiningOp<tosa::ReciprocalOp>())
    if (std::optional<double> c = getSplatFloat(rec.getInput1())) {
      if (*c == 0.0)
        return mismatch("scale is the reciprocal of zero");
      return 1.0 / *c;
    }
  return mismatch("scale is not a constant");
}

bool hasZeroShift(tosa::MulOp mul) {
  Value shift = mul.getShift();
  if (!shift)
    return true;
  DenseElementsAttr attr;
  if (!matchPattern(shift, m_Constant(&attr)))
    return false;
  return llvm::all_of(attr.getValues<APInt>(),
                      [](const APInt &x) { return x.isZero(); });
}

std::optional<HeadView> matchHeadReshape(tosa::ReshapeOp reshape) {
  RankedTensorType in = rankedType(reshape.getInput1());
  RankedTensorType out = rankedType(reshape.getOutput());
  if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape())
    return std::nullopt;
  RankedTensorType wide = in, narrow = out;
  if (in.getRank() == 3 && out.getRank() == 4)
    std::swap(wide, narrow);
  if (wide.getRank() != 4 || narrow.getRank() != 3)
    return std::nullopt;
  ArrayRef<int64_t> w = wide.getShape(), n = narrow.getShape();
  if (w[0] * w[1] != n[0] || w[2] != n[1] || w[3] != n[2])
    return std::nullopt;
  return HeadView{w[0], w[1]};
}

static std::optional<SmallVector<int64_t>> getMultiples(tosa::TileOp tile) {
  SmallVector<int64_t> multiples;
  Operation *def = tile.getMultiples().getDefiningOp();
  if (!def || !tosa::getConstShapeValues(def, multiples))
    return std::nullopt;
  return multiples;
}

MatchOr<RepeatedKV> matchRepeatedKV(Value v) {
  // tile(x, [1, G, 1, 1]): head h of the result is head h % Hkv of x.
  if (auto tile = v.getDefiningOp<tosa::TileOp>()) {
    RankedTensorType in = rankedType(tile.getInput1());
    std::optional<SmallVector<int64_t>> m = getMultiples(tile);
    if (!in || !in.hasStaticShape() || in.getRank() != 4 || !m ||
        (*m)[0] != 1 || (*m)[2] != 1 || (*m)[3] != 1)
      return mismatch("tile does not repeat the head dim of a 4-D tensor");
    RepeatedKV r;
    r.source = tile.getInput1();
    r.groups = (*m)[1];
    r.interleaved = true;
    r.repeatedView = {in.getDimSize(0), in.getDimSize(1) * r.groups};
    return r;
  }
  // reshape(tile(reshape(x, [B,Hkv,1,S,X]), [1,1,G,1,1]), [B,Hkv*G,S,X]):
  // head h of the result is head h / G of x.
  auto merge = v.getDefiningOp<tosa::ReshapeOp>();
  auto tile =
      merge ? merge.getInput1().getDefiningOp<tosa::TileOp>() : tosa::TileOp();
  auto split = tile ? tile.getInput1().getDefiningOp<tosa::ReshapeOp>()
                    : tosa::ReshapeOp();
  if (!split)
    return mismatch("not a repeat of K/V heads");
  RankedTensorType x = rankedType(split.getInput1());
  RankedTensorType x5 = rankedType(split.getOutput());
  RankedTensorType out = rankedType(merge.getOutput());
  std::optional<SmallVector<int64_t>> m = getMultiples(tile);
  if (!x || !x5 || !out || !x.hasStaticShape() || !out.hasStaticShape() ||
      x.getRank() != 4 || x5.getRank() != 5 || out.getRank() != 4 || !m)
    return mismatch("not a repeat of K/V heads");
  ArrayRef<int64_t> xs = x.getShape(), s5 = x5.getShape(), os = out.getShape();
  int64_t g = (*m)[2];
  bool ok = (*m)[0] == 1 && (*m)[1] == 1 && (*m)[3] == 1 && (*m)[4] == 1 &&
            s5[0] == xs[0] && s5[1] == xs[1] && s5[2] == 1 && s5[3] == xs[2] &&
            s5[4] == xs[3] && os[0] == xs[0] && os[1] == xs[1] * g &&
            os[2] == xs[2] && os[3] == xs[3];
  if (!ok)
    return mismatch("reshape/tile/reshape is not a repeat of K/V heads");
  RepeatedKV r;
  r.source = split.getInput1();
  r.groups = g;
  r.interleaved = false;
  r.repeatedView = {os[0], os[1]};
  return r;
}

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

/// The single user of `v` if it is an `OpTy` whose other operand is
/// parameter shaped; sets `param` to that operand.
template <typename OpTy>
static OpTy matchParamUser(Value v, RankedTensorType x, Value &param) {
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
  param = other;
  return op;
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
  Value param;
  if (auto g = matchParamUser<tosa::MulOp>(norm.getOutput(), xt, param)) {
    m.gamma = param;
    m.root = g;
  }
  if (auto b = matchParamUser<tosa::AddOp>(m.root->getResult(0), xt, param)) {
    m.beta = param;
    m.root = b;
  }
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
  Value param;
  if (auto g = matchParamUser<tosa::MulOp>(m.root->getResult(0),
                                           rankedType(m.input), param)) {
    m.gamma = param;
    m.root = g;
  }
  return m;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

/// What walking from the softmax input down to the scores matmul found.
struct ScoresWalk {
  double scale = 1.0;
  bool scaled = false;
  double softcap = 0; ///< > 0 once a soft cap was peeled.
  Value mask;
  bool isCausal = false;
  double causalFill = 0; ///< What the causal select writes for hidden keys.
  std::optional<BooleanMask> booleanMask;
  SmallVector<HeadView> views;
  tosa::MatMulOp matmul;
  /// How many values were accepted before a failure: picks the more
  /// telling reason when both operands of an add are tried.
  int progress = 0;
};

enum class Role { Query, Key, Value };

} // namespace

/// Whether `cond` (shape [1, .., 1, Sq, Skv]) is exactly the causal pattern
/// `j <= i + (Skv - Sq)` for the visible value.
static bool isCausalPattern(DenseElementsAttr cond, bool visibleWhenTrue) {
  auto type = cast<ShapedType>(cond.getType());
  int64_t r = type.getRank();
  if (r < 2 || !type.hasStaticShape())
    return false;
  for (int64_t i = 0; i + 2 < r; ++i)
    if (type.getDimSize(i) != 1)
      return false;
  int64_t sq = type.getDimSize(r - 2), skv = type.getDimSize(r - 1);
  if (sq > skv)
    return false; // Rows without keys: the op's zeros would differ.
  auto values = cond.getValues<bool>();
  auto it = values.begin();
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < skv; ++j, ++it)
      if ((*it == visibleWhenTrue) != (j <= i + (skv - sq)))
        return false;
  return true;
}

MatchOr<MaskSelect> matchMaskSelect(tosa::SelectOp sel) {
  DenseElementsAttr cond;
  if (!matchPattern(sel.getPred(), m_Constant(&cond)))
    return mismatch("select condition is not a constant");
  MaskSelect m;
  m.scores = sel.getOnTrue();
  bool visibleWhenTrue = true;
  std::optional<double> fill = getSplatFloat(sel.getOnFalse());
  if (!fill) {
    // select(hidden, fill, scores), as masked_fill writes it.
    fill = getSplatFloat(sel.getOnTrue());
    m.scores = sel.getOnFalse();
    visibleWhenTrue = false;
  }
  if (!fill)
    return mismatch("select does not choose between the scores and a "
                    "constant");
  // A fill that does not vanish under exp would not be a mask.
  if (*fill > -1.0e4)
    return mismatch("select fill value " + std::to_string(*fill) +
                    " is not a large negative constant");
  m.fill = *fill;
  m.isCausal = isCausalPattern(cond, visibleWhenTrue);
  if (!m.isCausal)
    m.booleanMask = BooleanMask{cond, visibleWhenTrue, *fill};
  return m;
}

/// The op hides causal keys outright. A causal select with a finite fill is
/// the same only while each row keeps a visible score far above the fill;
/// an additive mask can push every visible score of a row down to it
/// (padding written as finfo.min), and then the filled keys count. Such a
/// pair is left unfused; a fill of -inf has no such rows.
static bool finiteCausalFillWithMask(const ScoresWalk &w, std::string &why) {
  if (!w.isCausal || !w.mask || std::isinf(w.causalFill))
    return false;
  char fill[32];
  std::snprintf(fill, sizeof(fill), "%g", w.causalFill);
  why = std::string("a mask is added to scores whose causal select fills "
                    "with a finite ") +
        fill +
        ": rows whose visible keys are all masked would differ (fill with "
        "-inf to fuse)";
  return true;
}

/// `tanh(x * a) * c` with splat constants, a = 1 / c to the rounding of
/// the element type and c > 0: the soft cap `c * tanh(x / c)`. Returns c
/// and sets `x`; nullopt when `mul` is not of that form.
static std::optional<double> matchSoftcap(tosa::MulOp mul, Value &x) {
  for (int i = 0; i < 2; ++i) {
    auto tanh = mul->getOperand(i).getDefiningOp<tosa::TanhOp>();
    std::optional<double> c = getSplatFloat(mul->getOperand(1 - i));
    if (!tanh || !c || !(*c > 0) || !std::isfinite(*c) || !tanh->hasOneUse())
      continue;
    auto inner = tanh.getInput().getDefiningOp<tosa::MulOp>();
    if (!inner || !inner->hasOneUse() || !hasZeroShift(inner))
      continue;
    auto type = cast<FloatType>(getElementTypeOrSelf(inner.getType()));
    double tolerance = std::ldexp(1.0, 1 - int(type.getFPMantissaWidth()));
    for (int j = 0; j < 2; ++j) {
      std::optional<double> a = getSplatFloat(inner->getOperand(j));
      if (a && std::fabs(*a * *c - 1.0) <= tolerance) {
        x = inner->getOperand(1 - j);
        return *c;
      }
    }
  }
  return std::nullopt;
}

static bool walkScores(Value v, ArrayRef<Operation *> allowedUsers,
                       ScoresWalk &w, std::string &why) {
  bool otherUse = allowedUsers.empty()
                      ? !v.hasOneUse()
                      : llvm::any_of(v.getUsers(), [&](Operation *u) {
                          return !llvm::is_contained(allowedUsers, u);
                        });
  if (otherUse) {
    why = "scores have another use";
    return false;
  }
  ++w.progress;
  Operation *op = v.getDefiningOp();
  if (!op) {
    why = "scores are not computed by a tosa.matmul (block argument)";
    return false;
  }
  if (auto mm = dyn_cast<tosa::MatMulOp>(op)) {
    w.matmul = mm;
    return true;
  }
  if (auto reshape = dyn_cast<tosa::ReshapeOp>(op)) {
    std::optional<HeadView> view = matchHeadReshape(reshape);
    if (!view) {
      why = "scores reshape is not a merge of leading dims";
      return false;
    }
    w.views.push_back(*view);
    return walkScores(reshape.getInput1(), {}, w, why);
  }
  if (auto mul = dyn_cast<tosa::MulOp>(op)) {
    Value uncapped;
    if (std::optional<double> cap = matchSoftcap(mul, uncapped)) {
      if (w.softcap > 0) {
        why = "scores are soft-capped twice";
        return false;
      }
      // c * tanh(x / c) * s is not c * tanh(s * x / c).
      if (w.scaled) {
        why = "scores are scaled after the soft cap";
        return false;
      }
      w.softcap = *cap;
      return walkScores(uncapped, {}, w, why);
    }
    if (w.scaled) {
      why = "scores are scaled twice";
      return false;
    }
    if (!hasZeroShift(mul)) {
      why = "scale mul has a non-zero shift";
      return false;
    }
    Value scores = mul.getInput1(), factor = mul.getInput2();
    if (matchScale(scores) && !matchScale(factor))
      std::swap(scores, factor);
    MatchOr<double> s = matchScale(factor);
    if (!s) {
      why = s.getReason();
      return false;
    }
    w.scale *= *s;
    w.scaled = true;
    return walkScores(scores, {}, w, why);
  }
  if (auto add = dyn_cast<tosa::AddOp>(op)) {
    if (w.mask || w.booleanMask) {
      why = "scores have two masks";
      return false;
    }
    // (s + m) * c is not s * c + m: the op adds the mask after scaling
    // and capping.
    if (w.scaled) {
      why = "mask is added before the scale";
      return false;
    }
    if (w.softcap > 0) {
      why = "mask is added before the soft cap";
      return false;
    }
    ScoresWalk best;
    best.progress = -1;
    for (int i = 0; i < 2; ++i) {
      ScoresWalk trial = w;
      trial.mask = add->getOperand(1 - i);
      if (finiteCausalFillWithMask(trial, why))
        return false;
      std::string reason;
      if (walkScores(add->getOperand(i), {}, trial, reason)) {
        w = trial;
        return true;
      }
      if (trial.progress > best.progress) {
        best = trial;
        why = reason;
      }
    }
    return false;
  }
  if (auto sel = dyn_cast<tosa::SelectOp>(op)) {
    if (w.scaled) {
      why = "mask is selected before the scale";
      return false;
    }
    if (w.softcap > 0) {
      why = "mask is selected before the soft cap";
      return false;
    }
    MatchOr<MaskSelect> sm = matchMaskSelect(sel);
    if (!sm) {
      why = sm.getReason();
      return false;
    }
    if (w.isCausal || w.booleanMask) {
      why = "scores have two boolean masks";
      return false;
    }
    if (sm->isCausal) {
      w.isCausal = true;
      w.causalFill = sm->fill;
      if (finiteCausalFillWithMask(w, why))
        return false;
    } else {
      if (w.mask) {
        why = "scores have two masks";
        return false;
      }
      w.booleanMask = sm->booleanMask;
    }
    Value scores = sm->scores;
    return walkScores(scores, {}, w, why);
  }
  why = "scores are not computed by a tosa.matmul (found '" +
        op->getName().getStringRef().str() + "')";
  return false;
}

static bool isLastTwoSwap(ArrayRef<int32_t> perms) {
  int64_t n = perms.size();
  if (n < 2)
    return false;
  for (int64_t i = 0; i + 2 < n; ++i)
    if (perms[i] != i)
      return false;
  return perms[n - 2] == n - 1 && perms[n - 1] == n - 2;
}

/// Peels from a matmul operand what the fused op absorbs: merges of
/// [B, H] into one dim, constant scales, for K the transpose of the last two
/// dims, and for K/V the repetition to all query heads.
static MatchOr<AttentionOperand> peelOperand(Value v, Role role) {
  StringRef name = role == Role::Query ? "Q" : role == Role::Key ? "K" : "V";
  AttentionOperand r;
  bool merged = false, scaled = false;
  while (Operation *op = v.getDefiningOp()) {
    if (role != Role::Query && !r.repeat &&
        isa<tosa::TileOp, tosa::ReshapeOp>(op)) {
      if (MatchOr<RepeatedKV> rep = matchRepeatedKV(v)) {
        r.repeat = *rep;
        v = rep->source;
        continue;
      }
    }
    if (auto reshape = dyn_cast<tosa::ReshapeOp>(op)) {
      std::optional<HeadView> view = matchHeadReshape(reshape);
      if (!merged && view && reshape.getOutput().getType().getRank() == 3) {
        merged = true;
        v = reshape.getInput1();
        continue;
      }
      if (role == Role::Key && !r.swapped)
        return mismatch("K operand is a reshape, not a transpose");
      break;
    }
    if (auto transpose = dyn_cast<tosa::TransposeOp>(op)) {
      if (role != Role::Key || r.swapped)
        break;
      if (!isLastTwoSwap(transpose.getPerms()))
        return mismatch("K transpose permutation " +
                        formatList(transpose.getPerms()) +
                        " does not swap the last two dims");
      r.swapped = true;
      v = transpose.getInput1();
      continue;
    }
    if (auto mul = dyn_cast<tosa::MulOp>(op)) {
      if (role == Role::Value || scaled || !hasZeroShift(mul))
        break;
      Value next;
      for (int i = 0; i < 2 && !next; ++i) {
        MatchOr<double> s = matchScale(mul->getOperand(i));
        Value other = mul->getOperand(1 - i);
        if (s && other.getType() == mul.getOutput().getType()) {
          r.scale *= *s;
          next = other;
        }
      }
      if (!next)
        break;
      scaled = true;
      v = next;
      continue;
    }
    break;
  }
  RankedTensorType t = rankedType(v);
  if (!t || !t.hasStaticShape() || (t.getRank() != 3 && t.getRank() != 4))
    return mismatch(name + " source is not a static rank-3 or rank-4 tensor");
  if (t.getRank() == 4)
    r.view = HeadView{t.getDimSize(0), t.getDimSize(1)};
  r.source = v;
  return r;
}

MatchOr<AttentionMatch> matchAttention(tosa::MatMulOp outputMatmul) {
  // Probabilities: reshapes up to a softmax over the key axis.
  SmallVector<HeadView> views;
  Value probs = outputMatmul.getA();
  while (auto reshape = probs.getDefiningOp<tosa::ReshapeOp>()) {
    if (!probs.hasOneUse())
      return mismatch("probabilities have another use");
    std::optional<HeadView> view = matchHeadReshape(reshape);
    if (!view)
      return mismatch("probabilities reshape is not a merge of leading dims");
    views.push_back(*view);
    probs = reshape.getInput1();
  }
  if (!probs.hasOneUse())
    return mismatch("probabilities have another use");
  MatchOr<SoftmaxMatch> softmax = matchSoftmax(probs);
  if (!softmax)
    return mismatch("probabilities are not a softmax: " + softmax.getReason());
  RankedTensorType probsType = rankedType(softmax->input);
  if (!probsType)
    return mismatch("softmax input is not a ranked tensor");
  int64_t rank = probsType.getRank();
  if (softmax->axis != rank - 1)
    return mismatch("softmax axis " + llvm::Twine(softmax->axis) +
                    " is not the key axis");

  // Scores: scale, masks and reshapes down to matmul(Q, Kᵀ).
  ScoresWalk w;
  std::string why;
  if (!walkScores(softmax->input, softmax->inputUsers, w, why))
    return mismatch(why);
  llvm::append_range(views, w.views);

  AttentionMatch m;
  m.scoresMatmul = w.matmul;
  m.outputMatmul = outputMatmul;
  RankedTensorType qm = rankedType(w.matmul.getA()),
                   km = rankedType(w.matmul.getB()),
                   sm = rankedType(w.matmul.getOutput()),
                   vm = rankedType(outputMatmul.getB()),
                   om = rankedType(outputMatmul.getOutput());
  if (!qm || !km || !sm || !vm || !om || !qm.hasStaticShape() ||
      !km.hasStaticShape() || !vm.hasStaticShape())
    return mismatch("matmul shapes are not static");
  Type et = qm.getElementType();
  if (!isa<Float32Type, Float16Type, BFloat16Type>(et) ||
      km.getElementType() != et || sm.getElementType() != et ||
      vm.getElementType() != et || om.getElementType() != et)
    return mismatch("matmuls do not all use one f32/f16/bf16 element type");

  MatchOr<AttentionOperand> q = peelOperand(w.matmul.getA(), Role::Query);
  if (!q)
    return q.takeMismatch();
  MatchOr<AttentionOperand> k = peelOperand(w.matmul.getB(), Role::Key);
  if (!k)
    return k.takeMismatch();
  MatchOr<AttentionOperand> v = peelOperand(outputMatmul.getB(), Role::Value);
  if (!v)
    return v.takeMismatch();
  m.query = *q;
  m.key = *k;
  m.value = *v;

  // Grouped-query attention: K and V repeated alike.
  if (k->repeat.has_value() != v->repeat.has_value() ||
      (k->repeat && (k->repeat->groups != v->repeat->groups ||
                     k->repeat->interleaved != v->repeat->interleaved ||
                     !(k->repeat->repeatedView == v->repeat->repeatedView))))
    return mismatch("K and V are repeated differently");
  if (k->repeat)
    views.push_back(k->repeat->repeatedView);
  if (q->view)
    views.push_back(*q->view);

  // One split of the merged dim [B*H] into [B, H] for all 4-D views.
  int64_t n = qm.getDimSize(0);
  for (const HeadView &view : views)
    if (!(view == views.front()))
      return mismatch("4-D views disagree on batch and heads (" +
                      llvm::Twine(views.front().batch) + "x" +
                      llvm::Twine(views.front().heads) + " vs " +
                      llvm::Twine(view.batch) + "x" + llvm::Twine(view.heads) +
                      ")");
  Value out = outputMatmul.getOutput();
  std::optional<HeadView> outView;
  if (out.hasOneUse())
    if (auto reshape = dyn_cast<tosa::ReshapeOp>(*out.getUsers().begin()))
      if (reshape.getOutput().getType().getRank() == 4)
        if ((outView = matchHeadReshape(reshape)))
          m.outputReshape = reshape;
  HeadView chosen = !views.empty() ? views.front()
                    : outView      ? *outView
                                   : HeadView{n, 1};
  if (chosen.batch * chosen.heads != n)
    return mismatch("batch x heads does not match the matmul batch");
  if (m.outputReshape && !(*outView == chosen))
    m.outputReshape = {};
  m.batch = chosen.batch;
  m.heads = chosen.heads;
  m.kvHeads = m.heads;
  if (k->repeat) {
    m.groups = k->repeat->groups;
    m.kvHeads = m.heads / m.groups;
    m.interleavedGroups = k->repeat->interleaved;
  }

  m.scale = w.scale * q->scale * k->scale;
  float scale = static_cast<float>(m.scale);
  if (!std::isfinite(scale) || scale == 0.0f)
    return mismatch("scale " + std::to_string(m.scale) +
                    " is not finite and non-zero in f32");
  m.isCausal = w.isCausal;
  m.softcap = w.softcap;
  if (w.mask) {
    RankedTensorType mt = rankedType(w.mask);
    if (!mt || !mt.hasStaticShape())
      return mismatch("mask shape is not static");
  }
  m.mask = w.mask;
  m.booleanMask = w.booleanMask;
  return m;
}

bool isAttentionCandidate(Operation *op) {
  auto mm = dyn_cast<tosa::MatMulOp>(op);
  if (!mm)
    return false;
  Value a = mm.getA();
  while (auto reshape = a.getDefiningOp<tosa::ReshapeOp>())
    a = reshape.getInput1();
  Operation *def = a.getDefiningOp();
  return def && (isa<SoftmaxOp>(def) || isSoftmaxCandidate(def));
}

//===----------------------------------------------------------------------===//
// Sliding-window bands
//===----------------------------------------------------------------------===//

/// The values of a constant of shape [1, .., 1, n] along dimension `dim`
/// (every other dimension 1) as exact integers; nullopt otherwise.
static std::optional<SmallVector<int64_t>> integersAlong(Value v, int64_t dim,
                                                         int64_t n) {
  DenseElementsAttr attr;
  RankedTensorType type = rankedType(v);
  if (!type || !matchPattern(v, m_Constant(&attr)) || type.getRank() != 4)
    return std::nullopt;
  for (int64_t d = 0; d < 4; ++d)
    if (type.getDimSize(d) != (d == dim ? n : 1))
      return std::nullopt;
  SmallVector<int64_t> out;
  out.reserve(n);
  if (isa<FloatType>(attr.getElementType())) {
    for (APFloat x : attr.getValues<APFloat>()) {
      double d = x.convertToDouble();
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 0x1p52)
        return std::nullopt;
      out.push_back(static_cast<int64_t>(d));
    }
  } else if (attr.getElementType().isSignlessInteger()) {
    for (APInt x : attr.getValues<APInt>())
      out.push_back(x.getSExtValue());
  } else {
    return std::nullopt;
  }
  return out;
}

/// The window of `band` = select(L >= K, fill, 0) or select(L > K, fill, 0)
/// with L and K as matchWindowBand describes; sets `fill`.
static MatchOr<int64_t> matchBand(Value band, int64_t sq, int64_t skv,
                                  double &fill) {
  auto sel = band.getDefiningOp<tosa::SelectOp>();
  if (!sel)
    return mismatch("not a tosa.select");
  std::optional<double> hidden = getSplatFloat(sel.getOnTrue());
  std::optional<double> shown = getSplatFloat(sel.getOnFalse());
  if (!hidden || !shown || *shown != 0.0 || *hidden > -1.0e4)
    return mismatch("select does not choose between a large negative "
                    "constant and 0");
  fill = *hidden;
  Operation *cond = sel.getPred().getDefiningOp();
  bool strict = isa_and_nonnull<tosa::GreaterOp>(cond);
  if (!cond || !(strict || isa<tosa::GreaterEqualOp>(cond)))
    return mismatch("band condition is not a tosa.greater_equal or "
                    "tosa.greater");
  std::optional<SmallVector<int64_t>> limits =
      integersAlong(cond->getOperand(0), 2, sq);
  std::optional<SmallVector<int64_t>> keys =
      integersAlong(cond->getOperand(1), 3, skv);
  if (!limits || !keys)
    return mismatch("band compares no constant query limits [1, 1, Sq, 1] "
                    "with constant key positions [1, 1, 1, Skv]");
  // Hidden iff L[i] >= K[0] + j (L[i] - 1 for >), i.e.
  // j <= i + Skv - Sq - window.
  for (int64_t j = 0; j < skv; ++j)
    if ((*keys)[j] != (*keys)[0] + j)
      return mismatch("band's key positions are not consecutive");
  int64_t window = 0;
  for (int64_t i = 0; i < sq; ++i) {
    int64_t w = i + (skv - sq) - ((*limits)[i] - (strict ? 1 : 0)) + (*keys)[0];
    if (i > 0 && w != window)
      return mismatch("band's query limits do not move with the queries");
    window = w;
  }
  if (window < 1)
    return mismatch("band hides a query's own position");
  return window;
}

MatchOr<WindowBand> matchWindowBand(Value mask, int64_t sq, int64_t skv) {
  double fill = 0;
  MatchOr<int64_t> whole = matchBand(mask, sq, skv, fill);
  if (whole)
    return WindowBand{Value(), *whole};
  auto add = mask.getDefiningOp<tosa::AddOp>();
  if (!add)
    return mismatch("mask is neither a band nor a sum with one");
  std::string reason = whole.getReason();
  for (int i = 0; i < 2; ++i) {
    MatchOr<int64_t> w = matchBand(add->getOperand(i), sq, skv, fill);
    if (!w) {
      reason = w.getReason();
      continue;
    }
    if (!std::isinf(fill))
      return mismatch("band fills with a finite value next to another mask: "
                      "rows whose window that mask hides would differ");
    return WindowBand{add->getOperand(1 - i), *w};
  }
  return mismatch(reason);
}

} // namespace tfc::transformer::fusion
