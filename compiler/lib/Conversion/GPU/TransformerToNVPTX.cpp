//===- TransformerToNVPTX.cpp - Fused attention as one GPU kernel ---------===//

#include "AttentionKernel.h"
#include "tfc/Conversion/Passes.h"
#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_CONVERTTRANSFORMERTONVPTX
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// The kernel's view of `op`, or nullopt when the op is left to the
/// decomposition (dynamic shapes, odd head dimensions in f16/bf16).
std::optional<AttentionShape> kernelShape(transformer::AttentionOp op) {
  auto q = op.getQuery().getType(), k = op.getKey().getType(),
       v = op.getValue().getType();
  if (!q.hasStaticShape() || !k.hasStaticShape() || !v.hasStaticShape())
    return std::nullopt;
  AttentionShape s;
  s.batch = q.getDimSize(0);
  s.headsQ = q.getDimSize(1);
  s.seqQ = q.getDimSize(2);
  s.headDim = q.getDimSize(3);
  s.headsKV = k.getDimSize(1);
  s.seqKV = k.getDimSize(2);
  s.valueDim = v.getDimSize(3);
  s.elementType = q.getElementType();
  s.causal = op.getIsCausal();
  s.scale = op.getEffectiveScale();
  if (!s.elementType.isF32() && (s.headDim % 2 || s.valueDim % 2))
    return std::nullopt;
  if (Value m = op.getMask()) {
    auto mt = cast<RankedTensorType>(m.getType());
    if (!mt.hasStaticShape())
      return std::nullopt;
    s.mask.assign(4 - mt.getRank(), 1);
    s.mask.append(mt.getShape().begin(), mt.getShape().end());
  }
  return s;
}

struct ConvertTransformerToNVPTXPass
    : impl::ConvertTransformerToNVPTXBase<ConvertTransformerToNVPTXPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<transformer::AttentionOp> ops;
    module.walk([&](transformer::AttentionOp op) { ops.push_back(op); });
    if (ops.empty())
      return;
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
    OpBuilder b(&getContext());
    b.setInsertionPointToEnd(module.getBody());
    auto kernels =
        gpu::GPUModuleOp::create(b, module.getLoc(), "tfc_attention");
    int count = 0;
    for (transformer::AttentionOp op : ops) {
      std::optional<AttentionShape> shape = kernelShape(op);
      if (!shape)
        continue;
      AttentionLaunch launch = buildAttentionKernel(
          b, kernels, "attention_" + std::to_string(count++), *shape);

      OpBuilder ob(op);
      Location loc = op.getLoc();
      auto buffer = [&](Value tensor) -> Value {
        auto t = cast<RankedTensorType>(tensor.getType());
        return bufferization::ToBufferOp::create(
            ob, loc, MemRefType::get(t.getShape(), t.getElementType()), tensor,
            /*readOnly=*/true);
      };
      SmallVector<Value> args = {buffer(op.getQuery()), buffer(op.getKey()),
                                 buffer(op.getValue())};
      if (Value mask = op.getMask())
        args.push_back(buffer(TosaBuilder(ob, loc).expandToRank(mask, 4)));
      RankedTensorType resultType = op.getResult().getType();
      Value out = memref::AllocOp::create(
          ob, loc,
          MemRefType::get(resultType.getShape(), resultType.getElementType()),
          ob.getI64IntegerAttr(64));
      args.push_back(out);
      Value one = arith::ConstantIndexOp::create(ob, loc, 1);
      auto dim = [&](int64_t n) -> Value {
        return arith::ConstantIndexOp::create(ob, loc, n);
      };
      gpu::LaunchFuncOp::create(
          ob, loc, launch.kernel,
          gpu::KernelDim3{dim(launch.gridX), dim(launch.gridY), one},
          gpu::KernelDim3{dim(launch.blockX), one, one},
          /*dynamicSharedMemorySize=*/Value(), args);
      Value result = bufferization::ToTensorOp::create(
          ob, loc, resultType, out, /*restrict=*/true, /*writable=*/true);
      op.replaceAllUsesWith(result);
      op.erase();
    }
    if (count == 0)
      kernels.erase();
  }
};

} // namespace
} // namespace tfc
