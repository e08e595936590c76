//===- ModelLibrary.h - Emit a model library --------------------*- C++ -*-===//
//
// The host side of every model is CPU code: for the CPU target all of it,
// for NVPTX the code that allocates device buffers and launches the kernels
// whose cubin the module embeds. Both become a shared library with the
// runtime's ABI (runtime/include/tfc/runtime/abi.h).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_TARGET_MODELLIBRARY_H
#define TFC_TARGET_MODELLIBRARY_H

#include "tfc/Target/Manifest.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <vector>

namespace tfc {

enum class LibraryEmitKind { SharedLibrary, Object, LLVMIR };

struct LibraryOptions {
  LibraryEmitKind kind = LibraryEmitKind::SharedLibrary;
  std::string outputPath;
  /// Link the CPU micro-kernel archive and OpenMP (CPU models); GPU models
  /// need neither.
  bool linkMicroKernels = true;
  /// The micro-kernel archive and the linker driver used for shared
  /// libraries.
  std::string ukernelArchive;
  std::string linker;
  /// When positive, the library sets this many OpenMP threads when it is
  /// loaded (the runtime's --threads, applied later, overrides it).
  int defaultThreads = 0;
};

/// Translates `module` (LLVM dialect only) to LLVM IR, adds the ABI entry
/// points (`tfc_model_run`, `tfc_model_manifest`) for `manifest`, optimises
/// at -O3 for the host CPU and writes the requested artifact. With
/// `variants` (a model built for several batch sizes or sequence lengths, in
/// abi.h's order, the last one `manifest`'s), also `tfc_model_variants` over
/// a run function and a manifest for each; a shared library of variants is
/// compiled a variant per thread (as many as the host has), an object each.
/// Returns an error message on failure.
mlir::LogicalResult
emitModelLibrary(mlir::ModuleOp module, const Manifest &manifest,
                 const LibraryOptions &options, std::string &error,
                 llvm::ArrayRef<ModelVariant> variants = {});

/// A model of several variants (`variants`, their entry functions in
/// `module`) as one module per variant, in `variants`' order: each holds
/// everything in `module` but the other variants' entry functions, so that
/// the variants lower and compile on their own, in parallel.
std::vector<mlir::OwningOpRef<mlir::ModuleOp>>
splitVariants(mlir::ModuleOp module, llvm::ArrayRef<ModelVariant> variants);

/// The shared library of `variants` from `modules`, splitVariants' modules
/// lowered to the LLVM dialect, one per variant: each compiled to an object
/// on a thread of its own (as many as the host has), joined with the
/// manifests and entry points. `options.kind` must be SharedLibrary.
mlir::LogicalResult emitVariantLibrary(llvm::ArrayRef<mlir::ModuleOp> modules,
                                       const Manifest &manifest,
                                       const LibraryOptions &options,
                                       std::string &error,
                                       llvm::ArrayRef<ModelVariant> variants);

} // namespace tfc

#endif // TFC_TARGET_MODELLIBRARY_H
