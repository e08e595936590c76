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

OwningOpRef<ModuleOp> importVariants(MLIRContext &context, StringRef dir,
                                     ImportOptions options,
                                     VariantBuilds &builds,
                                     std::string &error) {
  OwningOpRef<ModuleOp> merged;
  for (int64_t batch : llvm::reverse(builds.batches)) {
    for (int64_t length : llvm::reverse(builds.lengths)) {
      options.batch = batch;
      options.seqLen = length;
      auto imported = importHuggingFace(context, dir, options, error);
      if (failed(imported))
        return nullptr;
      // The importer makes one function.
      auto fns = llvm::to_vector((*imported)->getOps<func::FuncOp>());
      if (fns.size() != 1 ||
          !llvm::hasSingleElement((*imported)->getBody()->getOperations())) {
        error = "the import of " + dir.str() + " made more than one function";
        return nullptr;
      }
      func::FuncOp fn = fns.front();
      if (!merged) {
        builds.entry = fn.getSymName().str();
        merged = std::move(*imported);
        continue;
      }
      fn.setSymName(builds.entryOf(fn.getSymName(), batch, length));
      fn->moveBefore(merged->getBody(), merged->getBody()->end());
    }
  }
  return merged;
}

} // namespace tfc
