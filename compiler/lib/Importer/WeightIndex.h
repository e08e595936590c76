//===- WeightIndex.h - The tensors a model directory holds ------*- C++ -*-===//
//
// Names, dtypes and shapes of the tensors in `model.safetensors`, or in the
// shards listed by `model.safetensors.index.json`. Only headers are read (the
// runtime's reader maps the file; no weight data is touched).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_WEIGHTINDEX_H
#define TFC_LIB_IMPORTER_WEIGHTINDEX_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include "tfc/runtime/safetensors.h"

#include <memory>
#include <string>
#include <vector>

namespace tfc::importer {

struct WeightInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  /// The file that holds it (for messages).
  std::string file;
};

class WeightIndex {
public:
  /// Opens `dir`/model.safetensors, or the shards named by
  /// `dir`/model.safetensors.index.json.
  static mlir::FailureOr<WeightIndex> load(llvm::StringRef dir,
                                           std::string &error);

  const WeightInfo *lookup(llvm::StringRef name) const;
  /// The prefix (e.g. "bert.", "model." or "") under which `suffix` exists,
  /// or failure when no name ends with it.
  mlir::FailureOr<std::string> findPrefix(llvm::StringRef suffix) const;
  /// The file named in messages about a missing tensor.
  const std::string &primaryFile() const { return primary; }

private:
  std::string primary;
  llvm::StringMap<WeightInfo> weights;
};

} // namespace tfc::importer

#endif // TFC_LIB_IMPORTER_WEIGHTINDEX_H
