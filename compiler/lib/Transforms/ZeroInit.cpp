//===- ZeroInit.cpp - A matmul's C made all zeros before it ---------------===//

#include "tfc/Transforms/ZeroInit.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace tfc {
namespace {

/// Whether `fill` writes zeros.
bool isZeroFill(linalg::FillOp fill) {
  return matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

/// The last zero fill of `c` (an allocation) before `matmul` in its block,
/// when every other user of C comes before the fill or after the matmul,
/// and none before the matmul is a view (whose accesses could fall in
/// between).
linalg::FillOp earlierZeroFill(Operation *matmul, Value c) {
  // Only a buffer of its own: a view's source, or another argument, could
  // be written between without being a user of C.
  if (!c.getDefiningOp<memref::AllocOp>())
    return nullptr;
  linalg::FillOp fill;
  for (Operation *user : c.getUsers()) {
    auto f = dyn_cast<linalg::FillOp>(user);
    if (f && f->getBlock() == matmul->getBlock() && f.getOutputs()[0] == c &&
        isZeroFill(f) && f->isBeforeInBlock(matmul) &&
        (!fill || fill->isBeforeInBlock(f)))
      fill = f;
  }
  if (!fill)
    return nullptr;
  for (Operation *user : c.getUsers()) {
    if (user == fill || user == matmul)
      continue;
    Operation *at = matmul->getBlock()->findAncestorOpInBlock(*user);
    if (!at)
      return nullptr;
    if (at->isBeforeInBlock(matmul) &&
        (!at->isBeforeInBlock(fill) || isa<ViewLikeOpInterface>(at)))
      return nullptr;
  }
  return fill;
}

} // namespace

Operation *foldableZeroInit(Operation *matmul, Value c) {
  Operation *prev = matmul->getPrevNode();
  while (prev && isMemoryEffectFree(prev))
    prev = prev->getPrevNode();
  if (auto fill = dyn_cast_or_null<linalg::FillOp>(prev))
    if (fill.getOutputs()[0] == c && isZeroFill(fill))
      return fill;
  if (linalg::FillOp fill = earlierZeroFill(matmul, c))
    return fill;
  auto copy = dyn_cast_or_null<memref::CopyOp>(prev);
  if (!copy || copy.getTarget() != c || copy.getSource() == c)
    return nullptr;
  Value source = copy.getSource();
  Operation *lastWrite = nullptr;
  for (Operation *user : source.getUsers()) {
    if (user->getBlock() != copy->getBlock())
      return nullptr;
    if (!user->isBeforeInBlock(copy))
      continue;
    if (isa<ViewLikeOpInterface>(user))
      return nullptr; // writes through a view could not be ordered
    auto reads = [&](Operation *op) {
      auto copyOp = dyn_cast<memref::CopyOp>(op);
      return copyOp && copyOp.getSource() == source;
    };
    if (reads(user))
      continue;
    if (!lastWrite || lastWrite->isBeforeInBlock(user))
      lastWrite = user;
  }
  auto fill = dyn_cast_or_null<linalg::FillOp>(lastWrite);
  if (!fill || fill.getOutputs()[0] != source || !isZeroFill(fill))
    return nullptr;
  return copy;
}

} // namespace tfc
