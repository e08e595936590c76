//===- OpsConstants.cpp - ONNX operators whose results are known ---------===//
//
// Constant, ConstantOfShape, Shape, Size, Range, and Trilu and CumSum (folded
// where their input is known; written as a select with a constant mask and
// a product with a constant triangle where it is computed at run time).
//
//===----------------------------------------------------------------------===//

#include "Folding.h"
#include "GraphImporter.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace llvm;

namespace tfc::onnx_import {

namespace {

constexpr OnnxType kInt64 = onnx::TensorProto::INT64;

LogicalResult constant(NodeContext &ctx) {
  if (const onnx::AttributeProto *a = ctx.attr("value")) {
    HostTensor t;
    std::string error;
    if (!readTensor(a->t(), ctx.file(), t, error))
      return ctx.fail("value " + error);
    return ctx.setConstant(0, std::move(t));
  }
  if (const onnx::AttributeProto *a = ctx.attr("value_float"))
    return ctx.setConstant(
        0, HostTensor::ofFloats(onnx::TensorProto::FLOAT, {}, {a->f()}));
  if (const onnx::AttributeProto *a = ctx.attr("value_floats"))
    return ctx.setConstant(
        0, HostTensor::ofFloats(onnx::TensorProto::FLOAT,
                                {int64_t(a->floats_size())},
                                {a->floats().begin(), a->floats().end()}));
  if (const onnx::AttributeProto *a = ctx.attr("value_int"))
    return ctx.setConstant(0, HostTensor::ofInts(kInt64, {}, {a->i()}));
  if (const onnx::AttributeProto *a = ctx.attr("value_ints"))
    return ctx.setConstant(
        0, HostTensor::ofInts(kInt64, {int64_t(a->ints_size())},
                              {a->ints().begin(), a->ints().end()}));
  return ctx.fail("no value attribute that tfc reads (value, value_float(s), "
                  "value_int(s))");
}

LogicalResult constantOfShape(NodeContext &ctx) {
  const HostTensor *shape = ctx.constant(0);
  if (!shape)
    return ctx.fail("shape must be known when the model compiles");
  SmallVector<int64_t> dims;
  for (int64_t k = 0; k < shape->size(); ++k) {
    if (shape->integer(k) < 0)
      return ctx.fail("shape has a negative dimension");
    dims.push_back(shape->integer(k));
  }
  HostTensor value = HostTensor::ofFloats(onnx::TensorProto::FLOAT, {1}, {0});
  if (const onnx::AttributeProto *a = ctx.attr("value")) {
    std::string error;
    if (!readTensor(a->t(), ctx.file(), value, error))
      return ctx.fail("value " + error);
    if (value.size() != 1)
      return ctx.fail("value must hold one element");
  }
  if (numElements(dims) > (int64_t(1) << 28))
    return ctx.fail("the result has more than 2^28 elements");
  return ctx.setConstant(0,
                         HostTensor::filled(value.type, dims, value.number(0)));
}

LogicalResult shapeOp(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.shape(0);
  int64_t rank = int64_t(shape.size());
  int64_t start = ctx.attrInt("start", 0), end = ctx.attrInt("end", rank);
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i)
    dims.push_back(shape[size_t(i)]);
  int64_t n = int64_t(dims.size());
  return ctx.setConstant(0, HostTensor::ofInts(kInt64, {n}, std::move(dims)));
}

LogicalResult size(NodeContext &ctx) {
  return ctx.setConstant(
      0, HostTensor::ofInts(kInt64, {}, {numElements(ctx.shape(0))}));
}

LogicalResult range(NodeContext &ctx) {
  if (!ctx.allConstant())
    return ctx.fail("start, limit and delta must be known when the model "
                    "compiles");
  const HostTensor &start = *ctx.constant(0), &limit = *ctx.constant(1),
                   &delta = *ctx.constant(2);
  if (start.size() != 1 || limit.size() != 1 || delta.size() != 1)
    return ctx.fail("start, limit and delta must be scalars");
  if (start.type != limit.type || start.type != delta.type)
    return ctx.fail("start, limit and delta differ in element type");
  double d = delta.number(0);
  if (d == 0)
    return ctx.fail("delta is 0");
  double n = std::ceil((limit.number(0) - start.number(0)) / d);
  if (n > double(kMaxFoldElements))
    return ctx.fail("the range has more than 2^20 elements");
  int64_t count = n > 0 ? int64_t(n) : 0;
  HostTensor out;
  out.type = start.type;
  out.shape = {count};
  for (int64_t i = 0; i < count; ++i) {
    if (out.isFloat())
      out.floats.push_back(
          roundToType(start.number(0) + double(i) * d, out.type));
    else if (std::optional<int64_t> v =
                 checkedMulAdd(i, delta.ints[0], start.ints[0]))
      out.ints.push_back(*v);
    else
      return ctx.fail("the range leaves the int64 range");
  }
  return ctx.setConstant(0, std::move(out));
}

/// Whether element (i, j) of a matrix survives Trilu(k, upper).
bool kept(int64_t i, int64_t j, int64_t k, bool upper) {
  return upper ? j - i >= k : j - i <= k;
}

LogicalResult trilu(NodeContext &ctx) {
  ArrayRef<int64_t> shape = ctx.shape(0);
  if (shape.size() < 2)
    return ctx.fail("the input has rank " + Twine(shape.size()) +
                    ", Trilu needs 2 or more");
  int64_t k = 0;
  if (ctx.has(1)) {
    const HostTensor *c = ctx.constant(1);
    if (!c)
      return ctx.fail("k must be known when the model compiles");
    if (c->size() != 1)
      return ctx.fail("k must be a scalar");
    k = c->integer(0);
  }
  bool upper = ctx.attrInt("upper", 1) != 0;
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if (const HostTensor *c = ctx.constant(0)) {
    HostTensor out = *c;
    for (int64_t e = 0; e < c->size(); ++e) {
      int64_t j = e % cols, i = (e / cols) % rows;
      if (kept(i, j, k, upper))
        continue;
      if (out.isFloat())
        out.floats[size_t(e)] = 0;
      else
        out.ints[size_t(e)] = 0;
    }
    return ctx.setConstant(0, std::move(out));
  }
  if (numElements({rows, cols}) > kMaxMaskElements)
    return ctx.fail("the mask of an input computed at run time would have "
                    "more than 2^26 elements");
  HostTensor mask;
  mask.type = onnx::TensorProto::BOOL;
  mask.shape = {rows, cols};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.ints.push_back(kept(i, j, k, upper));
  Value keep = ctx.constantOp(mask);
  Value x = ctx.value(0);
  auto t = cast<RankedTensorType>(x.getType());
  keep = ctx.tb.expandToRank(keep, t.getRank());
  Value zero = ctx.tb.splat(0.0, t.getElementType(), t.getRank());
  return ctx.setResult(0, ctx.tb.select(keep, x, zero));
}

LogicalResult cumSum(NodeContext &ctx) {
  const HostTensor *axisTensor = ctx.constant(1);
  if (!axisTensor)
    return ctx.fail("axis must be known when the model compiles");
  if (axisTensor->size() != 1)
    return ctx.fail("axis must be a scalar");
  ArrayRef<int64_t> shape = ctx.shape(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(axisTensor->integer(0), int64_t(shape.size()), "axis");
  if (failed(axis))
    return failure();
  bool exclusive = ctx.attrInt("exclusive", 0) != 0;
  bool reverse = ctx.attrInt("reverse", 0) != 0;
  int64_t n = shape[size_t(*axis)];
  // Whether input position p adds to output position q.
  auto adds = [&](int64_t p, int64_t q) {
    if (reverse)
      return exclusive ? p > q : p >= q;
    return exclusive ? p < q : p <= q;
  };
  if (const HostTensor *c = ctx.constant(0)) {
    SmallVector<int64_t> st = strides(shape);
    int64_t stride = st[size_t(*axis)];
    HostTensor out = *c;
    for (int64_t e = 0; e < c->size(); ++e) {
      int64_t q = (e / stride) % n, base = e - q * stride;
      double sum = 0;
      int64_t isum = 0;
      for (int64_t p = 0; p < n; ++p) {
        if (!adds(p, q))
          continue;
        if (c->isFloat())
          sum += c->floats[size_t(base + p * stride)];
        else
          isum += c->ints[size_t(base + p * stride)];
      }
      if (c->isFloat())
        out.floats[size_t(e)] = roundToType(sum, c->type);
      else
        out.ints[size_t(e)] = isum;
    }
    return ctx.setConstant(0, std::move(out));
  }
  // At run time: x moved to [rest, n] times a constant [n, n] 0/1 matrix,
  // in f32 (integers as exported position ids are, exact below 2^24).
  Value x = ctx.value(0);
  auto t = cast<RankedTensorType>(x.getType());
  Type et = t.getElementType();
  if (!isa<FloatType>(et) && !et.isInteger(32) && !et.isInteger(64))
    return ctx.fail("input type " + typeName(ctx.onnxTypeOf(0)) +
                    " is not supported");
  int64_t rank = t.getRank();
  SmallVector<int32_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      perm.push_back(int32_t(d));
  perm.push_back(int32_t(*axis));
  SmallVector<int32_t> back(static_cast<size_t>(rank), 0);
  for (auto [i, p] : llvm::enumerate(perm))
    back[size_t(p)] = int32_t(i);
  Value moved = ctx.tb.transpose(x, perm);
  SmallVector<int64_t> movedShape(
      cast<RankedTensorType>(moved.getType()).getShape());
  int64_t rest = numElements(movedShape) / std::max<int64_t>(n, 1);
  Type f32 = ctx.b().getF32Type();
  Value rows = ctx.tb.reshape(ctx.tb.cast(moved, f32), {1, rest, n});
  if (numElements({n, n}) > kMaxMaskElements)
    return ctx.fail("the triangle of an input computed at run time would "
                    "have more than 2^26 elements");
  HostTensor tri;
  tri.type = onnx::TensorProto::FLOAT;
  tri.shape = {1, n, n};
  for (int64_t p = 0; p < n; ++p)
    for (int64_t q = 0; q < n; ++q)
      tri.floats.push_back(adds(p, q) ? 1.0 : 0.0);
  Value triangle = createConstant(ctx.b(), ctx.tb.getLoc(), tri);
  Value sums = ctx.tb.matmul(rows, triangle);
  Value shaped = ctx.tb.reshape(sums, movedShape);
  return ctx.setResult(0, ctx.tb.cast(ctx.tb.transpose(shaped, back), et));
}

} // namespace

void registerConstantOps(ConverterMap &map) {
  map["Constant"] = constant;
  map["ConstantOfShape"] = constantOfShape;
  map["Shape"] = shapeOp;
  map["Size"] = size;
  map["Range"] = range;
  map["Trilu"] = trilu;
  map["CumSum"] = cumSum;
}

} // namespace tfc::onnx_import
