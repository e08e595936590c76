//===- SerializeSmallLoops.cpp - Keep small parallel loops on one thread --===//

#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/CallInterfaces.h"

#include <algorithm>
#include <optional>

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_SERIALIZESMALLLOOPS
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// Below this many operations (a loop body's operations times its trip
/// counts, before vectorisation) a loop runs on one thread: a parallel
/// region costs the threads' fork and join, a few microseconds, about what
/// this much work takes on one core.
constexpr int64_t kMinParallelWork = int64_t(1) << 16;

/// a * b for a, b >= 0, capped at kMinParallelWork (no overflow).
int64_t cappedProduct(int64_t a, int64_t b) {
  return a != 0 && b > kMinParallelWork / a ? kMinParallelWork : a * b;
}

/// Iterations of a loop with bounds lb, ub and step, when all are constants.
std::optional<int64_t> tripCount(Value lb, Value ub, Value step) {
  std::optional<int64_t> l = getConstantIntValue(lb),
                         u = getConstantIntValue(ub),
                         s = getConstantIntValue(step);
  if (!l || !u || !s || *s <= 0)
    return std::nullopt;
  return *u > *l ? (*u - *l + *s - 1) / *s : 0;
}

/// Iterations of all dimensions of `loop`, when constant.
std::optional<int64_t> tripCount(scf::ParallelOp loop) {
  int64_t total = 1;
  for (auto [lb, ub, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    std::optional<int64_t> n = tripCount(lb, ub, step);
    if (!n)
      return std::nullopt;
    total = cappedProduct(total, *n);
  }
  return total;
}

/// The operations `region` runs, nested loops counted once per iteration;
/// nullopt when a loop's trip count is not constant or a call's work is
/// unknown.
std::optional<int64_t> work(Region &region) {
  int64_t total = 0;
  for (Block &block : region)
    for (Operation &op : block) {
      std::optional<int64_t> iterations = 1;
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        iterations = tripCount(loop.getLowerBound(), loop.getUpperBound(),
                               loop.getStep());
      } else if (auto loop = dyn_cast<scf::ParallelOp>(op)) {
        iterations = tripCount(loop);
      } else if (isa<CallOpInterface>(op)) {
        return std::nullopt;
      }
      if (!iterations)
        return std::nullopt;
      int64_t body = op.getNumRegions() == 0 ? 1 : 0;
      for (Region &r : op.getRegions()) {
        std::optional<int64_t> w = work(r);
        if (!w)
          return std::nullopt;
        body = std::min(body + *w, kMinParallelWork);
      }
      total += cappedProduct(*iterations, body);
      if (total >= kMinParallelWork)
        return total; // large enough; the exact count does not matter
    }
  return total;
}

struct SerializeSmallLoopsPass
    : impl::SerializeSmallLoopsBase<SerializeSmallLoopsPass> {
  void runOnOperation() override {
    SmallVector<scf::ParallelOp> small;
    getOperation()->walk([&](scf::ParallelOp loop) {
      if (loop->getParentOfType<scf::ParallelOp>() || loop.getNumResults())
        return;
      std::optional<int64_t> iterations = tripCount(loop);
      std::optional<int64_t> body = work(loop.getRegion());
      if (iterations && body &&
          cappedProduct(*iterations, *body) < kMinParallelWork)
        small.push_back(loop);
    });
    IRRewriter rewriter(&getContext());
    for (scf::ParallelOp loop : small) {
      rewriter.setInsertionPoint(loop);
      if (failed(scf::parallelForToNestedFors(rewriter, loop)))
        return signalPassFailure();
    }
  }
};

} // namespace
} // namespace tfc
