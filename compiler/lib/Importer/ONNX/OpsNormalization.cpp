//===- OpsNormalization.cpp - ONNX softmax, norms and reductions
//-----------===//
//
// Softmax, LogSoftmax, LayerNormalization, RMSNormalization and the
// ReduceMean/Sum/Max/Min family, written as the primitives a framework
// computes (max-subtracted exponentials; mean as sum times 1/N; norms in
// f32 for f16/bf16 inputs), which is what the fusion passes recognise.
//
//===----------------------------------------------------------------------===//

#include "Folding.h"
#include "GraphImporter.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"

#include <cmath>

using namespace mlir;
using namespace llvm;

namespace tfc::onnx_import {

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

Value scalarLike(TosaBuilder &tb, Value like, double v) {
  return tb.splat(v, typeOf(like).getElementType(), typeOf(like).getRank());
}

/// sum over `axis` times 1/N.
Value mean(TosaBuilder &tb, Value x, int32_t axis) {
  int64_t n = typeOf(x).getDimSize(axis);
  return tb.mul(tb.reduceSum(x, axis), scalarLike(tb, x, 1.0 / double(n)));
}

} // namespace

Value softmaxOn(TosaBuilder &tb, Value x, int32_t axis, bool log) {
  Value shifted = tb.sub(x, tb.reduceMax(x, axis));
  Value e = tb.exp(shifted);
  Value sum = tb.reduceSum(e, axis);
  if (log)
    return tb.sub(shifted, tosa::LogOp::create(tb.builder(), tb.getLoc(),
                                               sum.getType(), sum));
  return tb.mul(e, tb.reciprocal(sum));
}

namespace {

template <bool Log> LogicalResult softmax(NodeContext &ctx) {
  if (!isa<FloatType>(ctx.type(0).getElementType()))
    return ctx.fail("input is not a floating-point tensor");
  int64_t rank = ctx.rank(0);
  FailureOr<int64_t> axis = ctx.normalizeAxis(
      ctx.attrInt("axis", ctx.opset < 13 ? 1 : -1), rank, "axis");
  if (failed(axis))
    return failure();
  Value x = ctx.value(0);
  if (ctx.opset >= 13 || *axis == rank - 1)
    return ctx.setResult(0, softmaxOn(ctx.tb, x, int32_t(*axis), Log));
  // Before opset 13: over the input flattened to 2-D at the axis.
  ArrayRef<int64_t> shape = ctx.shape(0);
  Value flat =
      ctx.tb.reshape(x, {numElements(shape.take_front(size_t(*axis))),
                         numElements(shape.drop_front(size_t(*axis)))});
  return ctx.setResult(0,
                       ctx.tb.reshape(softmaxOn(ctx.tb, flat, 1, Log), shape));
}

/// `f` on x with the trailing axes from `axis` flattened into one, in f32
/// for narrower floats, the result reshaped and cast back.
template <typename F>
LogicalResult overTrailing(NodeContext &ctx, int64_t axisAttr, F f) {
  if (!isa<FloatType>(ctx.type(0).getElementType()))
    return ctx.fail("input is not a floating-point tensor");
  ArrayRef<int64_t> shape = ctx.shape(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(axisAttr, int64_t(shape.size()), "axis");
  if (failed(axis))
    return failure();
  SmallVector<int64_t> flat(shape.take_front(size_t(*axis)));
  flat.push_back(numElements(shape.drop_front(size_t(*axis))));
  Value x = ctx.tb.reshape(ctx.value(0), flat);
  Type et = typeOf(x).getElementType();
  Value r = f(ctx.tb.cast(x, ctx.b().getF32Type()), flat);
  if (!r)
    return failure();
  return ctx.setResult(0, ctx.tb.reshape(ctx.tb.cast(r, et), shape));
}

/// Scale (and bias) as [1, ..., N] operands of the flattened input.
FailureOr<Value> param(NodeContext &ctx, size_t i, ArrayRef<int64_t> flat) {
  Value p = ctx.value(i);
  ArrayRef<int64_t> ps = typeOf(p).getShape();
  int64_t n = flat.back();
  if (numElements(ps) != n)
    return ctx.fail("input " + Twine(i) + " has " + Twine(numElements(ps)) +
                    " elements, the normalised axes " + Twine(n) +
                    " (broadcast scales are not supported)");
  SmallVector<int64_t> shape(flat.size() - 1, 1);
  shape.push_back(n);
  return ctx.tb.cast(ctx.tb.reshape(p, shape), ctx.b().getF32Type());
}

/// LayerNormalization (`centred`: (x - mean) over the mean square of that)
/// and RMSNormalization (x over its root mean square): then times the scale,
/// plus LayerNormalization's bias.
LogicalResult normalization(NodeContext &ctx, bool centred) {
  double eps = ctx.attrFloat("epsilon", 1e-5);
  if (centred && ctx.numResults() > 1 &&
      llvm::any_of(llvm::seq<int>(1, int(ctx.numResults())),
                   [&](int i) { return !ctx.node.output(i).empty(); }))
    return ctx.fail("the Mean and InvStdDev outputs are not supported");
  return overTrailing(ctx, ctx.attrInt("axis", -1),
                      [&](Value x, ArrayRef<int64_t> flat) -> Value {
                        TosaBuilder &tb = ctx.tb;
                        int32_t last = int32_t(flat.size() - 1);
                        Value d = centred ? tb.sub(x, mean(tb, x, last)) : x;
                        Value var = mean(tb, tb.mul(d, d), last);
                        Value r = tb.mul(
                            d, tb.rsqrt(tb.add(var, scalarLike(tb, var, eps))));
                        for (size_t i : {1, 2}) {
                          if (i == 2 && (!centred || !ctx.has(2)))
                            break;
                          FailureOr<Value> p = param(ctx, i, flat);
                          if (failed(p))
                            return nullptr;
                          r = i == 1 ? tb.mul(r, *p) : tb.add(r, *p);
                        }
                        return r;
                      });
}

enum class Reduce { Sum, Mean, Max, Min, L1, L2, SumSquare, LogSum, LogSumExp };

/// Whether the reduction takes the log or the square root of a sum, which
/// only float tensors give.
constexpr bool floatOnly(Reduce k) {
  return k == Reduce::Mean || k == Reduce::L2 || k == Reduce::LogSum ||
         k == Reduce::LogSumExp;
}

template <Reduce Kind> LogicalResult reduce(NodeContext &ctx) {
  int64_t rank = ctx.rank(0);
  // Axes: an attribute before opset 18 (13 for ReduceSum), an input since.
  int64_t inputSince = Kind == Reduce::Sum ? 13 : 18;
  SmallVector<int64_t> axes;
  bool given = false;
  if (ctx.opset < inputSince) {
    if (auto a = ctx.attrInts("axes")) {
      axes = *a;
      given = true;
    }
  } else if (ctx.has(1)) {
    const HostTensor *c = ctx.constant(1);
    if (!c)
      return ctx.fail("axes must be known when the model compiles");
    for (int64_t k = 0; k < c->size(); ++k)
      axes.push_back(c->integer(k));
    given = true;
  }
  if (axes.empty() && ctx.attrInt("noop_with_empty_axes", 0) && given)
    return ctx.setResult(0, ctx.value(0));
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  for (int64_t &a : axes) {
    FailureOr<int64_t> n = ctx.normalizeAxis(a, rank, "axis");
    if (failed(n))
      return failure();
    a = *n;
  }
  Value x = ctx.value(0);
  if (floatOnly(Kind) && !isa<FloatType>(typeOf(x).getElementType()))
    return ctx.fail(ctx.node.op_type() + " of integers is not supported");
  // The elementwise step before the sum, and the one after it; LogSumExp
  // subtracts the maximum first so that exp cannot overflow.
  Value shift;
  if (Kind == Reduce::LogSumExp) {
    shift = x;
    for (int64_t a : axes)
      shift = ctx.tb.reduceMax(shift, int32_t(a));
    x = ctx.tb.exp(ctx.tb.sub(x, shift));
  } else if (Kind == Reduce::L1) {
    x = tosa::AbsOp::create(ctx.b(), ctx.tb.getLoc(), typeOf(x), x);
  } else if (Kind == Reduce::L2 || Kind == Reduce::SumSquare) {
    x = ctx.tb.mul(x, x);
  }
  for (int64_t a : axes) {
    switch (Kind) {
    case Reduce::Sum:
    case Reduce::L1:
    case Reduce::L2:
    case Reduce::SumSquare:
    case Reduce::LogSum:
    case Reduce::LogSumExp:
      x = ctx.tb.reduceSum(x, int32_t(a));
      break;
    case Reduce::Mean:
      x = mean(ctx.tb, x, int32_t(a));
      break;
    case Reduce::Max:
      x = ctx.tb.reduceMax(x, int32_t(a));
      break;
    case Reduce::Min: {
      SmallVector<int64_t> shape(typeOf(x).getShape());
      shape[size_t(a)] = 1;
      x = tosa::ReduceMinOp::create(ctx.b(), ctx.tb.getLoc(),
                                    typeOf(x).clone(shape), x,
                                    ctx.b().getI32IntegerAttr(int32_t(a)));
      break;
    }
    }
  }
  if (Kind == Reduce::L2)
    x = ctx.tb.reciprocal(ctx.tb.rsqrt(x));
  if (Kind == Reduce::LogSum || Kind == Reduce::LogSumExp)
    x = tosa::LogOp::create(ctx.b(), ctx.tb.getLoc(), typeOf(x), x);
  if (Kind == Reduce::LogSumExp)
    x = ctx.tb.add(x, shift);
  if (!ctx.attrInt("keepdims", 1)) {
    SmallVector<int64_t> shape;
    for (int64_t d = 0; d < rank; ++d)
      if (!llvm::is_contained(axes, d))
        shape.push_back(typeOf(x).getDimSize(d));
    x = ctx.tb.reshape(x, shape);
  }
  return ctx.setResult(0, x);
}

} // namespace

void registerNormalizationOps(ConverterMap &map) {
  map["Softmax"] = softmax<false>;
  map["LogSoftmax"] = softmax<true>;
  map["LayerNormalization"] = [](NodeContext &ctx) {
    return normalization(ctx, /*centred=*/true);
  };
  map["RMSNormalization"] = [](NodeContext &ctx) {
    return normalization(ctx, /*centred=*/false);
  };
  map["ReduceSum"] = reduce<Reduce::Sum>;
  map["ReduceMean"] = reduce<Reduce::Mean>;
  map["ReduceMax"] = reduce<Reduce::Max>;
  map["ReduceMin"] = reduce<Reduce::Min>;
  map["ReduceL1"] = reduce<Reduce::L1>;
  map["ReduceL2"] = reduce<Reduce::L2>;
  map["ReduceSumSquare"] = reduce<Reduce::SumSquare>;
  map["ReduceLogSum"] = reduce<Reduce::LogSum>;
  map["ReduceLogSumExp"] = reduce<Reduce::LogSumExp>;
}

} // namespace tfc::onnx_import
