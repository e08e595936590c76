//===- AttentionCalls.cpp - Attention kernel calls and their buffers ------===//

#include "AttentionCalls.h"

#include "tfc/ukernels/symbols.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace tfc {
namespace {

/// The attention kernels (K and V f32, bf16 or f16 under an f32 query, or
/// all bf16) and their kv2 forms.
constexpr std::pair<StringLiteral, StringLiteral> kAttentionKV2[] = {
    {TFC_UK_ATTENTION_F32_NAME, TFC_UK_ATTENTION_KV2_F32_NAME},
    {TFC_UK_ATTENTION_F32_BF16_NAME, TFC_UK_ATTENTION_KV2_F32_BF16_NAME},
    {TFC_UK_ATTENTION_F32_F16_NAME, TFC_UK_ATTENTION_KV2_F32_F16_NAME},
    {TFC_UK_ATTENTION_BF16_NAME, TFC_UK_ATTENTION_KV2_BF16_NAME}};

} // namespace

StringRef kv2Of(StringRef callee) {
  for (const auto &[one, two] : kAttentionKV2)
    if (callee == one)
      return two;
  return "";
}

Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

bool touches(Operation *op, Value buffer, bool writesOnly) {
  WalkResult r = op->walk([&](Operation *inner) {
    if (isa<ViewLikeOpInterface>(inner))
      return WalkResult::advance();
    for (Value operand : inner->getOperands()) {
      if (!isa<BaseMemRefType>(operand.getType()) || rootOf(operand) != buffer)
        continue;
      auto effects = dyn_cast<MemoryEffectOpInterface>(inner);
      if (!writesOnly || !effects)
        return WalkResult::interrupt();
      // Any effect but a read, on this operand or on no value in
      // particular.
      SmallVector<MemoryEffects::EffectInstance> list;
      effects.getEffects(list);
      for (const auto &e : list)
        if (!isa<MemoryEffects::Read>(e.getEffect()) &&
            (!e.getValue() || e.getValue() == operand))
          return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return r.wasInterrupted();
}

Value localBuffer(func::CallOp call, Value operand) {
  auto view = operand.getDefiningOp<memref::CastOp>();
  if (!view)
    return nullptr;
  Value buffer = view.getSource();
  auto alloc = buffer.getDefiningOp<memref::AllocOp>();
  auto type = cast<MemRefType>(buffer.getType());
  if (!alloc || alloc->getBlock() != call->getBlock() || type.getRank() != 4 ||
      !type.hasStaticShape())
    return nullptr;
  return buffer;
}

void eraseIfUnused(RewriterBase &rewriter, Value buffer) {
  SmallVector<Operation *> views, deallocs;
  for (Operation *user : buffer.getUsers()) {
    if (isa<memref::DeallocOp>(user))
      deallocs.push_back(user);
    else if (isa<ViewLikeOpInterface>(user) && user->use_empty())
      views.push_back(user);
    else
      return;
  }
  for (Operation *op : llvm::concat<Operation *>(views, deallocs))
    rewriter.eraseOp(op);
  rewriter.eraseOp(buffer.getDefiningOp());
}

SmallVector<func::CallOp> attentionCalls(ModuleOp module) {
  SmallVector<func::CallOp> calls;
  module->walk([&](func::CallOp call) {
    if (!kv2Of(call.getCallee()).empty())
      calls.push_back(call);
  });
  return calls;
}

} // namespace tfc
