//===- MergeModules.cpp - One gpu.module per model ------------------------===//

#include "tfc/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_GPUMERGEMODULES
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

struct GPUMergeModulesPass : impl::GPUMergeModulesBase<GPUMergeModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
    if (modules.size() < 2)
      return;
    OpBuilder b(modules.front());
    auto merged = gpu::GPUModuleOp::create(b, module.getLoc(), "tfc_kernels");
    if (ArrayAttr targets = modules.front().getTargetsAttr())
      merged.setTargetsAttr(targets);
    SymbolTable mergedTable(merged);
    // Old (module, symbol) -> new symbol in the merged module.
    llvm::DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp old : modules) {
      for (Operation &op :
           llvm::make_early_inc_range(old.getBody()->getOperations())) {
        auto sym = dyn_cast<SymbolOpInterface>(&op);
        if (!sym)
          continue;
        StringAttr oldName = sym.getNameAttr();
        op.remove();
        // insert() renames on a clash.
        StringAttr newName = mergedTable.insert(&op);
        renamed[{old.getNameAttr(), oldName}] = newName;
      }
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      SymbolRefAttr ref = launch.getKernel();
      auto it = renamed.find({ref.getRootReference(), ref.getLeafReference()});
      if (it == renamed.end())
        return;
      launch.setKernelAttr(SymbolRefAttr::get(
          merged.getNameAttr(), {FlatSymbolRefAttr::get(it->second)}));
    });
    for (gpu::GPUModuleOp old : modules)
      old.erase();
  }
};

} // namespace
} // namespace tfc
