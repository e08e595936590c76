//===- ParallelLoopsToGPU.cpp - Host loop nests become GPU launches -------===//
//
// Each top-level scf.parallel of a host function becomes one gpu.launch of
// 1-D blocks: the iteration space is linearised, the innermost dimension
// fastest, and each thread runs the body for one point.
//
//===----------------------------------------------------------------------===//

#include "tfc/Codegen/NVPTX/HostCode.h"
#include "tfc/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_PARALLELLOOPSTOGPU
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// memref.copy %src, %dst -> scf.parallel over %dst's shape.
void copyToLoop(memref::CopyOp copy) {
  OpBuilder b(copy);
  Location loc = copy.getLoc();
  auto type = cast<MemRefType>(copy.getTarget().getType());
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  SmallVector<Value> lbs(type.getRank(), zero), steps(type.getRank(), one);
  SmallVector<Value> ubs;
  for (int64_t d = 0; d < type.getRank(); ++d)
    ubs.push_back(memref::DimOp::create(b, loc, copy.getTarget(), d));
  Value src = copy.getSource(), dst = copy.getTarget();
  scf::ParallelOp::create(b, loc, lbs, ubs, steps,
                          [&](OpBuilder &nb, Location nloc, ValueRange ivs) {
                            Value v =
                                memref::LoadOp::create(nb, nloc, src, ivs);
                            memref::StoreOp::create(nb, nloc, v, dst, ivs);
                          });
  copy.erase();
}

LogicalResult loopToLaunch(scf::ParallelOp loop, int64_t blockSize) {
  if (loop.getNumReductions() != 0)
    return loop.emitError("tfc-parallel-loops-to-gpu: a parallel loop with "
                          "reductions cannot become a GPU launch");
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  // Trip count of each dimension and of the whole nest, folded to
  // constants where the bounds are (static shapes): the kernel then
  // delinearises by constants (a multiply and shift) instead of dividing
  // by values it takes as arguments.
  SmallVector<Value> trips;
  Value total = arith::ConstantIndexOp::create(b, loc, 1);
  for (auto [lb, ub, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    Value span = b.createOrFold<arith::SubIOp>(loc, ub, lb);
    Value trip = b.createOrFold<arith::CeilDivUIOp>(loc, span, step);
    trips.push_back(trip);
    total = b.createOrFold<arith::MulIOp>(loc, total, trip);
  }
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value threads = arith::ConstantIndexOp::create(b, loc, blockSize);
  Value blocks = b.createOrFold<arith::CeilDivUIOp>(loc, total, threads);
  // An empty iteration space launches nothing (a zero grid is an error).
  Value nonEmpty =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, total,
                            arith::ConstantIndexOp::create(b, loc, 0));
  auto ifNonEmpty = scf::IfOp::create(b, loc, nonEmpty, /*withElse=*/false);
  b.setInsertionPointToStart(&ifNonEmpty.getThenRegion().front());
  auto launch =
      gpu::LaunchOp::create(b, loc, blocks, one, one, threads, one, one);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value id = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, launch.getBlockIds().x, threads),
      launch.getThreadIds().x);
  Value inside =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, id, total);
  auto guard = scf::IfOp::create(b, loc, inside, /*withElse=*/false);
  gpu::TerminatorOp::create(b, loc);

  b.setInsertionPointToStart(&guard.getThenRegion().front());
  // Delinearise, the last dimension fastest.
  IRMapping map;
  Value rest = id;
  SmallVector<Value> ivs(trips.size());
  for (int64_t d = int64_t(trips.size()) - 1; d >= 0; --d) {
    Value idx = d == 0 ? rest : arith::RemUIOp::create(b, loc, rest, trips[d]);
    if (d > 0)
      rest = arith::DivUIOp::create(b, loc, rest, trips[d]);
    Value scaled = arith::MulIOp::create(b, loc, idx, loop.getStep()[d]);
    ivs[d] = arith::AddIOp::create(b, loc, loop.getLowerBound()[d], scaled);
  }
  map.map(loop.getInductionVars(), ivs);
  for (Operation &op : loop.getBody()->without_terminator())
    b.clone(op, map);
  loop.erase();
  return success();
}

/// Ops that may run inside a single-thread kernel: memory accesses,
/// arithmetic and structured control flow made of them.
bool movable(Operation *op) {
  if (isa<gpu::LaunchOp, memref::AllocOp, memref::AllocaOp, memref::DeallocOp>(
          op))
    return false;
  Dialect *d = op->getDialect();
  bool known =
      isa<memref::LoadOp, memref::StoreOp>(op) ||
      isa_and_nonnull<arith::ArithDialect, math::MathDialect>(d) ||
      isa<scf::ForOp, scf::IfOp, scf::YieldOp, scf::ParallelOp, scf::ReduceOp,
          scf::ReduceReturnOp, affine::AffineApplyOp>(op);
  if (!known)
    return false;
  for (Region &region : op->getRegions())
    for (Operation &inner : region.getOps())
      if (!movable(&inner))
        return false;
  return true;
}

bool touchesMemory(Operation *op) {
  return op
      ->walk([](Operation *inner) {
        return isa<memref::LoadOp, memref::StoreOp>(inner)
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// Host code that reads or writes buffers outside any loop nest that became
/// a launch (a rank-0 op, a reduction over every dimension) would touch
/// device memory from the CPU: each run of such ops becomes one
/// single-thread launch.
LogicalResult wrapHostMemoryAccesses(func::FuncOp func) {
  SmallVector<SmallVector<Operation *>> runs;
  func.walk([&](Block *block) {
    Operation *parent = block->getParentOp();
    if (isa<gpu::LaunchOp>(parent) || !isHostCode(parent))
      return; // kernel code
    if (parent != func.getOperation() && movable(parent))
      return; // moves with its parent
    SmallVector<Operation *> run;
    auto flush = [&]() {
      // Arithmetic around the accesses stays on the host unless it is
      // between them.
      while (!run.empty() && !touchesMemory(run.back()))
        run.pop_back();
      while (!run.empty() && !touchesMemory(run.front()))
        run.erase(run.begin());
      if (!run.empty())
        runs.push_back(run);
      run.clear();
    };
    for (Operation &op : *block) {
      if (!op.hasTrait<OpTrait::IsTerminator>() && movable(&op) &&
          (!run.empty() || touchesMemory(&op)))
        run.push_back(&op);
      else
        flush();
    }
    flush();
  });
  for (SmallVector<Operation *> &run : runs) {
    llvm::SmallPtrSet<Operation *, 16> inRun(run.begin(), run.end());
    auto usedInRun = [&](OpOperand &use) {
      Operation *top = use.getOwner();
      while (top && !inRun.contains(top))
        top = top->getParentOp();
      return top != nullptr;
    };
    for (Operation *op : run)
      for (Value result : op->getResults()) {
        if (llvm::all_of(result.getUses(), usedInRun))
          continue;
        // A constant, or pure arithmetic on values from before the run,
        // that the host uses too: the host gets its own copy.
        bool fromOutside = llvm::all_of(op->getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return !def || !inRun.contains(def);
        });
        if (op->getNumRegions() == 0 && isPure(op) && fromOutside) {
          OpBuilder cb(run.front());
          Value copy = cb.clone(*op)->getResult(
              cast<OpResult>(result).getResultNumber());
          result.replaceUsesWithIf(
              copy, [&](OpOperand &use) { return !usedInRun(use); });
          continue;
        }
        return op->emitError("tfc-parallel-loops-to-gpu: a value computed "
                             "from device memory is used by host code");
      }
    OpBuilder b(run.front());
    Location loc = run.front()->getLoc();
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    auto launch = gpu::LaunchOp::create(b, loc, one, one, one, one, one, one);
    Block &body = launch.getBody().front();
    b.setInsertionPointToStart(&body);
    auto term = gpu::TerminatorOp::create(b, loc);
    for (Operation *op : run)
      op->moveBefore(term);
  }
  return success();
}

struct ParallelLoopsToGPUPass
    : impl::ParallelLoopsToGPUBase<ParallelLoopsToGPUPass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<memref::CopyOp> copies;
    func.walk([&](memref::CopyOp copy) {
      if (isHostCode(copy))
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies)
      copyToLoop(copy);

    SmallVector<scf::ParallelOp> loops;
    func.walk([&](scf::ParallelOp loop) {
      if (isHostCode(loop) && !loop->getParentOfType<scf::ParallelOp>())
        loops.push_back(loop);
    });
    for (scf::ParallelOp loop : loops)
      if (failed(loopToLaunch(loop, blockSize)))
        return signalPassFailure();
    if (failed(wrapHostMemoryAccesses(func)))
      return signalPassFailure();
  }
};

} // namespace
} // namespace tfc
