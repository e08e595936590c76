//===- OpsElementwise.cpp - ONNX elementwise operators
//---------------------===//
//
// Arithmetic, comparisons, logic and activations, with numpy broadcasting
// (inputs reshaped to a common rank, as TOSA wants), folded on the host when
// every input is known. TOSA has no float division: a / b is written as
// a * reciprocal(b), a / sqrt(b) and 1 / sqrt(b) as rsqrt, so that the norm
// and attention patterns meet the forms the fusion passes know.
//
//===----------------------------------------------------------------------===//

#include "Folding.h"
#include "GraphImporter.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace llvm;

namespace tfc::onnx_import {

namespace {

using FloatFn = double (*)(ArrayRef<double>);
using IntFn = int64_t (*)(ArrayRef<int64_t>);

/// Makes `a` and `b` the same rank (leading size-1 dims), as TOSA's
/// broadcasting wants.
std::pair<Value, Value> sameRank(NodeContext &ctx, Value a, Value b) {
  int64_t rank = std::max(cast<RankedTensorType>(a.getType()).getRank(),
                          cast<RankedTensorType>(b.getType()).getRank());
  return {ctx.tb.expandToRank(a, rank), ctx.tb.expandToRank(b, rank)};
}

/// Checks that the inputs broadcast and share one element type; folds when
/// all are constant and the result is small. Returns true when folded.
FailureOr<bool> tryFold(NodeContext &ctx, OnnxType resultType, FloatFn f,
                        IntFn g, size_t first = 0) {
  SmallVector<int64_t> shape(ctx.shape(first));
  Type et = ctx.type(first).getElementType();
  for (size_t i = first + 1; i < ctx.numInputs(); ++i) {
    if (!ctx.has(i))
      continue;
    if (ctx.type(i).getElementType() != et)
      return ctx.fail("inputs 0 and " + Twine(i) +
                      " have different element types");
    auto joined = broadcastShapes(shape, ctx.shape(i));
    if (!joined)
      return ctx.fail("input shapes do not broadcast");
    shape = *joined;
  }
  if (!f || !ctx.allConstant() || numElements(shape) > kMaxFoldElements)
    return false;
  SmallVector<const HostTensor *> inputs;
  for (size_t i = first; i < ctx.numInputs(); ++i)
    if (ctx.has(i))
      inputs.push_back(ctx.constant(i));
  OnnxType type = resultType ? resultType : inputs.front()->type;
  // A null function pointer would make a callable function_ref.
  llvm::function_ref<int64_t(ArrayRef<int64_t>)> onInts;
  if (g)
    onInts = g;
  (void)ctx.setConstant(0, foldElementwise(inputs, shape, type, f, onInts));
  return true;
}

bool isFloat(NodeContext &ctx, size_t i) {
  return isa<FloatType>(ctx.type(i).getElementType());
}

/// `tosa.reciprocal(tosa.rsqrt(x))`: what Sqrt(x) becomes.
Value sqrtOperand(Value v) {
  if (auto rec = v.getDefiningOp<tosa::ReciprocalOp>())
    if (auto rs = rec.getInput1().getDefiningOp<tosa::RsqrtOp>())
      return rs.getInput1();
  return nullptr;
}

template <typename OpTy>
Value emitBinary(NodeContext &ctx, Value a, Value b, Type resultElement = {}) {
  auto [x, y] = sameRank(ctx, a, b);
  return OpTy::create(ctx.b(), ctx.tb.getLoc(),
                      ctx.tb.broadcastType(x, y, resultElement), x, y);
}

LogicalResult binaryOp(NodeContext &ctx, FloatFn f, IntFn g,
                       llvm::function_ref<Value(Value, Value)> emit,
                       bool boolResult = false) {
  OnnxType result = boolResult ? onnx::TensorProto::BOOL : 0;
  FailureOr<bool> folded = tryFold(ctx, result, f, g);
  if (failed(folded) || *folded)
    return failure(failed(folded));
  return ctx.setResult(0, emit(ctx.value(0), ctx.value(1)));
}

LogicalResult add(NodeContext &ctx) {
  return binaryOp(
      ctx, [](ArrayRef<double> v) { return v[0] + v[1]; },
      [](ArrayRef<int64_t> v) {
        return int64_t(uint64_t(v[0]) + uint64_t(v[1])); // wraps
      },
      [&](Value a, Value b) {
        auto [x, y] = sameRank(ctx, a, b);
        return ctx.tb.add(x, y);
      });
}

LogicalResult sub(NodeContext &ctx) {
  return binaryOp(
      ctx, [](ArrayRef<double> v) { return v[0] - v[1]; },
      [](ArrayRef<int64_t> v) {
        return int64_t(uint64_t(v[0]) - uint64_t(v[1])); // wraps
      },
      [&](Value a, Value b) {
        auto [x, y] = sameRank(ctx, a, b);
        return ctx.tb.sub(x, y);
      });
}

LogicalResult mul(NodeContext &ctx) {
  return binaryOp(
      ctx, [](ArrayRef<double> v) { return v[0] * v[1]; },
      [](ArrayRef<int64_t> v) {
        return int64_t(uint64_t(v[0]) * uint64_t(v[1])); // wraps
      },
      [&](Value a, Value b) {
        auto [x, y] = sameRank(ctx, a, b);
        return ctx.tb.mul(x, y);
      });
}

LogicalResult div(NodeContext &ctx) {
  FailureOr<bool> folded = tryFold(
      ctx, 0, [](ArrayRef<double> v) { return v[0] / v[1]; },
      [](ArrayRef<int64_t> v) -> int64_t {
        if (v[1] == -1) // INT64_MIN / -1 wraps
          return int64_t(0 - uint64_t(v[0]));
        return v[1] == 0 ? 0 : v[0] / v[1];
      });
  if (failed(folded) || *folded)
    return failure(failed(folded));
  if (!isFloat(ctx, 0)) {
    if (!ctx.type(0).getElementType().isInteger(32))
      return ctx.fail("integer division of " + typeName(ctx.onnxTypeOf(0)) +
                      " tensors computed at run time is not supported "
                      "(int32 is)");
    return ctx.setResult(
        0, emitBinary<tosa::IntDivOp>(ctx, ctx.value(0), ctx.value(1)));
  }
  Value inverse;
  if (const HostTensor *divisor = ctx.constant(1)) {
    // A constant divisor (sqrt(d_k), a count): its reciprocal, folded.
    inverse = ctx.constantOp(
        foldElementwise({divisor}, divisor->shape, divisor->type,
                        [](ArrayRef<double> v) { return 1.0 / v[0]; }));
  } else if (Value radicand = sqrtOperand(ctx.value(1))) {
    inverse = ctx.tb.rsqrt(radicand);
  } else {
    inverse = ctx.tb.reciprocal(ctx.value(1));
  }
  auto [x, y] = sameRank(ctx, ctx.value(0), inverse);
  return ctx.setResult(0, ctx.tb.mul(x, y));
}

LogicalResult pow(NodeContext &ctx) {
  if (ctx.type(0).getElementType() != ctx.type(1).getElementType()) {
    // Pow allows another exponent type: a constant one is cast here.
    const HostTensor *e = ctx.constant(1);
    if (!e || !isFloat(ctx, 0))
      return ctx.fail("an exponent of another type than the base must be a "
                      "constant");
    Value base = ctx.value(0);
    HostTensor exponent = e->castTo(ctx.onnxTypeOf(0));
    if (exponent.size() == 1 && exponent.floats[0] == 0.5)
      return ctx.setResult(0, ctx.tb.reciprocal(ctx.tb.rsqrt(base)));
    return ctx.setResult(
        0, emitBinary<tosa::PowOp>(ctx, base, ctx.constantOp(exponent)));
  }
  // TOSA's pow is float only: an integer one is folded on the host or
  // refused.
  if (!isFloat(ctx, 0) && !(ctx.constant(0) && ctx.constant(1)))
    return ctx.fail("integer Pow of " + typeName(ctx.onnxTypeOf(0)) +
                    " tensors computed at run time is not supported");
  return binaryOp(
      ctx, [](ArrayRef<double> v) { return std::pow(v[0], v[1]); }, nullptr,
      [&](Value a, Value b) { return emitBinary<tosa::PowOp>(ctx, a, b); });
}

/// Max, Min: variadic.
template <typename OpTy, bool IsMax> LogicalResult extremum(NodeContext &ctx) {
  FailureOr<bool> folded = tryFold(
      ctx, 0,
      [](ArrayRef<double> v) {
        double r = v[0];
        for (double x : v)
          r = IsMax ? std::max(r, x) : std::min(r, x);
        return r;
      },
      [](ArrayRef<int64_t> v) {
        int64_t r = v[0];
        for (int64_t x : v)
          r = IsMax ? std::max(r, x) : std::min(r, x);
        return r;
      });
  if (failed(folded) || *folded)
    return failure(failed(folded));
  Value r = ctx.value(0);
  for (size_t i = 1; i < ctx.numInputs(); ++i)
    r = emitBinary<OpTy>(ctx, r, ctx.value(i));
  return ctx.setResult(0, r);
}

template <typename OpTy, bool Swap>
LogicalResult compare(NodeContext &ctx, FloatFn f) {
  return binaryOp(
      ctx, f, nullptr,
      [&](Value a, Value b) {
        Type i1 = ctx.b().getI1Type();
        return Swap ? emitBinary<OpTy>(ctx, b, a, i1)
                    : emitBinary<OpTy>(ctx, a, b, i1);
      },
      /*boolResult=*/true);
}

LogicalResult equal(NodeContext &ctx) {
  return compare<tosa::EqualOp, false>(
      ctx, [](ArrayRef<double> v) { return double(v[0] == v[1]); });
}
LogicalResult greater(NodeContext &ctx) {
  return compare<tosa::GreaterOp, false>(
      ctx, [](ArrayRef<double> v) { return double(v[0] > v[1]); });
}
LogicalResult greaterOrEqual(NodeContext &ctx) {
  return compare<tosa::GreaterEqualOp, false>(
      ctx, [](ArrayRef<double> v) { return double(v[0] >= v[1]); });
}
LogicalResult less(NodeContext &ctx) {
  return compare<tosa::GreaterOp, true>(
      ctx, [](ArrayRef<double> v) { return double(v[0] < v[1]); });
}
LogicalResult lessOrEqual(NodeContext &ctx) {
  return compare<tosa::GreaterEqualOp, true>(
      ctx, [](ArrayRef<double> v) { return double(v[0] <= v[1]); });
}

template <typename OpTy> LogicalResult logical(NodeContext &ctx, FloatFn f) {
  return binaryOp(ctx, f, nullptr, [&](Value a, Value b) {
    return emitBinary<OpTy>(ctx, a, b);
  });
}

LogicalResult logicalNot(NodeContext &ctx) {
  FailureOr<bool> folded = tryFold(
      ctx, 0, [](ArrayRef<double> v) { return double(v[0] == 0); }, nullptr);
  if (failed(folded) || *folded)
    return failure(failed(folded));
  Value x = ctx.value(0);
  return ctx.setResult(
      0, tosa::LogicalNotOp::create(ctx.b(), ctx.tb.getLoc(), x.getType(), x));
}

/// A float unary op: folded, or `emit`.
LogicalResult unary(NodeContext &ctx, FloatFn f,
                    llvm::function_ref<Value(Value)> emit,
                    bool floatOnly = true) {
  if (floatOnly && !isFloat(ctx, 0))
    return ctx.fail("input 0 is " + typeName(ctx.onnxTypeOf(0)) +
                    ", the operator takes floating-point tensors");
  FailureOr<bool> folded = tryFold(ctx, 0, f, nullptr);
  if (failed(folded) || *folded)
    return failure(failed(folded));
  return ctx.setResult(0, emit(ctx.value(0)));
}

Value scalar(NodeContext &ctx, Value like, double v) {
  auto t = cast<RankedTensorType>(like.getType());
  return ctx.tb.splat(v, t.getElementType(), t.getRank());
}

template <typename OpTy> Value create(NodeContext &ctx, Value x) {
  return OpTy::create(ctx.b(), ctx.tb.getLoc(), x.getType(), x);
}

LogicalResult gelu(NodeContext &ctx) {
  std::string approximate = ctx.attrString("approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return ctx.fail("approximate '" + approximate +
                    "' is not one of 'none', 'tanh'");
  return unary(ctx, nullptr, [&](Value x) -> Value {
    TosaBuilder &tb = ctx.tb;
    Value half = tb.mul(x, scalar(ctx, x, 0.5));
    Value inner;
    if (approximate == "none") {
      inner = tb.erf(tb.mul(x, scalar(ctx, x, M_SQRT1_2)));
    } else {
      Value cube = tb.mul(tb.mul(x, x), x);
      Value poly = tb.add(x, tb.mul(cube, scalar(ctx, x, 0.044715)));
      inner = tb.tanh(tb.mul(poly, scalar(ctx, x, std::sqrt(2.0 / M_PI))));
    }
    return tb.mul(half, tb.add(inner, scalar(ctx, x, 1.0)));
  });
}

LogicalResult where(NodeContext &ctx) {
  if (!ctx.type(0).getElementType().isInteger(1))
    return ctx.fail("condition is not a bool tensor");
  if (ctx.type(1).getElementType() != ctx.type(2).getElementType())
    return ctx.fail("inputs 1 and 2 have different element types");
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(ctx.shape(0), ctx.shape(1));
  if (shape)
    shape = broadcastShapes(*shape, ctx.shape(2));
  if (!shape)
    return ctx.fail("input shapes do not broadcast");
  if (ctx.allConstant() && numElements(*shape) <= kMaxFoldElements) {
    const HostTensor *in[] = {ctx.constant(0), ctx.constant(1),
                              ctx.constant(2)};
    return ctx.setConstant(
        0, foldElementwise(
               in, *shape, in[1]->type,
               [](ArrayRef<double> v) { return v[0] != 0 ? v[1] : v[2]; },
               [](ArrayRef<int64_t> v) { return v[0] != 0 ? v[1] : v[2]; }));
  }
  int64_t rank = int64_t(shape->size());
  Value c = ctx.tb.expandToRank(ctx.value(0), rank);
  Value a = ctx.tb.expandToRank(ctx.value(1), rank);
  Value b = ctx.tb.expandToRank(ctx.value(2), rank);
  return ctx.setResult(0, ctx.tb.select(c, a, b));
}

LogicalResult castTo(NodeContext &ctx, OnnxType to) {
  Type et = ctx.graphType(to);
  if (!et && !ctx.constant(0))
    return ctx.fail("cast to " + typeName(to) + " is not supported");
  if (const HostTensor *c = ctx.constant(0))
    return ctx.setConstant(0, c->castTo(to));
  Value x = ctx.value(0);
  if (et.isInteger(1)) // x != 0
    return ctx.setResult(
        0, tosa::LogicalNotOp::create(
               ctx.b(), ctx.tb.getLoc(),
               cast<RankedTensorType>(x.getType()).clone(et),
               emitBinary<tosa::EqualOp>(ctx, x, scalar(ctx, x, 0.0),
                                         ctx.b().getI1Type())));
  if (isa<FloatType>(cast<RankedTensorType>(x.getType()).getElementType()) &&
      isa<IntegerType>(et)) {
    // ONNX truncates toward zero, tosa.cast rounds to nearest: cast the
    // truncated value, which is exact.
    Value negative = emitBinary<tosa::GreaterOp>(ctx, scalar(ctx, x, 0.0), x,
                                                 ctx.b().getI1Type());
    x = ctx.tb.select(negative, create<tosa::CeilOp>(ctx, x),
                      create<tosa::FloorOp>(ctx, x));
  }
  return ctx.setResult(0, ctx.tb.cast(x, et));
}

LogicalResult castOp(NodeContext &ctx) {
  if (!ctx.attr("to"))
    return ctx.fail("attribute 'to' is missing");
  return castTo(ctx, OnnxType(ctx.attrInt("to", 0)));
}

LogicalResult castLike(NodeContext &ctx) {
  return castTo(ctx, ctx.onnxTypeOf(1));
}

LogicalResult identity(NodeContext &ctx) {
  if (const HostTensor *c = ctx.constant(0))
    return ctx.setConstant(0, *c);
  return ctx.setResult(0, ctx.value(0));
}

LogicalResult dropout(NodeContext &ctx) {
  // Inference: the input unchanged; the mask, when asked for, all true.
  if (ctx.has(2)) {
    const HostTensor *training = ctx.constant(2);
    if (!training || training->number(0) != 0)
      return ctx.fail("training_mode must be a constant false");
  }
  if (failed(identity(ctx)))
    return failure();
  if (ctx.numResults() > 1)
    (void)ctx.setConstant(
        1, HostTensor::filled(onnx::TensorProto::BOOL, ctx.shape(0), 1));
  return success();
}

LogicalResult clip(NodeContext &ctx) {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  if (ctx.opset < 11) {
    lo = ctx.attrFloat("min", lo);
    hi = ctx.attrFloat("max", hi);
  } else {
    for (size_t i : {1, 2}) {
      if (!ctx.has(i))
        continue;
      const HostTensor *c = ctx.constant(i);
      if (!c)
        return ctx.fail("min and max must be constants");
      (i == 1 ? lo : hi) = c->number(0);
    }
  }
  Value x = ctx.value(0);
  if (!std::isinf(lo))
    x = emitBinary<tosa::MaximumOp>(ctx, x, scalar(ctx, x, lo));
  if (!std::isinf(hi))
    x = emitBinary<tosa::MinimumOp>(ctx, x, scalar(ctx, x, hi));
  return ctx.setResult(0, x);
}

#define UNARY(NAME, FOLD, EMIT)                                                \
  map[NAME] = [](NodeContext &ctx) {                                           \
    return unary(                                                              \
        ctx, [](ArrayRef<double> v) { return FOLD; },                          \
        [&](Value x) -> Value { return EMIT; });                               \
  }

} // namespace

void registerElementwiseOps(ConverterMap &map) {
  map["Add"] = add;
  map["Sub"] = sub;
  map["Mul"] = mul;
  map["Div"] = div;
  map["Pow"] = pow;
  map["Max"] = extremum<tosa::MaximumOp, true>;
  map["Min"] = extremum<tosa::MinimumOp, false>;
  map["Equal"] = equal;
  map["Greater"] = greater;
  map["GreaterOrEqual"] = greaterOrEqual;
  map["Less"] = less;
  map["LessOrEqual"] = lessOrEqual;
  map["And"] = [](NodeContext &ctx) {
    return logical<tosa::LogicalAndOp>(
        ctx, [](ArrayRef<double> v) { return double(v[0] && v[1]); });
  };
  map["Or"] = [](NodeContext &ctx) {
    return logical<tosa::LogicalOrOp>(
        ctx, [](ArrayRef<double> v) { return double(v[0] || v[1]); });
  };
  map["Xor"] = [](NodeContext &ctx) {
    return logical<tosa::LogicalXorOp>(
        ctx, [](ArrayRef<double> v) { return double(!v[0] != !v[1]); });
  };
  map["Not"] = logicalNot;
  UNARY("Sqrt", std::sqrt(v[0]), ctx.tb.reciprocal(ctx.tb.rsqrt(x)));
  UNARY("Reciprocal", 1.0 / v[0],
        sqrtOperand(x) ? ctx.tb.rsqrt(sqrtOperand(x)) : ctx.tb.reciprocal(x));
  UNARY("Exp", std::exp(v[0]), ctx.tb.exp(x));
  UNARY("Log", std::log(v[0]), create<tosa::LogOp>(ctx, x));
  UNARY("Erf", std::erf(v[0]), ctx.tb.erf(x));
  UNARY("Tanh", std::tanh(v[0]), ctx.tb.tanh(x));
  UNARY("Sigmoid", 1.0 / (1.0 + std::exp(-v[0])), ctx.tb.sigmoid(x));
  UNARY("Sin", std::sin(v[0]), create<tosa::SinOp>(ctx, x));
  UNARY("Cos", std::cos(v[0]), create<tosa::CosOp>(ctx, x));
  UNARY("Floor", std::floor(v[0]), create<tosa::FloorOp>(ctx, x));
  UNARY("Ceil", std::ceil(v[0]), create<tosa::CeilOp>(ctx, x));
  map["Relu"] = [](NodeContext &ctx) {
    return unary(
        ctx, [](ArrayRef<double> v) { return std::max(v[0], 0.0); },
        [&](Value x) -> Value {
          return emitBinary<tosa::MaximumOp>(ctx, x, scalar(ctx, x, 0.0));
        },
        /*floatOnly=*/false);
  };
  map["Neg"] = [](NodeContext &ctx) {
    return unary(
        ctx, [](ArrayRef<double> v) { return -v[0]; },
        [&](Value x) -> Value {
          auto [z, y] = sameRank(ctx, scalar(ctx, x, 0.0), x);
          return ctx.tb.sub(z, y);
        },
        /*floatOnly=*/false);
  };
  map["Abs"] = [](NodeContext &ctx) {
    return unary(
        ctx, [](ArrayRef<double> v) { return std::abs(v[0]); },
        [&](Value x) -> Value { return create<tosa::AbsOp>(ctx, x); },
        /*floatOnly=*/false);
  };
  map["IsNaN"] = [](NodeContext &ctx) {
    if (!isFloat(ctx, 0))
      return ctx.fail("input 0 is not a floating-point tensor");
    if (const HostTensor *c = ctx.constant(0))
      return ctx.setConstant(
          0, foldElementwise(
                 {c}, c->shape, onnx::TensorProto::BOOL,
                 [](ArrayRef<double> v) { return double(std::isnan(v[0])); }));
    Value x = ctx.value(0);
    Value same = emitBinary<tosa::EqualOp>(ctx, x, x, ctx.b().getI1Type());
    return ctx.setResult(0, create<tosa::LogicalNotOp>(ctx, same));
  };
  map["Gelu"] = gelu;
  map["Where"] = where;
  map["Cast"] = castOp;
  map["CastLike"] = castLike;
  map["Identity"] = identity;
  map["Dropout"] = dropout;
  map["Clip"] = clip;
}

} // namespace tfc::onnx_import
