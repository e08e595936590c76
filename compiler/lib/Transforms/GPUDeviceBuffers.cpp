//===- GPUDeviceBuffers.cpp - A GPU model's buffers live on the device ----===//

#include "tfc/Codegen/NVPTX/HostCode.h"
#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_GPUDEVICEBUFFERS
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// Frees `buffer` before every return of `func`. (Upstream's ownership-based
/// deallocation cannot see through kernel launches, whose memory effects are
/// unknown to it; `tfc-early-dealloc` then moves each free up to just after
/// the buffer's last use, and the runtime's caching allocator hands the
/// block to the next allocation.)
void freeAtReturns(func::FuncOp func, Value buffer) {
  func.walk([&](func::ReturnOp ret) {
    OpBuilder b(ret);
    gpu::DeallocOp::create(b, ret.getLoc(), Type(), ValueRange(), buffer);
  });
}

struct GPUDeviceBuffersPass : impl::GPUDeviceBuffersBase<GPUDeviceBuffersPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (isHostCode(op) && isa<memref::AllocOp, memref::AllocaOp,
                                memref::DeallocOp, memref::GetGlobalOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        auto dev = gpu::AllocOp::create(
            b, loc, alloc.getType(), /*asyncToken=*/Type(),
            /*asyncDependencies=*/ValueRange(), alloc.getDynamicSizes(),
            alloc.getSymbolOperands(), /*hostShared=*/false);
        alloc.replaceAllUsesWith(dev.getMemref());
        alloc.erase();
        freeAtReturns(func, dev.getMemref());
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(b, loc, /*asyncToken=*/Type(), ValueRange(),
                               dealloc.getMemref());
        dealloc.erase();
      } else if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
        // The kernels cannot read host globals: copy the constant into a
        // device buffer, freed before every return.
        auto type = cast<MemRefType>(global.getType());
        b.setInsertionPointAfter(global);
        auto dev = gpu::AllocOp::create(b, loc, type, Type(), ValueRange(),
                                        ValueRange(), ValueRange(), false);
        global.getResult().replaceAllUsesWith(dev.getMemref());
        gpu::MemcpyOp::create(b, loc, Type(), ValueRange(), dev.getMemref(),
                              global.getResult());
        freeAtReturns(func, dev.getMemref());
      } else {
        op->emitError("tfc-gpu-device-buffers: stack allocation in the host "
                      "code of a GPU model");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
} // namespace tfc
