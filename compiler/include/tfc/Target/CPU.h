//===- CPU.h - Emit a CPU model library -------------------------*- C++ -*-===//

#ifndef TFC_TARGET_CPU_H
#define TFC_TARGET_CPU_H

#include "tfc/Target/Manifest.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace tfc {

enum class CPUEmitKind { SharedLibrary, Object, LLVMIR };

struct CPUEmitOptions {
  CPUEmitKind kind = CPUEmitKind::SharedLibrary;
  std::string outputPath;
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
/// at -O3 for the host CPU and writes the requested artifact. Returns an
/// error message on failure.
mlir::LogicalResult emitCPUArtifact(mlir::ModuleOp module,
                                    const Manifest &manifest,
                                    const CPUEmitOptions &options,
                                    std::string &error);

} // namespace tfc

#endif // TFC_TARGET_CPU_H
