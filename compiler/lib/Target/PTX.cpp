//===- PTX.cpp - The PTX of a lowered GPU model ---------------------------===//

#include "tfc/Target/PTX.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

namespace tfc {

LogicalResult writePTX(ModuleOp module, const std::string &path,
                       std::string &error) {
  std::string ptx;
  int objects = 0;
  for (auto binary : module.getOps<gpu::BinaryOp>())
    for (Attribute attr : binary.getObjects()) {
      auto object = cast<gpu::ObjectAttr>(attr);
      if (object.getFormat() != gpu::CompilationTarget::Assembly) {
        error = "gpu.binary @" + binary.getName().str() + " holds no PTX";
        return failure();
      }
      ptx += object.getObject().getValue();
      ++objects;
    }
  if (objects != 1) {
    error = objects == 0 ? "the model has no GPU kernels"
                         : "the model has " + std::to_string(objects) +
                               " kernel modules, expected one";
    return failure();
  }
  auto out = openOutputFile(path, &error);
  if (!out)
    return failure();
  out->os() << ptx;
  out->keep();
  return success();
}

} // namespace tfc
