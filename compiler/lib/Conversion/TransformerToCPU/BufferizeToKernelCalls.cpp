//===- BufferizeToKernelCalls.cpp - CPU kernel calls as ops bufferize -----===//
//
// The bufferization of transformer ops in CPU kernel form (KernelForm.h):
// one-shot bufferization turns each into a call of its micro-kernel that
// reads its operands' buffers where they are and writes a fresh buffer.
//
//===----------------------------------------------------------------------===//

#include "KernelForm.h"
#include "tfc/Codegen/CPU/KernelCalls.h"
#include "tfc/Conversion/TransformerToCPU/TransformerToCPU.h"
#include "tfc/Dialect/Transformer/IR/Transformer.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace tfc {
namespace {

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
      // TFC_UK_ATTENTION_BF16 is implied by a bf16 query.
      bool bf16Values = a->hasAttr(kBf16ValuesAttr) ||
                        a.getQuery().getType().getElementType().isBF16();
      int32_t flags = (a.getMask() ? TFC_UK_ATTENTION_MASK : 0) |
                      (bf16Values ? TFC_UK_ATTENTION_BF16 : 0);
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
    } else if (isa<transformer::SoftmaxOp, transformer::AllReduceOp,
                   transformer::AllGatherOp>(op)) {
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

} // namespace

void registerKernelCallBufferization(DialectRegistry &registry) {
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
        transformer::AllReduceOp::attachInterface<
            KernelCallBufferization<transformer::AllReduceOp>>(*ctx);
        transformer::AllGatherOp::attachInterface<
            KernelCallBufferization<transformer::AllGatherOp>>(*ctx);
      });
}

} // namespace tfc
