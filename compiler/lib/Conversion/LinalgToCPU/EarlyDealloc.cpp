//===- EarlyDealloc.cpp - Free buffers right after their last use ---------===//

#include "tfc/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_EARLYDEALLOC
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// The last operation of `block` that uses `buffer` or a memref derived from
/// it (other than `dealloc`); null when one of them is used outside the
/// block or by its terminator.
Operation *lastUseInBlock(Value buffer, Block *block, Operation *dealloc) {
  Operation *last = buffer.getDefiningOp();
  SmallVector<Value> work = {buffer};
  llvm::DenseSet<Value> seen = {buffer};
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (user == dealloc)
        continue;
      Operation *ancestor = block->findAncestorOpInBlock(*user);
      if (!ancestor || ancestor == block->getTerminator())
        return nullptr;
      if (last->isBeforeInBlock(ancestor))
        last = ancestor;
      // Whatever memref an operation makes from the buffer may alias it.
      for (Value result : user->getResults())
        if (isa<BaseMemRefType>(result.getType()) && seen.insert(result).second)
          work.push_back(result);
    }
  }
  return last;
}

/// Whether `op` only writes `buffer` (taking nothing else from it): a fill,
/// a copy into it, a store to it or its free.
bool onlyWrites(Operation *op, Value buffer) {
  if (isa<memref::DeallocOp>(op))
    return true;
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return fill.hasPureBufferSemantics() &&
           llvm::all_of(fill.getDpsInputs(),
                        [&](Value v) { return v != buffer; });
  if (auto copy = dyn_cast<memref::CopyOp>(op))
    return copy.getSource() != buffer;
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return store.getValueToStore() != buffer;
  return false;
}

/// Erases every allocation of `func` that nothing reads: each user only
/// writes it (onlyWrites). Matmuls lowered to kernel calls leave such
/// buffers behind: the buffer of a weight's transpose that became a view
/// (one per weight shape: bufferization shares it between the projections
/// of that shape).
void eraseUnreadAllocations(Operation *func) {
  SmallVector<memref::AllocOp> dead;
  func->walk([&](memref::AllocOp alloc) {
    Value buffer = alloc.getResult();
    if (llvm::all_of(buffer.getUsers(),
                     [&](Operation *user) { return onlyWrites(user, buffer); }))
      dead.push_back(alloc);
  });
  for (memref::AllocOp alloc : dead) {
    for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
      user->erase();
    alloc->erase();
  }
}

struct EarlyDeallocPass : impl::EarlyDeallocBase<EarlyDeallocPass> {
  void runOnOperation() override {
    eraseUnreadAllocations(getOperation());
    SmallVector<memref::DeallocOp> deallocs;
    getOperation()->walk([&](memref::DeallocOp d) { deallocs.push_back(d); });
    for (memref::DeallocOp dealloc : deallocs) {
      auto alloc = dealloc.getMemref().getDefiningOp<memref::AllocOp>();
      if (!alloc || alloc->getBlock() != dealloc->getBlock())
        continue;
      Operation *last =
          lastUseInBlock(alloc.getResult(), dealloc->getBlock(), dealloc);
      if (last && last->isBeforeInBlock(dealloc))
        dealloc->moveAfter(last);
    }
  }
};

} // namespace
} // namespace tfc
