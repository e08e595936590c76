//===- Variants.h - A model built for several sizes -------------*- C++ -*-===//
//
// tfc-compile's builds of a model (a Hugging Face directory, an ONNX file)
// for several batch sizes or sequence lengths, imported into one module
// (abi.h "Variants").
//
//===----------------------------------------------------------------------===//

#ifndef TFC_TOOLS_TFC_COMPILE_VARIANTS_H
#define TFC_TOOLS_TFC_COMPILE_VARIANTS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tfc {

/// A module holding a model's builds for several batch sizes or sequence
/// lengths (abi.h "Variants"): one function per batch size and length.
struct VariantBuilds {
  /// Increasing; one entry where that size does not vary.
  std::vector<int64_t> batches, lengths;
  /// The last build's function (the largest batch, the longest length);
  /// the others' are entryOf's.
  std::string entry;

  bool empty() const { return batches.size() * lengths.size() < 2; }

  /// The function of the build for `batch` sequences of `length` tokens:
  /// the last build keeps the importer's name `name`, the others take a
  /// suffix for each size that varies (main_b1_s16, main_s16).
  std::string entryOf(llvm::StringRef name, int64_t batch,
                      int64_t length) const;

  /// " (in each of 3 sequence lengths: 4, 8, 13)", " (in each of 4 builds:
  /// batch sizes 1, 8; sequence lengths 16, 128)".
  std::string summary() const;
};

/// One build of the model: its import for `batch` sequences of `length`
/// tokens, a module of one function; failure with `error` set.
using ImportBuild =
    llvm::function_ref<mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>(
        int64_t batch, int64_t length)>;

/// Imports the model `name` (its directory or file, for messages) once for
/// each batch size and length of `builds` into one module: the last build's
/// function keeps its name (stored in `builds.entry`), the others are
/// renamed by entryOf. Every build must carry the same module attributes
/// (an ONNX import's record of what it compiled in) and differ from the
/// largest in its shapes (a file may fix the dimensions the sizes set).
/// Empty on failure, with `error` set.
mlir::OwningOpRef<mlir::ModuleOp> importVariants(llvm::StringRef name,
                                                 VariantBuilds &builds,
                                                 ImportBuild importBuild,
                                                 std::string &error);

} // namespace tfc

#endif // TFC_TOOLS_TFC_COMPILE_VARIANTS_H
