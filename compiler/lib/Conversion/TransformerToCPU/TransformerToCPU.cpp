//===- TransformerToCPU.cpp - transformer ops to CPU micro-kernels --------===//

#include "tfc/Conversion/Passes.h"
#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_CONVERTTRANSFORMERTOCPU
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// memref<?x...x?xf32, strided<[?, ...], offset: ?>>: the kernels' operand
/// type, which any f32 memref casts to.
MemRefType dynamicMemRefType(MLIRContext *ctx, int64_t rank) {
  SmallVector<int64_t> dyn(rank, ShapedType::kDynamic);
  auto layout = StridedLayoutAttr::get(ctx, ShapedType::kDynamic, dyn);
  return MemRefType::get(dyn, Float32Type::get(ctx), layout);
}

/// Declares `name` (once per module) with the C interface.
func::FuncOp getOrDeclareKernel(RewriterBase &rewriter, Operation *from,
                                StringRef name, TypeRange argTypes) {
  auto module = from->getParentOfType<ModuleOp>();
  if (auto fn = module.lookupSymbol<func::FuncOp>(name))
    return fn;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(module.getBody());
  auto fn = func::FuncOp::create(rewriter, module.getLoc(), name,
                                 rewriter.getFunctionType(argTypes, {}));
  fn.setPrivate();
  fn->setAttr("llvm.emit_c_interface", rewriter.getUnitAttr());
  return fn;
}

/// Helper that moves tensors across to the kernels' memrefs and back.
class KernelCall {
public:
  KernelCall(RewriterBase &rewriter, Location loc)
      : rewriter(rewriter), loc(loc), tosa(rewriter, loc) {}

  /// An f32 tensor as the kernels' dynamic memref type.
  Value operand(Value tensor) {
    tensor = tosa.cast(tensor, rewriter.getF32Type());
    auto tt = cast<RankedTensorType>(tensor.getType());
    auto buffer = bufferization::ToBufferOp::create(
        rewriter, loc, MemRefType::get(tt.getShape(), tt.getElementType()),
        tensor, /*read_only=*/true);
    return toDynamic(buffer);
  }

  /// A fresh aligned f32 buffer of `shape`.
  Value result(ArrayRef<int64_t> shape) {
    auto type = MemRefType::get(shape, rewriter.getF32Type());
    return memref::AllocOp::create(rewriter, loc, type,
                                   rewriter.getI64IntegerAttr(64));
  }

  Value toDynamic(Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    return memref::CastOp::create(
        rewriter, loc, dynamicMemRefType(rewriter.getContext(), type.getRank()),
        buffer);
  }

  /// The result buffer as a tensor of `elementType`.
  Value toTensor(Value buffer, Type elementType) {
    auto type = cast<MemRefType>(buffer.getType());
    Value t = bufferization::ToTensorOp::create(
        rewriter, loc,
        RankedTensorType::get(type.getShape(), type.getElementType()), buffer,
        rewriter.getUnitAttr(), rewriter.getUnitAttr());
    return tosa.cast(t, elementType);
  }

  void call(Operation *anchor, StringRef name, ValueRange args) {
    func::FuncOp fn =
        getOrDeclareKernel(rewriter, anchor, name, ValueRange(args).getTypes());
    func::CallOp::create(rewriter, loc, fn, args);
  }

  Value f32(double v) {
    return arith::ConstantOp::create(rewriter, loc,
                                     rewriter.getF32FloatAttr(float(v)));
  }
  Value i32(int32_t v) {
    return arith::ConstantOp::create(rewriter, loc,
                                     rewriter.getI32IntegerAttr(v));
  }

  TosaBuilder &tosaBuilder() { return tosa; }

private:
  RewriterBase &rewriter;
  Location loc;
  TosaBuilder tosa;
};

struct AttentionToKernel : OpRewritePattern<transformer::AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(transformer::AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.getType().hasStaticShape() ||
        !llvm::all_of(op->getOperandTypes(), [](Type t) {
          return cast<RankedTensorType>(t).hasStaticShape();
        }))
      return rewriter.notifyMatchFailure(op, "dynamic shapes");
    KernelCall k(rewriter, op.getLoc());
    Value q = k.operand(op.getQuery());
    Value key = k.operand(op.getKey());
    Value v = k.operand(op.getValue());
    Value mask = q;
    if (Value m = op.getMask())
      mask = k.operand(k.tosaBuilder().expandToRank(m, 4));
    Value out = k.result(op.getType().getShape());
    k.call(op, "tfc_uk_attention_f32",
           {q, key, v, mask, k.toDynamic(out), k.f32(op.getEffectiveScale()),
            k.i32(op.getMask() ? 1 : 0), k.i32(op.getIsCausal() ? 1 : 0)});
    rewriter.replaceOp(op, k.toTensor(out, op.getType().getElementType()));
    return success();
  }
};

/// [d0, ..., dn] -> [d0 * ... * d(n-1), dn].
SmallVector<int64_t> rowsByLast(ArrayRef<int64_t> shape) {
  int64_t rows = 1;
  for (int64_t d : shape.drop_back())
    rows *= d;
  return {rows, shape.back()};
}

struct SoftmaxToKernel : OpRewritePattern<transformer::SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(transformer::SoftmaxOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    if (!type.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic shapes");
    KernelCall k(rewriter, op.getLoc());
    TosaBuilder &t = k.tosaBuilder();
    int64_t rank = type.getRank(), dim = op.getDimension();
    // Move the softmax dimension last.
    SmallVector<int32_t> perm;
    for (int64_t i = 0; i < rank; ++i)
      if (i != dim)
        perm.push_back(int32_t(i));
    perm.push_back(int32_t(dim));
    Value x = op.getInput();
    if (dim != rank - 1)
      x = t.transpose(x, perm);
    SmallVector<int64_t> moved(cast<RankedTensorType>(x.getType()).getShape());
    Value in = k.operand(t.reshape(x, rowsByLast(moved)));
    Value out = k.result(rowsByLast(moved));
    k.call(op, "tfc_uk_softmax_f32", {in, k.toDynamic(out)});
    Value y = t.reshape(k.toTensor(out, type.getElementType()), moved);
    if (dim != rank - 1) {
      SmallVector<int32_t> inverse(rank);
      for (int64_t i = 0; i < rank; ++i)
        inverse[perm[i]] = int32_t(i);
      y = t.transpose(y, inverse);
    }
    rewriter.replaceOp(op, y);
    return success();
  }
};

struct LayerNormToKernel : OpRewritePattern<transformer::LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(transformer::LayerNormOp op,
                                PatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    if (!type.hasStaticShape() || !op.getGamma().getType().hasStaticShape() ||
        !op.getBeta().getType().hasStaticShape())
      return rewriter.notifyMatchFailure(op, "dynamic shapes");
    KernelCall k(rewriter, op.getLoc());
    TosaBuilder &t = k.tosaBuilder();
    Value in = k.operand(t.reshape(op.getInput(), rowsByLast(type.getShape())));
    Value gamma = k.operand(op.getGamma());
    Value beta = k.operand(op.getBeta());
    Value out = k.result(rowsByLast(type.getShape()));
    k.call(op, "tfc_uk_layer_norm_f32",
           {in, gamma, beta, k.toDynamic(out),
            k.f32(op.getEpsilon().convertToDouble())});
    rewriter.replaceOp(
        op, t.reshape(k.toTensor(out, type.getElementType()), type.getShape()));
    return success();
  }
};

struct ConvertTransformerToCPUPass
    : impl::ConvertTransformerToCPUBase<ConvertTransformerToCPUPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateTransformerToCPUPatterns(patterns);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
    WalkResult r = getOperation()->walk([](Operation *op) {
      if (isa<transformer::TransformerDialect>(op->getDialect())) {
        op->emitError() << "cannot lower '" << op->getName()
                        << "' to the CPU: its shapes must be static";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void populateTransformerToCPUPatterns(RewritePatternSet &patterns) {
  patterns.add<AttentionToKernel, SoftmaxToKernel, LayerNormToKernel>(
      patterns.getContext());
}

} // namespace tfc
