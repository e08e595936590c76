//===- TransformerOps.cpp - The transformer dialect's ops -----------------===//
//
// Verifiers, result type inference and the decompositions back to TOSA and
// linalg primitives (the unfused path) of attention, softmax and layer_norm;
// the collectives' verifiers.
//
//===----------------------------------------------------------------------===//

#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace tfc::transformer;

#include "tfc/Dialect/Transformer/IR/TransformerOpsDialect.cpp.inc"

void TransformerDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tfc/Dialect/Transformer/IR/TransformerOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "tfc/Dialect/Transformer/IR/TransformerOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// Formats a shape for diagnostics: [2, ?, 64].
static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleave(
      shape, os,
      [&](int64_t d) {
        if (ShapedType::isDynamic(d))
          os << "?";
        else
          os << d;
      },
      ", ");
  os << "]";
  return s;
}

/// Two dimensions agree unless both are static and differ.
static bool dimsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

static bool shapesAgree(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (auto [x, y] : llvm::zip_equal(a, b))
    if (!dimsAgree(x, y))
      return false;
  return true;
}

static bool allStatic(ValueRange values) {
  return llvm::all_of(values, [](Value v) {
    return cast<RankedTensorType>(v.getType()).hasStaticShape();
  });
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

double AttentionOp::getEffectiveScale() {
  if (std::optional<APFloat> s = getScale())
    return s->convertToDouble();
  int64_t d = getQuery().getType().getDimSize(3);
  return 1.0 / std::sqrt(static_cast<double>(d));
}

double AttentionOp::getEffectiveSoftcap() {
  if (std::optional<APFloat> c = getSoftcap())
    return c->convertToDouble();
  return 0.0;
}

int64_t AttentionOp::getEffectiveWindow() {
  if (std::optional<uint64_t> w = getWindow())
    return static_cast<int64_t>(*w);
  return 0;
}

LogicalResult AttentionOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferredReturnTypes) {
  if (operands.size() < 3)
    return failure();
  auto q = dyn_cast<RankedTensorType>(operands[0].getType());
  auto v = dyn_cast<RankedTensorType>(operands[2].getType());
  if (!q || !v || q.getRank() != 4 || v.getRank() != 4)
    return failure();
  inferredReturnTypes.push_back(RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
      q.getElementType()));
  return success();
}

LogicalResult AttentionOp::verify() {
  RankedTensorType q = getQuery().getType(), k = getKey().getType(),
                   v = getValue().getType();
  auto checkRank = [&](RankedTensorType t, StringRef name,
                       StringRef layout) -> LogicalResult {
    if (t.getRank() == 4)
      return success();
    return emitOpError() << name << " must have rank 4 " << layout << ", got "
                         << t;
  };
  if (failed(checkRank(q, "query", "[B, Hq, Sq, D]")) ||
      failed(checkRank(k, "key", "[B, Hkv, Skv, D]")) ||
      failed(checkRank(v, "value", "[B, Hkv, Skv, Dv]")))
    return failure();

  // K and V of one type: the query's, or f16/bf16 under an f32 query (the
  // CPU kernels' form: K and V read as stored, widened exactly).
  Type et = q.getElementType();
  if (v.getElementType() != k.getElementType())
    return emitOpError() << "value element type " << v.getElementType()
                         << " differs from key element type "
                         << k.getElementType();
  if (k.getElementType() != et &&
      !(et.isF32() &&
        (k.getElementType().isF16() || k.getElementType().isBF16())))
    return emitOpError() << "key element type " << k.getElementType()
                         << " differs from query element type " << et
                         << " (only an f32 query may take f16 or bf16 keys)";

  int64_t b = q.getDimSize(0), hq = q.getDimSize(1), sq = q.getDimSize(2),
          d = q.getDimSize(3);
  int64_t hkv = k.getDimSize(1), skv = k.getDimSize(2), dv = v.getDimSize(3);
  SmallVector<int64_t> expectedK = {b, hkv, skv, d};
  if (!shapesAgree(k.getShape(), expectedK))
    return emitOpError() << "key must have shape [B, Hkv, Skv, D] = "
                         << formatShape(expectedK)
                         << " (batch and head dim from query), got "
                         << formatShape(k.getShape());
  SmallVector<int64_t> expectedV = {b, hkv, skv, dv};
  if (!shapesAgree(v.getShape(), expectedV))
    return emitOpError() << "value must have shape [B, Hkv, Skv, Dv] = "
                         << formatShape(expectedV)
                         << " (batch, heads and keys from key), got "
                         << formatShape(v.getShape());
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      (hkv == 0 || hq % hkv != 0))
    return emitOpError() << "key/value heads (" << hkv
                         << ") must divide query heads (" << hq << ")";
  if (int64_t d = q.getDimSize(3); d == 0)
    return emitOpError() << "head dimension (query and key dim 3) must be "
                            "positive, got 0";

  if (Value mask = getMask()) {
    auto m = cast<RankedTensorType>(mask.getType());
    SmallVector<int64_t> full = {b, hq, sq, skv};
    // The query's type, or f32 (the CPU kernels' form of a 16-bit op).
    if (m.getElementType() != et && !m.getElementType().isF32())
      return emitOpError() << "mask element type " << m.getElementType()
                           << " differs from query element type " << et
                           << " (only f32 may mask a query of another type)";
    bool ok = m.getRank() <= 4;
    for (int64_t i = 0; ok && i < m.getRank(); ++i) {
      int64_t md = m.getDimSize(m.getRank() - 1 - i);
      int64_t fd = full[3 - i];
      ok = md == 1 || dimsAgree(md, fd);
    }
    if (!ok)
      return emitOpError() << "mask of shape " << formatShape(m.getShape())
                           << " is not broadcastable to [B, Hq, Sq, Skv] = "
                           << formatShape(full);
  }

  if (std::optional<APFloat> s = getScale()) {
    double sv = s->convertToDouble();
    if (!std::isfinite(sv) || sv == 0.0)
      return emitOpError() << "scale must be finite and non-zero, got " << sv;
  }
  if (std::optional<APFloat> c = getSoftcap()) {
    double cv = c->convertToDouble();
    if (!std::isfinite(cv) || !(cv > 0.0))
      return emitOpError() << "softcap must be finite and positive, got " << cv;
  }
  if (IntegerAttr w = getWindowAttr(); w && w.getInt() <= 0)
    return emitOpError() << "window must be positive, got " << w.getInt();

  SmallVector<int64_t> expectedR = {b, hq, sq, dv};
  RankedTensorType r = getResult().getType();
  if (!shapesAgree(r.getShape(), expectedR) || r.getElementType() != et)
    return emitOpError() << "result must have shape [B, Hq, Sq, Dv] = "
                         << formatShape(expectedR) << " of " << et << ", got "
                         << r;
  return success();
}

/// Masks scores [B, H, Sq, Skv] to -inf where key j is hidden from query i
/// (at position i + Skv - Sq): past it when `causal` (j > i + Skv - Sq),
/// `window` or more positions before it when `window` > 0. A window of Skv
/// keys or more hides none (and `j + window` could overflow).
static Value applyKeyLimits(OpBuilder &b, Location loc, Value scores,
                            bool causal, int64_t window) {
  auto type = cast<RankedTensorType>(scores.getType());
  int64_t sq = type.getDimSize(2), skv = type.getDimSize(3);
  if (window >= skv)
    window = 0;
  if (!causal && window == 0)
    return scores;
  Type et = type.getElementType();
  auto map = b.getMultiDimIdentityMap(4);
  SmallVector<utils::IteratorType> iters(4, utils::IteratorType::parallel);
  Value init = tensor::EmptyOp::create(b, loc, type.getShape(), et);
  auto generic = linalg::GenericOp::create(
      b, loc, type, ValueRange{scores}, ValueRange{init},
      ArrayRef<AffineMap>{map, map}, iters,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value i = linalg::IndexOp::create(nb, nloc, 2);
        Value j = linalg::IndexOp::create(nb, nloc, 3);
        Value offset = arith::ConstantIndexOp::create(nb, nloc, skv - sq);
        Value position = arith::AddIOp::create(nb, nloc, i, offset);
        Value visible;
        if (causal)
          visible = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::sle,
                                          j, position);
        if (window > 0) {
          // j > position - window (window < Skv: no overflow).
          Value w = arith::ConstantIndexOp::create(nb, nloc, window);
          Value inWindow = arith::CmpIOp::create(
              nb, nloc, arith::CmpIPredicate::sgt, j,
              arith::SubIOp::create(nb, nloc, position, w));
          visible = visible ? arith::AndIOp::create(nb, nloc, visible, inWindow)
                                  .getResult()
                            : inWindow;
        }
        Value negInf = arith::ConstantOp::create(
            nb, nloc,
            nb.getFloatAttr(et, -std::numeric_limits<double>::infinity()));
        Value r = arith::SelectOp::create(nb, nloc, visible, args[0], negInf);
        linalg::YieldOp::create(nb, nloc, r);
      });
  return generic.getResult(0);
}

FailureOr<SmallVector<Value>> AttentionOp::decomposeOperation(OpBuilder &b) {
  if (!allStatic((*this)->getOperands()))
    return failure();
  tfc::TosaBuilder t(b, getLoc());
  RankedTensorType qt = getQuery().getType(), kt = getKey().getType(),
                   vt = getValue().getType();
  Type et = qt.getElementType();
  int64_t batch = qt.getDimSize(0), hq = qt.getDimSize(1),
          sq = qt.getDimSize(2), d = qt.getDimSize(3);
  int64_t hkv = kt.getDimSize(1), skv = kt.getDimSize(2), dv = vt.getDimSize(3);
  int64_t group = hq / hkv;

  // Query heads of one group are contiguous, so [B, Hkv, G*Sq, D] views the
  // query without a copy and each K/V head is read once per group.
  // f16/bf16 graphs compute as frameworks do: matmuls accumulate in f32 and
  // the softmax runs in f32; probabilities and the result are rounded back.
  Type acc = b.getF32Type();
  // f16/bf16 keys and values under an f32 query: widened (exact).
  auto asQuery = [&](Value x) {
    return cast<RankedTensorType>(x.getType()).getElementType() == et
               ? x
               : t.cast(x, et);
  };
  Value q3 = t.reshape(getQuery(), {batch * hkv, group * sq, d});
  Value k3 = t.reshape(asQuery(getKey()), {batch * hkv, skv, d});
  Value v3 = t.reshape(asQuery(getValue()), {batch * hkv, skv, dv});
  Value scores = t.matmul(q3, t.transpose(k3, {0, 2, 1}), acc);
  scores = t.reshape(scores, {batch, hq, sq, skv});
  scores = t.mul(scores, t.splat(getEffectiveScale(), acc, 4));
  if (double cap = getEffectiveSoftcap(); cap > 0)
    scores = t.mul(t.tanh(t.mul(scores, t.splat(1.0 / cap, acc, 4))),
                   t.splat(cap, acc, 4));
  if (Value mask = getMask())
    scores = t.add(scores, t.cast(t.expandToRank(mask, 4), acc));
  if (getIsCausal() || getEffectiveWindow() > 0)
    scores = applyKeyLimits(b, getLoc(), scores, getIsCausal(),
                            getEffectiveWindow());

  // A row may see no key at all only with a mask, or causally with Sq > Skv.
  bool rowsMayBeEmpty = getMask() || (getIsCausal() && sq > skv);
  Value max = t.reduceMax(scores, 3);
  if (rowsMayBeEmpty) {
    Value negInf = t.splat(-std::numeric_limits<double>::infinity(), acc, 4);
    max = t.select(t.equal(max, negInf), t.splat(0.0, acc, 4), max);
  }
  Value e = t.exp(t.sub(scores, max));
  Value sum = t.reduceSum(e, 3);
  Value inv = t.reciprocal(sum);
  if (rowsMayBeEmpty)
    inv =
        t.select(t.equal(sum, t.splat(0.0, acc, 4)), t.splat(0.0, acc, 4), inv);
  Value probs = t.cast(t.mul(e, inv), et);
  Value out = t.cast(
      t.matmul(t.reshape(probs, {batch * hkv, group * sq, skv}), v3, acc), et);
  return SmallVector<Value>{t.reshape(out, {batch, hq, sq, dv})};
}

//===----------------------------------------------------------------------===//
// SoftmaxOp
//===----------------------------------------------------------------------===//

/// softmax and the norms: the result has the input's type.
static LogicalResult inferInputType(ValueRange operands,
                                    SmallVectorImpl<Type> &inferred) {
  if (operands.empty())
    return failure();
  inferred.push_back(operands[0].getType());
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferInputType(operands, inferredReturnTypes);
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = getInput().getType().getRank();
  int64_t dim = getDimension();
  if (rank == 0)
    return emitOpError() << "input must have rank at least 1";
  if (dim < 0 || dim >= rank)
    return emitOpError() << "dimension " << dim << " is out of range [0, "
                         << rank << ") for input " << getInput().getType();
  if (getResult().getType() != getInput().getType())
    return emitOpError() << "result type " << getResult().getType()
                         << " must equal input type " << getInput().getType();
  return success();
}

FailureOr<SmallVector<Value>> SoftmaxOp::decomposeOperation(OpBuilder &b) {
  if (!allStatic((*this)->getOperands()))
    return failure();
  tfc::TosaBuilder t(b, getLoc());
  int32_t axis = static_cast<int32_t>(getDimension());
  // In f32 for f16/bf16 too (as frameworks do), rounded back at the end.
  Type et = getInput().getType().getElementType();
  Value x = t.cast(getInput(), b.getF32Type());
  Value e = t.exp(t.sub(x, t.reduceMax(x, axis)));
  Value result = t.mul(e, t.reciprocal(t.reduceSum(e, axis)));
  return SmallVector<Value>{t.cast(result, et)};
}

//===----------------------------------------------------------------------===//
// LayerNormOp
//===----------------------------------------------------------------------===//

LogicalResult LayerNormOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferInputType(operands, inferredReturnTypes);
}

/// The checks layer_norm and rms_norm share: input rank >= 1, each
/// parameter [N] of the input's element type, a finite epsilon >= 0 and a
/// result of the input's type.
static LogicalResult verifyNorm(Operation *op, RankedTensorType x,
                                ArrayRef<std::pair<Value, const char *>> params,
                                APFloat epsilon, Type result) {
  if (x.getRank() == 0)
    return op->emitOpError() << "input must have rank at least 1";
  int64_t n = x.getDimSize(x.getRank() - 1);
  for (auto [v, name] : params) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() != 1 || !dimsAgree(t.getDimSize(0), n))
      return op->emitOpError()
             << name << " must have shape [N] = " << formatShape({n})
             << " (the last dimension of input), got "
             << formatShape(t.getShape());
    if (t.getElementType() != x.getElementType())
      return op->emitOpError()
             << name << " element type " << t.getElementType()
             << " differs from input element type " << x.getElementType();
  }
  double eps = epsilon.convertToDouble();
  if (!std::isfinite(eps) || eps < 0)
    return op->emitOpError()
           << "epsilon must be finite and non-negative, got " << eps;
  if (result != x)
    return op->emitOpError()
           << "result type " << result << " must equal input type " << x;
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getInput().getType(),
                    {{getGamma(), "gamma"}, {getBeta(), "beta"}}, getEpsilon(),
                    getResult().getType());
}

FailureOr<SmallVector<Value>> LayerNormOp::decomposeOperation(OpBuilder &b) {
  if (!allStatic((*this)->getOperands()))
    return failure();
  tfc::TosaBuilder t(b, getLoc());
  RankedTensorType xt = getInput().getType();
  // Statistics in f32 for f16/bf16 too (as frameworks do), rounded back at
  // the end.
  Type io = xt.getElementType(), et = b.getF32Type();
  int64_t rank = xt.getRank();
  int32_t axis = static_cast<int32_t>(rank - 1);
  int64_t n = xt.getDimSize(axis);
  Value invN = t.splat(1.0 / static_cast<double>(n), et, rank);
  Value x = t.cast(getInput(), et);
  Value mean = t.mul(t.reduceSum(x, axis), invN);
  Value centred = t.sub(x, mean);
  Value var = t.mul(t.reduceSum(t.mul(centred, centred), axis), invN);
  Value rstd =
      t.rsqrt(t.add(var, t.splat(getEpsilon().convertToDouble(), et, rank)));
  Value gamma = t.cast(t.expandToRank(getGamma(), rank), et);
  Value beta = t.cast(t.expandToRank(getBeta(), rank), et);
  Value y = t.add(t.mul(t.mul(centred, rstd), gamma), beta);
  return SmallVector<Value>{t.cast(y, io)};
}

//===----------------------------------------------------------------------===//
// RmsNormOp
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferredReturnTypes) {
  return inferInputType(operands, inferredReturnTypes);
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, getInput().getType(), {{getGamma(), "gamma"}},
                    getEpsilon(), getResult().getType());
}

FailureOr<SmallVector<Value>> RmsNormOp::decomposeOperation(OpBuilder &b) {
  if (!allStatic((*this)->getOperands()))
    return failure();
  tfc::TosaBuilder t(b, getLoc());
  RankedTensorType xt = getInput().getType();
  Type io = xt.getElementType(), f32 = b.getF32Type();
  int64_t rank = xt.getRank();
  int32_t axis = static_cast<int32_t>(rank - 1);
  int64_t n = xt.getDimSize(axis);
  Value x = t.cast(getInput(), f32);
  Value invN = t.splat(1.0 / static_cast<double>(n), f32, rank);
  Value meanSquare = t.mul(t.reduceSum(t.mul(x, x), axis), invN);
  Value rms = t.rsqrt(
      t.add(meanSquare, t.splat(getEpsilon().convertToDouble(), f32, rank)));
  // Rounded to the element type, then scaled by gamma in it.
  Value y = t.cast(t.mul(x, rms), io);
  return SmallVector<Value>{t.mul(y, t.expandToRank(getGamma(), rank))};
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult AllGatherOp::verify() {
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  int64_t rank = in.getRank();
  bool sameOuter = rank > 0 && out.getRank() == rank &&
                   in.getShape().drop_back() == out.getShape().drop_back() &&
                   in.getElementType() == out.getElementType();
  int64_t part = rank > 0 ? in.getDimSize(rank - 1) : 0;
  int64_t whole = rank > 0 ? out.getDimSize(rank - 1) : 0;
  if (!sameOuter ||
      (!ShapedType::isDynamic(part) && !ShapedType::isDynamic(whole) &&
       (part == 0 || whole % part != 0)))
    return emitOpError() << "result type " << out << " must be the input type "
                         << in
                         << " with its last axis a multiple of the input's";
  return success();
}

LogicalResult ParallelRankOp::verify() {
  if (getResult().getType().getDimSize(0) != 1)
    return emitOpError() << "result must be tensor<1xi32>, got "
                         << getResult().getType();
  return success();
}
