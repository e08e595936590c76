//===- AttentionOperandViews.cpp - Attention on heads where they are ------===//
//
// Heads transposed into and out of buffers only for attention: the call
// reads and writes transposed views of the transposes' other sides
// instead.
//
//===----------------------------------------------------------------------===//

#include "AttentionCalls.h"
#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_ATTENTIONOPERANDVIEWS
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

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
