//===- DistinctResults.cpp - A value of its own for every result ----------===//

#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_DISTINCTRESULTS
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

struct DistinctResultsPass : impl::DistinctResultsBase<DistinctResultsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::ReturnOp ret) {
      llvm::SmallDenseSet<Value> seen;
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        Value v = operand.get();
        auto type = dyn_cast<RankedTensorType>(v.getType());
        if (seen.insert(v).second || !type)
          continue;
        // A repeat: a copy of the value, in a tensor of its own.
        Value copy = bufferization::AllocTensorOp::create(
            b, ret.getLoc(), type, /*dynamicSizes=*/ValueRange(),
            /*copy=*/v);
        operand.set(copy);
      }
    });
  }
};

} // namespace
} // namespace tfc
