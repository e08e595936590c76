//===- KernelLaunch.cpp - A built GPU kernel and its launch ---------------===//

#include "tfc/Codegen/NVPTX/KernelLaunch.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;

namespace tfc {

void createLaunch(OpBuilder &b, Location loc, const KernelLaunch &launch,
                  ValueRange buffers) {
  SmallVector<Value> args(buffers);
  for (const TensorMapSpec &spec : launch.tensorMaps)
    args.push_back(createTensorMap(b, loc, args[spec.operand], spec));
  auto dim = [&](int64_t n) -> Value {
    return arith::ConstantIndexOp::create(b, loc, n);
  };
  Value dynamicShared;
  if (launch.dynamicSharedBytes)
    dynamicShared = arith::ConstantIntOp::create(b, loc, b.getI32Type(),
                                                 launch.dynamicSharedBytes);
  gpu::LaunchFuncOp::create(
      b, loc, launch.kernel,
      gpu::KernelDim3{dim(launch.gridX), dim(launch.gridY), dim(1)},
      gpu::KernelDim3{dim(launch.blockX), dim(1), dim(1)}, dynamicShared, args);
}

} // namespace tfc
