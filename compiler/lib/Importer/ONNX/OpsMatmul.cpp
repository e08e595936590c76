//===- OpsMatmul.cpp - ONNX MatMul and Gemm
//--------------------------------===//
//
// numpy matmul semantics on tosa.matmul ([N, M, K] x [N, K, N']): batch
// dimensions broadcast, flattened into TOSA's batch; a right-hand side
// without batch dimensions (a weight) takes the left's batch into its rows,
// as the Hugging Face importer's linear layers do.
//
//===----------------------------------------------------------------------===//

#include "Folding.h"
#include "GraphImporter.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"

using namespace mlir;
using namespace llvm;

namespace tfc::onnx_import {

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

} // namespace

FailureOr<Value> matmul(NodeContext &ctx, Value a, Value b) {
  TosaBuilder &tb = ctx.tb;
  SmallVector<int64_t> as(typeOf(a).getShape()), bs(typeOf(b).getShape());
  if (as.empty() || bs.empty())
    return ctx.fail("MatMul of a scalar");
  bool vecA = as.size() == 1, vecB = bs.size() == 1;
  if (vecA)
    as.insert(as.begin(), 1);
  if (vecB)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k)
    return ctx.fail("inner dimensions differ: " + Twine(k) + " and " +
                    Twine(bs[bs.size() - 2]));
  ArrayRef<int64_t> batchA = ArrayRef<int64_t>(as).drop_back(2),
                    batchB = ArrayRef<int64_t>(bs).drop_back(2);
  auto batch = broadcastShapes(batchA, batchB);
  if (!batch)
    return ctx.fail("batch dimensions do not broadcast");
  int64_t nb = numElements(*batch);
  // `v` of batch dims `own` and matrices rows x cols, broadcast (tiled) to
  // the common batch: [batch..., rows, cols].
  auto spread = [&](Value v, ArrayRef<int64_t> own, int64_t rows,
                    int64_t cols) {
    SmallVector<int64_t> shape(own), full(*batch);
    shape.append({rows, cols});
    full.append({rows, cols});
    v = tb.expandToRank(tb.reshape(v, shape), int64_t(full.size()));
    SmallVector<int64_t> multiples;
    for (auto [h, w] : llvm::zip_equal(typeOf(v).getShape(), ArrayRef(full)))
      multiples.push_back(h == w ? 1 : w);
    if (llvm::any_of(multiples, [](int64_t x) { return x != 1; }))
      v = tb.tile(v, multiples);
    return v;
  };
  Value result;
  if (numElements(batchB) == 1) {
    // B is one matrix: A's batch joins its rows (the product is tiled
    // where A's batch broadcasts against B's size-1 dims).
    Value a3 = tb.reshape(a, {1, numElements(batchA) * m, k});
    Value b3 = tb.reshape(b, {1, k, n});
    result = spread(tb.matmul(a3, b3), batchA, m, n);
  } else {
    result = tb.matmul(tb.reshape(spread(a, batchA, m, k), {nb, m, k}),
                       tb.reshape(spread(b, batchB, k, n), {nb, k, n}));
  }
  SmallVector<int64_t> out(*batch);
  if (!vecA)
    out.push_back(m);
  if (!vecB)
    out.push_back(n);
  return tb.reshape(result, out);
}

namespace {

/// Fails unless the first `count` inputs (those present) share one
/// floating-point element type.
LogicalResult floatOperands(NodeContext &ctx, StringRef op, size_t count) {
  Type et = ctx.type(0).getElementType();
  for (size_t i = 1; i < count; ++i)
    if (ctx.has(i) && ctx.type(i).getElementType() != et)
      return ctx.fail("inputs have different element types");
  if (!isa<FloatType>(et))
    return ctx.fail(op + " of " + typeName(ctx.onnxTypeOf(0)) +
                    " tensors is not supported");
  return success();
}

LogicalResult matmulOp(NodeContext &ctx) {
  if (failed(floatOperands(ctx, "MatMul", 2)))
    return failure();
  FailureOr<Value> r = matmul(ctx, ctx.value(0), ctx.value(1));
  if (failed(r))
    return failure();
  return ctx.setResult(0, *r);
}

LogicalResult gemm(NodeContext &ctx) {
  if (ctx.rank(0) != 2 || ctx.rank(1) != 2)
    return ctx.fail("A and B must be matrices");
  if (failed(floatOperands(ctx, "Gemm", 3)))
    return failure();
  if (ctx.has(2) && ctx.rank(2) > 2)
    return ctx.fail("C has rank " + Twine(ctx.rank(2)) + ", more than 2");
  Value a = ctx.value(0), b = ctx.value(1);
  if (ctx.attrInt("transA", 0))
    a = ctx.tb.transpose(a, {1, 0});
  if (ctx.attrInt("transB", 0))
    b = ctx.tb.transpose(b, {1, 0});
  FailureOr<Value> r = matmul(ctx, a, b);
  if (failed(r))
    return failure();
  Value y = *r;
  auto scalar = [&](double v) {
    return ctx.tb.splat(v, typeOf(y).getElementType(), 2);
  };
  double alpha = ctx.attrFloat("alpha", 1.0), beta = ctx.attrFloat("beta", 1.0);
  if (alpha != 1.0)
    y = ctx.tb.mul(y, scalar(alpha));
  if (ctx.has(2) && beta != 0.0) {
    Value c = ctx.tb.expandToRank(ctx.value(2), 2);
    if (!broadcastShapes(typeOf(c).getShape(), typeOf(y).getShape()))
      return ctx.fail("C does not broadcast to the product");
    if (beta != 1.0)
      c = ctx.tb.mul(c, scalar(beta));
    y = ctx.tb.add(y, c);
  }
  return ctx.setResult(0, y);
}

} // namespace

void registerMatmulOps(ConverterMap &map) {
  map["MatMul"] = matmulOp;
  map["Gemm"] = gemm;
}

} // namespace tfc::onnx_import
