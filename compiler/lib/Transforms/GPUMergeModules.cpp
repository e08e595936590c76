//===- GPUMergeModules.cpp - One gpu.module per model ---------------------===//

#include "tfc/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_GPUMERGEMODULES
#include "tfc/Transforms/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// Redirects every launch of a kernel named in `renamed` ((module, kernel)
/// -> kernel in `target`) to `target`.
void redirectLaunches(ModuleOp module, gpu::GPUModuleOp target,
                      const llvm::DenseMap<std::pair<StringAttr, StringAttr>,
                                           StringAttr> &renamed) {
  module.walk([&](gpu::LaunchFuncOp launch) {
    SymbolRefAttr ref = launch.getKernel();
    auto it = renamed.find({ref.getRootReference(), ref.getLeafReference()});
    if (it == renamed.end())
      return;
    launch.setKernelAttr(SymbolRefAttr::get(
        target.getNameAttr(), {FlatSymbolRefAttr::get(it->second)}));
  });
}

/// `text` with every whole occurrence of symbol `name` (`@name`, `"name"`,
/// or its tiles' `@name_tileN`, `"name_tileN"`) written `KERNEL`.
std::string withoutName(StringRef text, StringRef name) {
  std::string out;
  size_t at = 0;
  while (true) {
    size_t hit = text.find(name, at);
    if (hit == StringRef::npos)
      break;
    size_t end = hit + name.size();
    char before = hit ? text[hit - 1] : ' ';
    char next = end < text.size() ? text[end] : ' ';
    bool whole =
        (before == '@' || before == '"') &&
        ((next != '_' && !isalnum(next) && next != '$' && next != '.') ||
         text.substr(end).starts_with("_tile"));
    out += text.substr(at, hit - at);
    out += whole ? StringRef("KERNEL") : name;
    at = end;
  }
  out += text.substr(at);
  return out;
}

/// Keeps one of each set of kernels of `kernels` that print the same but
/// for their names (and their tiles' names), with its tiles; the launches
/// of the others go to it.
void dedupKernels(ModuleOp module, gpu::GPUModuleOp kernels) {
  llvm::StringMap<StringAttr> first; // printed form -> the kept kernel
  llvm::DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
  SmallVector<Operation *> erase;
  for (auto func : kernels.getOps<gpu::GPUFuncOp>()) {
    std::string text;
    llvm::raw_string_ostream os(text);
    func->print(os, OpPrintingFlags().printGenericOpForm().useLocalScope());
    StringRef name = func.getName();
    // The tiles' declarations belong to the kernel's form too.
    SmallVector<Operation *> tiles;
    for (auto global : kernels.getOps<memref::GlobalOp>())
      if (global.getSymName().starts_with((name + "_tile").str())) {
        global->print(os,
                      OpPrintingFlags().printGenericOpForm().useLocalScope());
        tiles.push_back(global);
      }
    auto [it, isNew] =
        first.try_emplace(withoutName(text, name), func.getNameAttr());
    if (isNew)
      continue;
    renamed[{kernels.getNameAttr(), func.getNameAttr()}] = it->second;
    erase.push_back(func);
    erase.append(tiles);
  }
  redirectLaunches(module, kernels, renamed);
  for (Operation *op : erase)
    op->erase();
}

struct GPUMergeModulesPass : impl::GPUMergeModulesBase<GPUMergeModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
    if (modules.size() == 1)
      dedupKernels(module, modules.front());
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
    redirectLaunches(module, merged, renamed);
    for (gpu::GPUModuleOp old : modules)
      old.erase();
    dedupKernels(module, merged);
  }
};

} // namespace
} // namespace tfc
