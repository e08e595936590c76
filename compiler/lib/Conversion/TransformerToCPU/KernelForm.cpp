//===- KernelForm.cpp - transformer ops in CPU kernel form ----------------===//

#include "KernelForm.h"

#include "tfc/Codegen/CPU/KernelCalls.h"
#include "tfc/Dialect/Transformer/IR/Transformer.h"

using namespace mlir;

namespace tfc {

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
    StringRef name = qo.isBF16()   ? TFC_UK_ATTENTION_BF16_NAME
                     : kv.isBF16() ? TFC_UK_ATTENTION_F32_BF16_NAME
                     : kv.isF16()  ? TFC_UK_ATTENTION_F32_F16_NAME
                                   : TFC_UK_ATTENTION_F32_NAME;
    return {name, {mqo, mkv, mkv, m, mqo, f32, i32, i32, f32, i64}};
  }
  MemRefType m1 = dynamicF32MemRef(ctx, 1), m2 = dynamicF32MemRef(ctx, 2);
  if (isa<transformer::SoftmaxOp>(op))
    return {TFC_UK_SOFTMAX_F32_NAME, {m2, m2}};
  // The runtime's (abi.h, "Tensor parallelism"), not a micro-kernel.
  if (isa<transformer::AllReduceOp>(op))
    return {"tfc_all_reduce_f32", {m2, m2}};
  if (isa<transformer::AllGatherOp>(op))
    return {"tfc_all_gather_f32", {m2, m2}};
  if (isa<transformer::RmsNormOp>(op))
    return {TFC_UK_RMS_NORM_F32_NAME, {m2, m1, m2, f32}};
  if (isAllBf16LayerNorm(op)) {
    Type bf16 = BFloat16Type::get(ctx);
    MemRefType h1 = dynamicMemRef(ctx, 1, bf16),
               h2 = dynamicMemRef(ctx, 2, bf16);
    return {TFC_UK_LAYER_NORM_BF16_NAME, {h2, h1, h1, h2, f32}};
  }
  return {TFC_UK_LAYER_NORM_F32_NAME, {m2, m1, m1, m2, f32}};
}

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

} // namespace tfc
