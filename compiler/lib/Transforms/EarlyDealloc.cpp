//===- EarlyDealloc.cpp - Free buffers right after their last use ---------===//

#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_EARLYDEALLOC
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// The buffer `op` allocates: a `memref.alloc`, or a synchronous `gpu.alloc`
/// (a GPU model's device buffers before `gpu-async-region`); null otherwise.
Value allocatedBuffer(Operation *op) {
  if (auto alloc = dyn_cast<memref::AllocOp>(op))
    return alloc.getResult();
  if (auto alloc = dyn_cast<gpu::AllocOp>(op))
    if (!alloc.getAsyncToken() && alloc.getAsyncDependencies().empty())
      return alloc.getMemref();
  return nullptr;
}

/// The buffer `op` frees: a `memref.dealloc` or a synchronous `gpu.dealloc`.
/// A GPU model's work runs in order on one stream, so a device buffer freed
/// after the launch that last uses it is only handed to work queued later.
Value freedBuffer(Operation *op) {
  if (auto dealloc = dyn_cast<memref::DeallocOp>(op))
    return dealloc.getMemref();
  if (auto dealloc = dyn_cast<gpu::DeallocOp>(op))
    if (!dealloc.getAsyncToken() && dealloc.getAsyncDependencies().empty())
      return dealloc.getMemref();
  return nullptr;
}

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
  if (freedBuffer(op) == buffer)
    return true;
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return fill.hasPureBufferSemantics() &&
           llvm::all_of(fill.getDpsInputs(),
                        [&](Value v) { return v != buffer; });
  if (auto copy = dyn_cast<memref::CopyOp>(op))
    return copy.getSource() != buffer;
  if (auto store = dyn_cast<memref::StoreOp>(op))
    return store.getValueToStore() != buffer;
  if (auto copy = dyn_cast<gpu::MemcpyOp>(op))
    return copy.getSrc() != buffer && !copy.getAsyncToken();
  if (auto set = dyn_cast<gpu::MemsetOp>(op))
    return !set.getAsyncToken();
  return false;
}

/// Erases every allocation of `func` that nothing reads: each user only
/// writes it (onlyWrites). Matmuls lowered to kernel calls leave such
/// buffers behind: the buffer of a weight's transpose that became a view
/// (one per weight shape: bufferization shares it between the projections
/// of that shape).
void eraseUnreadAllocations(Operation *func) {
  SmallVector<Operation *> dead;
  func->walk([&](Operation *alloc) {
    Value buffer = allocatedBuffer(alloc);
    if (buffer && llvm::all_of(buffer.getUsers(), [&](Operation *user) {
          return onlyWrites(user, buffer);
        }))
      dead.push_back(alloc);
  });
  for (Operation *alloc : dead) {
    for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
      user->erase();
    alloc->erase();
  }
}

/// Moves every allocation down to just before the first operation of its
/// block that uses the buffer, so that it can take a block freed by then
/// (bufferization allocates a zero-initialised accumulator where its fill
/// was, which may be the function's start). An allocation with a user
/// outside its block stays.
void sinkAllocations(Operation *func) {
  SmallVector<Operation *> allocs;
  func->walk([&](Operation *op) {
    if (allocatedBuffer(op))
      allocs.push_back(op);
  });
  for (Operation *alloc : allocs) {
    Block *block = alloc->getBlock();
    Operation *first = nullptr;
    bool local = true;
    for (Operation *user : allocatedBuffer(alloc).getUsers()) {
      Operation *at = block->findAncestorOpInBlock(*user);
      if (!at) {
        local = false;
        break;
      }
      if (!first || at->isBeforeInBlock(first))
        first = at;
    }
    if (local && first && alloc->isBeforeInBlock(first))
      alloc->moveBefore(first);
  }
}

struct EarlyDeallocPass : impl::EarlyDeallocBase<EarlyDeallocPass> {
  void runOnOperation() override {
    eraseUnreadAllocations(getOperation());
    sinkAllocations(getOperation());
    SmallVector<Operation *> deallocs;
    getOperation()->walk([&](Operation *op) {
      if (freedBuffer(op))
        deallocs.push_back(op);
    });
    for (Operation *dealloc : deallocs) {
      Value buffer = freedBuffer(dealloc);
      Operation *alloc = buffer.getDefiningOp();
      if (!alloc || allocatedBuffer(alloc) != buffer ||
          alloc->getBlock() != dealloc->getBlock())
        continue;
      Operation *last = lastUseInBlock(buffer, dealloc->getBlock(), dealloc);
      if (last && last->isBeforeInBlock(dealloc))
        dealloc->moveAfter(last);
    }
  }
};

} // namespace
} // namespace tfc
