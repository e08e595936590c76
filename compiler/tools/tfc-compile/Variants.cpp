//===- Variants.cpp - A model built for several sizes ---------------------===//

#include "Variants.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace tfc {

std::string VariantBuilds::entryOf(StringRef name, int64_t batch,
                                   int64_t length) const {
  if (batch == batches.back() && length == lengths.back())
    return name.str();
  std::string suffix;
  if (batches.size() > 1)
    suffix += "_b" + std::to_string(batch);
  if (lengths.size() > 1)
    suffix += "_s" + std::to_string(length);
  return name.str() + suffix;
}

std::string VariantBuilds::summary() const {
  auto list = [](ArrayRef<int64_t> sizes) {
    return llvm::join(
        llvm::map_range(sizes, [](int64_t n) { return std::to_string(n); }),
        ", ");
  };
  std::string what;
  if (batches.size() == 1)
    what = "sequence lengths: " + list(lengths);
  else if (lengths.size() == 1)
    what = "batch sizes: " + list(batches);
  else
    what = "builds: batch sizes " + list(batches) + "; sequence lengths " +
           list(lengths);
  return " (in each of " + std::to_string(batches.size() * lengths.size()) +
         " " + what + ")";
}

OwningOpRef<ModuleOp> importVariants(StringRef name, VariantBuilds &builds,
                                     ImportBuild importBuild,
                                     std::string &error) {
  OwningOpRef<ModuleOp> merged;
  for (int64_t batch : llvm::reverse(builds.batches)) {
    for (int64_t length : llvm::reverse(builds.lengths)) {
      auto imported = importBuild(batch, length);
      if (failed(imported))
        return nullptr;
      // The importer makes one function.
      auto fns = llvm::to_vector((*imported)->getOps<func::FuncOp>());
      if (fns.size() != 1 ||
          !llvm::hasSingleElement((*imported)->getBody()->getOperations())) {
        error = "the import of " + name.str() + " made more than one function";
        return nullptr;
      }
      func::FuncOp fn = fns.front();
      if (!merged) {
        builds.entry = fn.getSymName().str();
        merged = std::move(*imported);
        continue;
      }
      // What a build shares with the largest: the constants it compiles in
      // (module attributes); what sets it apart: its shapes.
      std::string differs = name.str() + ": the build of batch " +
                            std::to_string(batch) + ", length " +
                            std::to_string(length) + " ";
      std::string largest = " batch " + std::to_string(builds.batches.back()) +
                            ", length " + std::to_string(builds.lengths.back());
      if ((*imported)->getOperation()->getAttrDictionary() !=
          merged->getOperation()->getAttrDictionary()) {
        error = differs + "compiles in other constants than" + largest +
                ": give one size";
        return nullptr;
      }
      if (fn.getFunctionType() ==
          merged->lookupSymbol<func::FuncOp>(builds.entry).getFunctionType()) {
        error = differs + "has the shapes of" + largest +
                " (the model fixes the dimensions " +
                (builds.lengths.size() > 1 ? "--seq-len" : "--batch") +
                " would set): give one size";
        return nullptr;
      }
      fn.setSymName(builds.entryOf(fn.getSymName(), batch, length));
      fn->moveBefore(merged->getBody(), merged->getBody()->end());
    }
  }
  return merged;
}

} // namespace tfc
