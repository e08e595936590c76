//===- AttentionSplitKV.cpp - Attention on its operands where they are ----===//
//
// Two rewrites of attention kernel calls that drop copies of their
// operands: keys and values concatenated into a buffer only for attention
// (tfc-attention-split-kv), and heads transposed into and out of buffers
// only for attention (tfc-attention-operand-views).
//
//===----------------------------------------------------------------------===//

#include "tfc/Conversion/KernelCalls.h"
#include "tfc/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/SetVector.h"

#include <optional>

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_ATTENTIONSPLITKV
#define GEN_PASS_DEF_ATTENTIONOPERANDVIEWS
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// The attention kernels (K and V f32, bf16 or f16 under an f32 query, or
/// all bf16) and their kv2 forms.
constexpr std::pair<StringLiteral, StringLiteral> kAttentionKV2[] = {
    {"tfc_uk_attention_f32", "tfc_uk_attention_kv2_f32"},
    {"tfc_uk_attention_f32_bf16", "tfc_uk_attention_kv2_f32_bf16"},
    {"tfc_uk_attention_f32_f16", "tfc_uk_attention_kv2_f32_f16"},
    {"tfc_uk_attention_bf16", "tfc_uk_attention_kv2_bf16"}};

/// The kv2 form of attention kernel `callee`, or "" for another callee.
StringRef kv2Of(StringRef callee) {
  for (const auto &[one, two] : kAttentionKV2)
    if (callee == one)
      return two;
  return "";
}
constexpr int64_t kKeyAxis = 2;

/// The buffer `v` is a view of, through any chain of views.
Value rootOf(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// Whether `op` or an op nested in it uses `buffer` (through any view;
/// making a view is no use): at all, or with `writesOnly` in any way but a
/// read (an op whose effects are unknown, a kernel call, counts).
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

/// The buffer that kernel operand `operand` of `call` casts: a static 4-d
/// allocation in the call's block, or null.
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

/// Erases `buffer`'s allocation, views and deallocations when nothing else
/// uses it.
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

/// The calls of the one-part attention kernels in `module`.
SmallVector<func::CallOp> attentionCalls(ModuleOp module) {
  SmallVector<func::CallOp> calls;
  module->walk([&](func::CallOp call) {
    if (!kv2Of(call.getCallee()).empty())
      calls.push_back(call);
  });
  return calls;
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

/// The transposes attention's operands go through: `buffer` (an
/// allocation in the call's block, which other layers may use too) and the
/// transpose that fills it (an input) or copies it out (the output).
struct Transposed {
  Value buffer;
  linalg::TransposeOp transpose;
};

/// Whether `op` fills the whole of `buffer` before reading it: a transpose
/// into it.
bool fillsWhole(Operation *op, Value buffer) {
  auto t = dyn_cast<linalg::TransposeOp>(op);
  return t && t.getInit() == buffer && rootOf(t.getInput()) != buffer;
}

/// `operand` of `call` as a static 4-d buffer that a transpose fills just
/// before the call (`input`), its source unchanged since, or copies out
/// just after it, its destination untouched between the two and usable at
/// the call; and that nothing reads after that, before it is filled whole
/// again or freed.
std::optional<Transposed> matchTransposed(func::CallOp call, Value operand,
                                          bool input) {
  Value buffer = localBuffer(call, operand);
  if (!buffer)
    return std::nullopt;
  // The transpose: the nearest use of the buffer before the call (an
  // input's) or after it (the output's).
  linalg::TransposeOp transpose;
  for (Operation *op = input ? call->getPrevNode() : call->getNextNode(); op;
       op = input ? op->getPrevNode() : op->getNextNode()) {
    if (!touches(op, buffer, /*writesOnly=*/false))
      continue;
    auto t = dyn_cast<linalg::TransposeOp>(op);
    if (t && (input ? fillsWhole(op, buffer) : t.getInput() == buffer))
      transpose = t;
    break;
  }
  if (!transpose)
    return std::nullopt;
  // After the call (and the output's transpose), nothing reads the buffer
  // before filling it whole again or freeing it.
  for (Operation *op = (input ? call.getOperation() : transpose.getOperation())
                           ->getNextNode();
       op; op = op->getNextNode()) {
    if (fillsWhole(op, buffer) ||
        (isa<memref::DeallocOp>(op) && op->getOperand(0) == buffer))
      break;
    if (touches(op, buffer, /*writesOnly=*/false))
      return std::nullopt;
  }
  // The memory the view will stand for, and the ops between the copy and
  // the call, which must leave it as the copy would have.
  Value other = input ? transpose.getInput() : transpose.getInit();
  Operation *from = input ? transpose.getOperation() : call.getOperation();
  Operation *to = input ? call.getOperation() : transpose.getOperation();
  Value root = rootOf(other);
  for (Operation *op = from->getNextNode(); op != to; op = op->getNextNode())
    if (touches(op, root, /*writesOnly=*/input))
      return std::nullopt;
  if (!input) {
    // The destination exists at the call: an argument of the call's block,
    // a value defined before the call in it, or an allocation that can
    // move there.
    Operation *def = other.getDefiningOp();
    auto destAlloc = dyn_cast_or_null<memref::AllocOp>(def);
    if (def && (def->getBlock() != call->getBlock() ||
                (!def->isBeforeInBlock(call) &&
                 (!destAlloc || destAlloc->getNumOperands() != 0))))
      return std::nullopt;
    if (!def && cast<BlockArgument>(other).getOwner() != call->getBlock())
      return std::nullopt;
  }
  // The call writes its output only: it must not overlap what it reads.
  Value out = call.getOperand(4);
  for (Value arg : call.getOperands()) {
    if (!isa<BaseMemRefType>(arg.getType()) || arg == operand)
      continue;
    if (input ? (arg == out && rootOf(out) == root) : rootOf(arg) == root)
      return std::nullopt;
  }
  return Transposed{buffer, transpose};
}

struct AttentionOperandViewsPass
    : impl::AttentionOperandViewsBase<AttentionOperandViewsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::CallOp> calls = attentionCalls(module);
    IRRewriter rewriter(&getContext());
    for (func::CallOp call : calls) {
      // q, k, v in, out (the one-part kernels' operands 0, 1, 2 and 4).
      for (unsigned index : {0u, 1u, 2u, 4u}) {
        bool input = index != 4;
        Value operand = call.getOperand(index);
        std::optional<Transposed> t = matchTransposed(call, operand, input);
        if (!t)
          continue;
        ArrayRef<int64_t> perm = t->transpose.getPermutation();
        SmallVector<int64_t> order(perm);
        Value target;
        if (input) {
          target = t->transpose.getInput();
        } else {
          // The view of the destination in the buffer's order.
          for (auto [i, p] : llvm::enumerate(perm))
            order[p] = int64_t(i);
          target = t->transpose.getInit();
          if (Operation *def = target.getDefiningOp();
              def && def->getBlock() == call->getBlock() &&
              !def->isBeforeInBlock(call))
            def->moveBefore(call);
        }
        rewriter.setInsertionPoint(call);
        auto map = AffineMapAttr::get(AffineMap::getPermutationMap(
            llvm::to_vector_of<unsigned>(order), &getContext()));
        Value view =
            memref::TransposeOp::create(rewriter, call.getLoc(), target, map);
        Value cast = memref::CastOp::create(rewriter, call.getLoc(),
                                            operand.getType(), view);
        call->setOperand(index, cast);
        rewriter.eraseOp(t->transpose);
        eraseIfUnused(rewriter, t->buffer);
      }
    }
  }
};

} // namespace
} // namespace tfc
