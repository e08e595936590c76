//===- AttentionSplitKV.cpp - Attention on a concatenation's parts --------===//
//
// Keys and values concatenated into a buffer only for attention: the call
// reads the two parts where they are instead.
//
//===----------------------------------------------------------------------===//

#include "AttentionCalls.h"
#include "tfc/Codegen/CPU/KernelCalls.h"
#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/ADT/SetVector.h"

#include <optional>

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_ATTENTIONSPLITKV
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

constexpr int64_t kKeyAxis = 2;

/// The key-axis slice [offset, offset + size) that `subview` takes of a
/// buffer of `shape`, if it takes whole extents elsewhere with unit strides.
std::optional<std::pair<int64_t, int64_t>> keySlice(memref::SubViewOp subview,
                                                    ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> offsets = subview.getStaticOffsets(),
                    sizes = subview.getStaticSizes(),
                    strides = subview.getStaticStrides();
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (strides[d] != 1 || ShapedType::isDynamic(offsets[d]) ||
        ShapedType::isDynamic(sizes[d]))
      return std::nullopt;
    if (d != kKeyAxis && (offsets[d] != 0 || sizes[d] != shape[d]))
      return std::nullopt;
  }
  return std::make_pair(offsets[kKeyAxis], sizes[kKeyAxis]);
}

/// A copy into a key-axis slice of a buffer.
struct SliceCopy {
  memref::CopyOp copy;
  int64_t offset, size;
};

/// `op` as a copy into a key-axis slice of `buffer`, if it is one.
std::optional<SliceCopy> sliceCopyInto(Operation *op, Value buffer) {
  auto copy = dyn_cast<memref::CopyOp>(op);
  if (!copy)
    return std::nullopt;
  auto subview = copy.getTarget().getDefiningOp<memref::SubViewOp>();
  if (!subview || subview.getSource() != buffer)
    return std::nullopt;
  auto slice = keySlice(subview, cast<MemRefType>(buffer.getType()).getShape());
  if (!slice)
    return std::nullopt;
  return SliceCopy{copy, slice->first, slice->second};
}

/// Whether `copies` fill keys [0, extent) exactly, in two parts; sorts them.
bool fillInTwo(SmallVectorImpl<SliceCopy> &copies, int64_t extent) {
  if (copies.size() != 2)
    return false;
  llvm::sort(copies, [](const SliceCopy &a, const SliceCopy &b) {
    return a.offset < b.offset;
  });
  return copies[0].offset == 0 && copies[1].offset == copies[0].size &&
         copies[1].offset + copies[1].size == extent;
}

/// What the call reads as keys or values: the concatenation of two sources
/// along the key axis, sources[0] holding keys [0, split).
struct Concat {
  Value buffer;
  std::array<memref::CopyOp, 2> copies;
  std::array<Value, 2> sources;
  int64_t split;
};

/// `operand` of `call` as a buffer (a fresh allocation, which later layers
/// may fill again) that two copies fill along the key axis just before the
/// call, that nothing reads after the call before filling it again, and
/// whose copies' sources hold at the call what they held when copied.
std::optional<Concat> matchConcat(func::CallOp call, Value operand) {
  Value buffer = localBuffer(call, operand);
  if (!buffer)
    return std::nullopt;
  auto type = cast<MemRefType>(buffer.getType());
  int64_t extent = type.getShape()[kKeyAxis];
  // Back from the call: the two copies that fill the buffer, and no other
  // access since them.
  SmallVector<SliceCopy, 2> fill;
  Operation *op = call->getPrevNode();
  for (; op && !fillInTwo(fill, extent); op = op->getPrevNode()) {
    if (std::optional<SliceCopy> c = sliceCopyInto(op, buffer))
      fill.push_back(*c);
    else if (touches(op, buffer, /*writesOnly=*/false))
      return std::nullopt;
  }
  if (!fillInTwo(fill, extent))
    return std::nullopt;
  // On from the call: the buffer is filled whole again, or freed, or never
  // used again, before anything reads it.
  SmallVector<SliceCopy, 2> refill;
  for (op = call->getNextNode(); op && !fillInTwo(refill, extent);
       op = op->getNextNode()) {
    if (std::optional<SliceCopy> c = sliceCopyInto(op, buffer))
      refill.push_back(*c);
    else if (isa<memref::DeallocOp>(op) && op->getOperand(0) == buffer)
      break;
    else if (touches(op, buffer, /*writesOnly=*/false))
      return std::nullopt;
  }
  Concat c{buffer,
           {fill[0].copy, fill[1].copy},
           {fill[0].copy.getSource(), fill[1].copy.getSource()},
           fill[1].offset};
  // Each source must hold at the call what it held at its copy.
  for (memref::CopyOp copy : c.copies) {
    Value source = rootOf(copy.getSource());
    for (Operation *o = copy->getNextNode(); o != call; o = o->getNextNode())
      if (touches(o, source, /*writesOnly=*/true))
        return std::nullopt;
  }
  return c;
}

struct AttentionSplitKVPass : impl::AttentionSplitKVBase<AttentionSplitKVPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::CallOp> calls = attentionCalls(module);
    IRRewriter rewriter(&getContext());
    llvm::SetVector<Value> buffers; // whose copies went
    for (func::CallOp call : calls) {
      std::optional<Concat> k = matchConcat(call, call.getOperand(1));
      std::optional<Concat> v = matchConcat(call, call.getOperand(2));
      if (!k || !v || k->split != v->split)
        continue;
      rewriter.setInsertionPoint(call);
      // The kernel's K/V operand type (f32, bf16 or f16).
      Type kv = cast<MemRefType>(call.getOperand(1).getType()).getElementType();
      MemRefType dyn = dynamicMemRef(&getContext(), 4, kv);
      auto asOperand = [&](Value source) -> Value {
        if (source.getType() == dyn)
          return source;
        return memref::CastOp::create(rewriter, call.getLoc(), dyn, source);
      };
      ValueRange args = call.getOperands();
      SmallVector<Value> operands = {
          args[0], asOperand(k->sources[0]), asOperand(k->sources[1]),
          asOperand(v->sources[0]), asOperand(v->sources[1])};
      operands.append(args.begin() + 3, args.end());
      StringRef kv2 = kv2Of(call.getCallee());
      declareKernel(rewriter, module, kv2, TypeRange(ValueRange(operands)));
      func::CallOp::create(rewriter, call.getLoc(), kv2, TypeRange(), operands);
      rewriter.eraseOp(call);
      // (Keys and values may be one buffer.)
      llvm::SetVector<Operation *> copies;
      for (const Concat *c : {&*k, &*v})
        copies.insert(c->copies.begin(), c->copies.end());
      for (Operation *copy : copies) {
        Operation *subview = copy->getOperand(1).getDefiningOp();
        rewriter.eraseOp(copy);
        if (subview->use_empty())
          rewriter.eraseOp(subview);
      }
      buffers.insert(k->buffer);
      buffers.insert(v->buffer);
    }
    for (Value buffer : buffers)
      eraseIfUnused(rewriter, buffer);
  }
};

} // namespace
} // namespace tfc
