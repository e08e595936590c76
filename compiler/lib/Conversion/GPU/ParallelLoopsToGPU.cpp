//===- ParallelLoopsToGPU.cpp - Host loop nests become GPU launches -------===//
//
// Each top-level scf.parallel of a host function becomes one gpu.launch of
// 1-D blocks: the iteration space is linearised, the innermost dimension
// fastest, and each thread runs the body for one point.
//
//===----------------------------------------------------------------------===//

#include "HostCode.h"
#include "tfc/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

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
  // Trip count of each dimension and of the whole nest.
  SmallVector<Value> trips;
  Value total = arith::ConstantIndexOp::create(b, loc, 1);
  for (auto [lb, ub, step] :
       llvm::zip(loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    Value span = arith::SubIOp::create(b, loc, ub, lb);
    Value trip = arith::CeilDivUIOp::create(b, loc, span, step);
    trips.push_back(trip);
    total = arith::MulIOp::create(b, loc, total, trip);
  }
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value threads = arith::ConstantIndexOp::create(b, loc, blockSize);
  Value blocks = arith::CeilDivUIOp::create(b, loc, total, threads);
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
  }
};

} // namespace
} // namespace tfc
