//===- TransformerToCPU.cpp - transformer ops to CPU micro-kernels --------===//

#include "tfc/Conversion/KernelCalls.h"
#include "tfc/Conversion/Passes.h"
#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
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

/// The kernel each op bufferizes into, with its argument types.
struct KernelSignature {
  StringRef name;
  SmallVector<Type> args;
};

/// Whether `op` is a layer_norm of bf16 input, gamma, beta and result (the
/// _bf16 kernel's form, rank 2 aside).
bool isAllBf16LayerNorm(Operation *op) {
  auto isBf16 = [](Type t) {
    return cast<RankedTensorType>(t).getElementType().isBF16();
  };
  return isa<transformer::LayerNormOp>(op) &&
         llvm::all_of(op->getOperandTypes(), isBf16) &&
         isBf16(op->getResult(0).getType());
}

KernelSignature kernelFor(Operation *op) {
  MLIRContext *ctx = op->getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32);
  if (auto a = dyn_cast<transformer::AttentionOp>(op)) {
    // K and V as they are: f32, or f16/bf16 for the _f32_f16 and
    // _f32_bf16 entries; all of Q, K, V and the result bf16 for the _bf16
    // one.
    Type kv = a.getKey().getType().getElementType();
    Type qo = a.getQuery().getType().getElementType();
    MemRefType m = dynamicF32MemRef(ctx, 4), mkv = dynamicMemRef(ctx, 4, kv),
               mqo = dynamicMemRef(ctx, 4, qo);
    Type i64 = IntegerType::get(ctx, 64);
    StringRef name = qo.isBF16()   ? "tfc_uk_attention_bf16"
                     : kv.isBF16() ? "tfc_uk_attention_f32_bf16"
                     : kv.isF16()  ? "tfc_uk_attention_f32_f16"
                                   : "tfc_uk_attention_f32";
    return {name, {mqo, mkv, mkv, m, mqo, f32, i32, i32, f32, i64}};
  }
  MemRefType m1 = dynamicF32MemRef(ctx, 1), m2 = dynamicF32MemRef(ctx, 2);
  if (isa<transformer::SoftmaxOp>(op))
    return {"tfc_uk_softmax_f32", {m2, m2}};
  if (isa<transformer::RmsNormOp>(op))
    return {"tfc_uk_rms_norm_f32", {m2, m1, m2, f32}};
  if (isAllBf16LayerNorm(op)) {
    Type bf16 = BFloat16Type::get(ctx);
    MemRefType h1 = dynamicMemRef(ctx, 1, bf16),
               h2 = dynamicMemRef(ctx, 2, bf16);
    return {"tfc_uk_layer_norm_bf16", {h2, h1, h1, h2, f32}};
  }
  return {"tfc_uk_layer_norm_f32", {m2, m1, m1, m2, f32}};
}

/// Marks a kernel-form attention whose query, key and value were bf16 (now
/// widened to f32): the kernel may multiply them as bf16 values
/// (TFC_UK_ATTENTION_BF16).
constexpr StringLiteral kBf16ValuesAttr = "tfc.bf16_values";

/// Whether `op` already has the form the kernels take: f32 (attention's K
/// and V may be f16 or bf16, both of one type, or all of its Q, K, V and
/// result bf16), statically shaped, attention with an f32 rank-4 mask,
/// softmax and the norms on [rows, n] over the last dimension.
bool isKernelForm(Operation *op) {
  auto elementType = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  if (auto a = dyn_cast<transformer::AttentionOp>(op)) {
    Type kv = elementType(a.getKey()), qo = elementType(a.getQuery());
    bool f32Query = qo.isF32() && (kv.isF32() || kv.isF16() || kv.isBF16());
    bool allBf16 = qo.isBF16() && kv.isBF16();
    return (f32Query || allBf16) && elementType(a.getValue()) == kv &&
           elementType(a.getResult()) == qo &&
           (!a.getMask() || (elementType(a.getMask()).isF32() &&
                             a.getMask().getType().getRank() == 4));
  }
  if (!isAllBf16LayerNorm(op))
    for (Type t : op->getOperandTypes())
      if (!cast<RankedTensorType>(t).getElementType().isF32())
        return false;
  if (auto s = dyn_cast<transformer::SoftmaxOp>(op))
    return s.getType().getRank() == 2 && s.getDimension() == 1;
  return cast<RankedTensorType>(op->getResult(0).getType()).getRank() == 2;
}

bool hasStaticShapes(Operation *op) {
  auto isStatic = [](Type t) {
    return cast<RankedTensorType>(t).hasStaticShape();
  };
  return llvm::all_of(op->getOperandTypes(), isStatic) &&
         llvm::all_of(op->getResultTypes(), isStatic);
}

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
             transformer::LayerNormOp, transformer::RmsNormOp>(op) ||
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

/// Bufferizes a transformer op in kernel form into a call: it reads its
/// operands where it stands and writes a fresh buffer.
template <typename OpTy>
struct KernelCallBufferization
    : bufferization::BufferizableOpInterface::ExternalModel<
          KernelCallBufferization<OpTy>, OpTy> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const bufferization::AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const bufferization::AnalysisState &) const {
    return false;
  }
  bufferization::AliasingValueList
  getAliasingValues(Operation *, OpOperand &,
                    const bufferization::AnalysisState &) const {
    return {};
  }
  bool bufferizesToAllocation(Operation *, Value) const { return true; }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const bufferization::BufferizationOptions &options,
                          bufferization::BufferizationState &state) const {
    if (!isKernelForm(op) || !hasStaticShapes(op))
      return op->emitError()
             << "'" << op->getName()
             << "' is not in CPU kernel form; run convert-transformer-to-cpu";
    Location loc = op->getLoc();
    MLIRContext *ctx = op->getContext();
    auto toDynamic = [&](Value buffer) -> Value {
      auto type = cast<MemRefType>(buffer.getType());
      return memref::CastOp::create(
          rewriter, loc,
          dynamicMemRef(ctx, type.getRank(), type.getElementType()), buffer);
    };
    SmallVector<Value> buffers;
    for (Value operand : op->getOperands()) {
      FailureOr<Value> b =
          bufferization::getBuffer(rewriter, operand, options, state);
      if (failed(b))
        return failure();
      buffers.push_back(toDynamic(*b));
    }
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    Value out = memref::AllocOp::create(
        rewriter, loc,
        MemRefType::get(resultType.getShape(), resultType.getElementType()),
        rewriter.getI64IntegerAttr(64));
    SmallVector<Value> args;
    auto f32 = [&](double v) -> Value {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getF32FloatAttr(float(v)));
    };
    auto i32 = [&](int32_t v) -> Value {
      return arith::ConstantOp::create(rewriter, loc,
                                       rewriter.getI32IntegerAttr(v));
    };
    if (auto a = dyn_cast<transformer::AttentionOp>(op)) {
      // ukernels.h's TFC_UK_ATTENTION_MASK and TFC_UK_ATTENTION_BF16 (which
      // a bf16 query implies).
      bool bf16Values = a->hasAttr(kBf16ValuesAttr) ||
                        a.getQuery().getType().getElementType().isBF16();
      int32_t flags = (a.getMask() ? 1 : 0) | (bf16Values ? 2 : 0);
      // Without a mask, the kernel reads none: an f32 operand stands in.
      Value mask = a.getMask() ? buffers[3] : buffers[0];
      if (!a.getMask() && !a.getQuery().getType().getElementType().isF32())
        mask = toDynamic(memref::AllocaOp::create(
            rewriter, loc,
            MemRefType::get({1, 1, 1, 1}, rewriter.getF32Type())));
      args = {buffers[0],
              buffers[1],
              buffers[2],
              mask,
              toDynamic(out),
              f32(a.getEffectiveScale()),
              i32(flags),
              i32(a.getIsCausal()),
              f32(a.getEffectiveSoftcap()),
              arith::ConstantOp::create(
                  rewriter, loc,
                  rewriter.getI64IntegerAttr(a.getEffectiveWindow()))};
    } else if (isa<transformer::SoftmaxOp>(op)) {
      args = {buffers[0], toDynamic(out)};
    } else if (auto rms = dyn_cast<transformer::RmsNormOp>(op)) {
      args = {buffers[0], buffers[1], toDynamic(out),
              f32(rms.getEpsilon().convertToDouble())};
    } else {
      auto ln = cast<transformer::LayerNormOp>(op);
      args = {buffers[0], buffers[1], buffers[2], toDynamic(out),
              f32(ln.getEpsilon().convertToDouble())};
    }
    KernelSignature sig = kernelFor(op);
    func::CallOp::create(rewriter, loc, sig.name, TypeRange(), args);
    bufferization::replaceOpWithBufferizedValues(rewriter, op, out);
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
  patterns.add<PrepareForKernel>(patterns.getContext());
}

void registerCPUBufferizationModels(DialectRegistry &registry) {
  registry.addExtension(
      +[](MLIRContext *ctx, transformer::TransformerDialect *) {
        transformer::AttentionOp::attachInterface<
            KernelCallBufferization<transformer::AttentionOp>>(*ctx);
        transformer::SoftmaxOp::attachInterface<
            KernelCallBufferization<transformer::SoftmaxOp>>(*ctx);
        transformer::LayerNormOp::attachInterface<
            KernelCallBufferization<transformer::LayerNormOp>>(*ctx);
        transformer::RmsNormOp::attachInterface<
            KernelCallBufferization<transformer::RmsNormOp>>(*ctx);
      });
}

} // namespace tfc
