//===- TransformerToCPU.cpp - transformer ops to CPU micro-kernels --------===//
//
// Prepares transformer ops for the CPU micro-kernels (kernel form, see
// KernelForm.h) and declares the kernels they call; their bufferization
// (BufferizeToKernelCalls.cpp) emits the calls.
//
//===----------------------------------------------------------------------===//

#include "KernelForm.h"
#include "tfc/Codegen/CPU/KernelCalls.h"
#include "tfc/Conversion/Passes.h"
#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_CONVERTTRANSFORMERTOCPU
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// [d0, ..., dn] -> [d0 * ... * d(n-1), dn].
SmallVector<int64_t> rowsByLast(ArrayRef<int64_t> shape) {
  int64_t rows = 1;
  for (int64_t d : shape.drop_back())
    rows *= d;
  return {rows, shape.back()};
}

/// Rewrites an op into kernel form around itself: f32 operands (but an
/// f16 attention's K and V, which its kernel reads as they are: a
/// decoder's cache is not widened; and a bf16 attention's Q, K, V and
/// result, all of which its kernel reads and writes as they are), an f32
/// rank-4 mask, rows by the last dimension (softmax over an inner
/// dimension is transposed there and back).
struct PrepareForKernel : RewritePattern {
  PrepareForKernel(MLIRContext *ctx)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (!isa<transformer::AttentionOp, transformer::SoftmaxOp,
             transformer::LayerNormOp, transformer::RmsNormOp,
             transformer::AllReduceOp, transformer::AllGatherOp>(op) ||
        isKernelForm(op))
      return failure();
    if (!hasStaticShapes(op))
      return rewriter.notifyMatchFailure(op, "dynamic shapes");
    TosaBuilder t(rewriter, op->getLoc());
    Type f32 = rewriter.getF32Type();
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    Value result;
    if (auto a = dyn_cast<transformer::AttentionOp>(op)) {
      Value mask =
          a.getMask() ? t.expandToRank(t.cast(a.getMask(), f32), 4) : Value();
      auto isBf16 = [](Value v) {
        return cast<RankedTensorType>(v.getType()).getElementType().isBF16();
      };
      bool bf16Values =
          isBf16(a.getQuery()) && isBf16(a.getKey()) && isBf16(a.getValue());
      bool allBf16 = bf16Values && resultType.getElementType().isBF16();
      Type qo = allBf16 ? resultType.getElementType() : f32;
      auto fused = transformer::AttentionOp::create(
          rewriter, a.getLoc(), resultType.clone(qo), t.cast(a.getQuery(), qo),
          a.getKey(), a.getValue(), mask,
          rewriter.getF32FloatAttr(float(a.getEffectiveScale())),
          a.getIsCausal(), a.getSoftcapAttr(), a.getWindowAttr());
      if (bf16Values)
        fused->setAttr(kBf16ValuesAttr, rewriter.getUnitAttr());
      result = fused.getResult();
    } else if (auto s = dyn_cast<transformer::SoftmaxOp>(op)) {
      int64_t rank = resultType.getRank(), dim = s.getDimension();
      SmallVector<int32_t> perm;
      for (int64_t i = 0; i < rank; ++i)
        if (i != dim)
          perm.push_back(int32_t(i));
      perm.push_back(int32_t(dim));
      Value x = t.cast(s.getInput(), f32);
      if (dim != rank - 1)
        x = t.transpose(x, perm);
      SmallVector<int64_t> moved(
          cast<RankedTensorType>(x.getType()).getShape());
      auto rows = transformer::SoftmaxOp::create(
          rewriter, s.getLoc(), t.reshape(x, rowsByLast(moved)),
          rewriter.getI64IntegerAttr(1));
      result = t.reshape(rows, moved);
      if (dim != rank - 1) {
        SmallVector<int32_t> inverse(rank);
        for (int64_t i = 0; i < rank; ++i)
          inverse[perm[i]] = int32_t(i);
        result = t.transpose(result, inverse);
      }
    } else if (auto sum = dyn_cast<transformer::AllReduceOp>(op)) {
      // f32 rows: the partial sums of f16 and bf16 models are added in f32
      // and rounded once.
      Value rows = t.reshape(t.cast(sum.getInput(), f32),
                             rowsByLast(resultType.getShape()));
      result = t.reshape(transformer::AllReduceOp::create(
                             rewriter, sum.getLoc(), rows.getType(), rows),
                         resultType.getShape());
    } else if (auto gather = dyn_cast<transformer::AllGatherOp>(op)) {
      // f32 rows, gathered along the last axis.
      ArrayRef<int64_t> in = gather.getInput().getType().getShape();
      Value rows = t.reshape(t.cast(gather.getInput(), f32), rowsByLast(in));
      auto whole =
          RankedTensorType::get(rowsByLast(resultType.getShape()), f32);
      result = t.reshape(transformer::AllGatherOp::create(
                             rewriter, gather.getLoc(), whole, rows),
                         resultType.getShape());
    } else if (auto rms = dyn_cast<transformer::RmsNormOp>(op)) {
      // f32 rows; an f16/bf16 op rounds the normalised rows to its type
      // and multiplies by gamma there (its definition), outside the kernel.
      Type et = resultType.getElementType();
      int64_t n = resultType.getShape().back();
      Value gamma = et.isF32() ? rms.getGamma()
                               : t.constant(RankedTensorType::get({n}, f32), 1);
      auto rows = transformer::RmsNormOp::create(
          rewriter, rms.getLoc(),
          t.reshape(t.cast(rms.getInput(), f32),
                    rowsByLast(resultType.getShape())),
          gamma, rms.getEpsilonAttr());
      result = t.reshape(rows, resultType.getShape());
      if (!et.isF32())
        result = t.mul(t.cast(result, et),
                       t.expandToRank(rms.getGamma(), resultType.getRank()));
    } else {
      // f32, or bf16 throughout for the _bf16 kernel.
      auto ln = cast<transformer::LayerNormOp>(op);
      Type et = isAllBf16LayerNorm(op) ? resultType.getElementType() : f32;
      auto rows = transformer::LayerNormOp::create(
          rewriter, ln.getLoc(),
          t.reshape(t.cast(ln.getInput(), et),
                    rowsByLast(resultType.getShape())),
          t.cast(ln.getGamma(), et), t.cast(ln.getBeta(), et),
          ln.getEpsilonAttr());
      result = t.reshape(rows, resultType.getShape());
    }
    rewriter.replaceOp(op, t.cast(result, resultType.getElementType()));
    return success();
  }
};

/// transformer.parallel_rank as a call of the runtime's tfc_parallel_rank
/// (abi.h, "Tensor parallelism"), which returns this process's rank.
struct ParallelRankToCall : OpRewritePattern<transformer::ParallelRankOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(transformer::ParallelRankOp op,
                                PatternRewriter &rewriter) const override {
    StringRef name = "tfc_parallel_rank";
    auto module = op->getParentOfType<ModuleOp>();
    Type i32 = rewriter.getI32Type();
    if (!module.lookupSymbol(name)) {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(module.getBody());
      auto fn = func::FuncOp::create(rewriter, module.getLoc(), name,
                                     rewriter.getFunctionType({}, {i32}));
      fn.setPrivate();
    }
    auto call = func::CallOp::create(rewriter, op.getLoc(), name,
                                     TypeRange{i32}, ValueRange{});
    rewriter.replaceOpWithNewOp<tensor::FromElementsOp>(op, op.getType(),
                                                        call.getResults());
    return success();
  }
};

struct ConvertTransformerToCPUPass
    : impl::ConvertTransformerToCPUBase<ConvertTransformerToCPUPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    RewritePatternSet patterns(&getContext());
    populateTransformerToCPUPatterns(patterns);
    walkAndApplyPatterns(module, std::move(patterns));
    // Declare the kernels that bufferization will call.
    IRRewriter rewriter(&getContext());
    WalkResult r = module->walk([&](Operation *op) {
      if (!isa<transformer::TransformerDialect>(op->getDialect()))
        return WalkResult::advance();
      if (!isKernelForm(op) || !hasStaticShapes(op)) {
        op->emitError() << "cannot lower '" << op->getName()
                        << "' to the CPU: its shapes must be static";
        return WalkResult::interrupt();
      }
      KernelSignature sig = kernelFor(op);
      declareKernel(rewriter, module, sig.name, sig.args);
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

void populateTransformerToCPUPatterns(RewritePatternSet &patterns) {
  patterns.add<PrepareForKernel, ParallelRankToCall>(patterns.getContext());
}

} // namespace tfc
