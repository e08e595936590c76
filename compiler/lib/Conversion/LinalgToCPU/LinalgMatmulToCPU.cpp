//===- LinalgMatmulToCPU.cpp - f32 matmuls to the packed GEMM kernel ------===//

#include "tfc/Conversion/KernelCalls.h"
#include "tfc/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_LINALGMATMULTOCPU
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// linalg.matmul / linalg.batch_matmul on f32 buffers with the default maps.
template <typename OpTy> struct MatmulToKernel : OpRewritePattern<OpTy> {
  MatmulToKernel(MLIRContext *ctx, StringRef kernel)
      : OpRewritePattern<OpTy>(ctx), kernel(kernel.str()) {}

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics() || op.hasUserDefinedMaps())
      return rewriter.notifyMatchFailure(op, "not a plain matmul on buffers");
    SmallVector<Value> operands(op.getDpsInputs());
    operands.push_back(op.getDpsInits()[0]);
    for (Value v : operands)
      if (!cast<MemRefType>(v.getType()).getElementType().isF32())
        return rewriter.notifyMatchFailure(op, "not f32");
    int64_t rank = cast<MemRefType>(operands[0].getType()).getRank();
    MemRefType dyn = dynamicF32MemRef(op.getContext(), rank);
    SmallVector<Value> args;
    for (Value v : operands)
      args.push_back(memref::CastOp::create(rewriter, op.getLoc(), dyn, v));
    declareKernel(rewriter, op->template getParentOfType<ModuleOp>(), kernel,
                  {dyn, dyn, dyn});
    rewriter.replaceOpWithNewOp<func::CallOp>(op, kernel, TypeRange(), args);
    return success();
  }

  std::string kernel;
};

struct LinalgMatmulToCPUPass
    : impl::LinalgMatmulToCPUBase<LinalgMatmulToCPUPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MatmulToKernel<linalg::MatmulOp>>(&getContext(),
                                                   "tfc_uk_matmul_f32");
    patterns.add<MatmulToKernel<linalg::BatchMatmulOp>>(
        &getContext(), "tfc_uk_batch_matmul_f32");
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
} // namespace tfc
