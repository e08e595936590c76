//===- InputChecks.h - What tfc-compile refuses in an MLIR graph -*- C++
//-*-===//
//
// Checks of a graph before it is compiled, each failing with an error at
// the op it names: code the input brings (external calls), recursion, and
// TOSA shapes upstream's verifier lets through.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_TOOLS_TFC_COMPILE_INPUTCHECKS_H
#define TFC_TOOLS_TFC_COMPILE_INPUTCHECKS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace tfc {

/// A declared but undefined function, or LLVM dialect code: a model graph
/// calls nothing outside itself (tfc-compile --allow-external-calls skips
/// this).
mlir::LogicalResult checkNoExternalCode(mlir::ModuleOp module);
/// A tosa.matmul whose operands or result disagree.
mlir::LogicalResult checkMatmulShapes(mlir::ModuleOp module);
/// A function that calls itself, directly or through others.
mlir::LogicalResult checkNoRecursion(mlir::ModuleOp module);

/// Why -o `outputFile` cannot be written (empty when it can): no name, a
/// directory that does not exist, or a file the compile reads (`inputFile`,
/// or a .json or .safetensors file of the Hugging Face directory `hfDir`).
std::string checkOutputPath(const std::string &outputFile,
                            const std::string &inputFile,
                            const std::string &hfDir);

} // namespace tfc

#endif // TFC_TOOLS_TFC_COMPILE_INPUTCHECKS_H
