//===- TosaBuilder.cpp - Build TOSA 1.0 graphs with shapes inferred -------===//

#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace tfc {

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

Value TosaBuilder::constant(RankedTensorType type, double value) {
  Type et = type.getElementType();
  Attribute scalar;
  if (isa<FloatType>(et))
    scalar = b.getFloatAttr(et, value);
  else
    scalar = b.getIntegerAttr(et, static_cast<int64_t>(value));
  auto attr = DenseElementsAttr::get(type, scalar);
  return tosa::ConstOp::create(b, loc, type, attr);
}

Value TosaBuilder::splat(double value, Type elementType, int64_t rank) {
  SmallVector<int64_t> ones(rank, 1);
  return constant(RankedTensorType::get(ones, elementType), value);
}

Value TosaBuilder::reshape(Value v, ArrayRef<int64_t> shape) {
  if (tensorType(v).getShape() == shape)
    return v;
  auto shapeType = tosa::shapeType::get(b.getContext(), shape.size());
  auto shapeAttr = DenseIntElementsAttr::get(
      RankedTensorType::get({static_cast<int64_t>(shape.size())},
                            b.getIndexType()),
      shape);
  Value shapeValue = tosa::ConstShapeOp::create(b, loc, shapeType, shapeAttr);
  auto type = RankedTensorType::get(shape, tensorType(v).getElementType());
  return tosa::ReshapeOp::create(b, loc, type, v, shapeValue);
}

Value TosaBuilder::transpose(Value v, ArrayRef<int32_t> perms) {
  RankedTensorType in = tensorType(v);
  SmallVector<int64_t> shape;
  for (int32_t p : perms)
    shape.push_back(in.getDimSize(p));
  auto type = RankedTensorType::get(shape, in.getElementType());
  return tosa::TransposeOp::create(b, loc, type, v,
                                   b.getDenseI32ArrayAttr(perms));
}

Value TosaBuilder::matmul(Value lhs, Value rhs, Type resultType) {
  RankedTensorType a = tensorType(lhs), c = tensorType(rhs);
  int64_t n = a.getDimSize(0) == 1 ? c.getDimSize(0) : a.getDimSize(0);
  auto type =
      RankedTensorType::get({n, a.getDimSize(1), c.getDimSize(2)},
                            resultType ? resultType : a.getElementType());
  return tosa::MatMulOp::create(b, loc, type, lhs, rhs);
}

RankedTensorType TosaBuilder::broadcastType(Value lhs, Value rhs,
                                            Type elementType) {
  RankedTensorType l = tensorType(lhs), r = tensorType(rhs);
  SmallVector<int64_t> shape;
  for (auto [x, y] : llvm::zip_equal(l.getShape(), r.getShape()))
    shape.push_back(x == 1 ? y : x);
  return RankedTensorType::get(shape,
                               elementType ? elementType : l.getElementType());
}

Value TosaBuilder::add(Value lhs, Value rhs) {
  return tosa::AddOp::create(b, loc, broadcastType(lhs, rhs), lhs, rhs);
}

Value TosaBuilder::sub(Value lhs, Value rhs) {
  return tosa::SubOp::create(b, loc, broadcastType(lhs, rhs), lhs, rhs);
}

Value TosaBuilder::mul(Value lhs, Value rhs) {
  RankedTensorType shiftType = RankedTensorType::get({1}, b.getI8Type());
  Value shift = tosa::ConstOp::create(
      b, loc, shiftType,
      DenseElementsAttr::get(shiftType, b.getI8IntegerAttr(0)));
  return tosa::MulOp::create(b, loc, broadcastType(lhs, rhs), lhs, rhs, shift);
}

Value TosaBuilder::maximum(Value lhs, Value rhs) {
  return tosa::MaximumOp::create(b, loc, broadcastType(lhs, rhs), lhs, rhs);
}

Value TosaBuilder::equal(Value lhs, Value rhs) {
  return tosa::EqualOp::create(b, loc, broadcastType(lhs, rhs, b.getI1Type()),
                               lhs, rhs);
}

Value TosaBuilder::greaterEqual(Value lhs, Value rhs) {
  return tosa::GreaterEqualOp::create(
      b, loc, broadcastType(lhs, rhs, b.getI1Type()), lhs, rhs);
}

Value TosaBuilder::select(Value cond, Value onTrue, Value onFalse) {
  RankedTensorType t = broadcastType(onTrue, onFalse);
  SmallVector<int64_t> shape(t.getShape());
  for (auto [s, c] : llvm::zip_equal(shape, tensorType(cond).getShape()))
    if (s == 1)
      s = c;
  auto type = RankedTensorType::get(shape, t.getElementType());
  return tosa::SelectOp::create(b, loc, type, cond, onTrue, onFalse);
}

Value TosaBuilder::exp(Value v) {
  return tosa::ExpOp::create(b, loc, v.getType(), v);
}
Value TosaBuilder::reciprocal(Value v) {
  return tosa::ReciprocalOp::create(b, loc, v.getType(), v);
}
Value TosaBuilder::rsqrt(Value v) {
  return tosa::RsqrtOp::create(b, loc, v.getType(), v);
}
Value TosaBuilder::erf(Value v) {
  return tosa::ErfOp::create(b, loc, v.getType(), v);
}
Value TosaBuilder::tanh(Value v) {
  return tosa::TanhOp::create(b, loc, v.getType(), v);
}

Value TosaBuilder::sigmoid(Value v) {
  return tosa::SigmoidOp::create(b, loc, v.getType(), v);
}

Value TosaBuilder::clampInt(Value v, int64_t lo, int64_t hi) {
  Type t = tensorType(v).getElementType();
  return tosa::ClampOp::create(b, loc, v.getType(), v, b.getIntegerAttr(t, lo),
                               b.getIntegerAttr(t, hi));
}

Value TosaBuilder::cast(Value v, Type elementType) {
  if (tensorType(v).getElementType() == elementType)
    return v;
  return tosa::CastOp::create(b, loc, tensorType(v).clone(elementType), v);
}

static RankedTensorType reducedType(Value v, int32_t axis) {
  SmallVector<int64_t> shape(tensorType(v).getShape());
  shape[axis] = 1;
  return tensorType(v).clone(shape);
}

Value TosaBuilder::reduceMax(Value v, int32_t axis) {
  return tosa::ReduceMaxOp::create(b, loc, reducedType(v, axis), v,
                                   b.getI32IntegerAttr(axis));
}

Value TosaBuilder::reduceSum(Value v, int32_t axis) {
  return tosa::ReduceSumOp::create(b, loc, reducedType(v, axis), v,
                                   b.getI32IntegerAttr(axis));
}

Value TosaBuilder::gather(Value values, Value indices) {
  RankedTensorType v = tensorType(values), i = tensorType(indices);
  auto type = RankedTensorType::get(
      {v.getDimSize(0), i.getDimSize(1), v.getDimSize(2)}, v.getElementType());
  return tosa::GatherOp::create(b, loc, type, values, indices);
}

static Value constShape(OpBuilder &b, Location loc, ArrayRef<int64_t> values) {
  auto shapeType = tosa::shapeType::get(b.getContext(), values.size());
  auto attr = DenseIntElementsAttr::get(
      RankedTensorType::get({static_cast<int64_t>(values.size())},
                            b.getIndexType()),
      values);
  return tosa::ConstShapeOp::create(b, loc, shapeType, attr);
}

Value TosaBuilder::slice(Value v, ArrayRef<int64_t> start,
                         ArrayRef<int64_t> size) {
  if (llvm::all_of(start, [](int64_t s) { return s == 0; }) &&
      tensorType(v).getShape() == size)
    return v;
  auto type = RankedTensorType::get(size, tensorType(v).getElementType());
  return tosa::SliceOp::create(b, loc, type, v, constShape(b, loc, start),
                               constShape(b, loc, size));
}

Value TosaBuilder::tile(Value v, ArrayRef<int64_t> multiples) {
  SmallVector<int64_t> shape(tensorType(v).getShape());
  for (auto [dim, m] : llvm::zip_equal(shape, multiples))
    dim *= m;
  return tosa::TileOp::create(b, loc, tensorType(v).clone(shape), v,
                              constShape(b, loc, multiples));
}

Value TosaBuilder::concat(ValueRange values, int32_t axis) {
  SmallVector<int64_t> shape(tensorType(values.front()).getShape());
  shape[axis] = 0;
  for (Value v : values)
    shape[axis] += tensorType(v).getDimSize(axis);
  return tosa::ConcatOp::create(b, loc, tensorType(values.front()).clone(shape),
                                values, b.getI32IntegerAttr(axis));
}

Value TosaBuilder::expandToRank(Value v, int64_t rank) {
  RankedTensorType t = tensorType(v);
  if (t.getRank() == rank)
    return v;
  SmallVector<int64_t> shape(rank - t.getRank(), 1);
  llvm::append_range(shape, t.getShape());
  return reshape(v, shape);
}

} // namespace tfc
