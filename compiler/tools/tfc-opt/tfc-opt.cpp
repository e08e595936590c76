//===- tfc-opt.cpp - tfc's optimiser driver -------------------------------===//
//
// MlirOptMain with the transformer dialect, tfc's passes and every upstream
// dialect and pass registered, so any IR of the pipeline can be inspected
// after any pass (--mlir-print-ir-after-all).
//
//===----------------------------------------------------------------------===//

#include "tfc/Conversion/Passes.h"
#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Transforms/Passes.h"
#include "tfc/Pipelines/CPU.h"
#include "tfc/Pipelines/GPU.h"
#include "tfc/Support/InputLimits.h"
#include "tfc/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  tfc::transformer::registerTransformerPasses();
  tfc::registerTFCConversionPasses();
  tfc::registerTFCTransformsPasses();
  tfc::registerCPUPipelines();
  tfc::registerNVPTXPipelines();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR inside the pipeline.
  mlir::registerAllToLLVMIRTranslations(registry);
  registry.insert<tfc::transformer::TransformerDialect>();
  tfc::registerKernelCallBufferization(registry);

  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "tfc optimiser driver\n", registry);
  // Nesting the parser cannot take is refused before it runs (standard
  // input is read by MlirOptMain alone).
  if (input != "-") {
    auto buffer = llvm::MemoryBuffer::getFile(input, /*IsText=*/true);
    if (buffer) {
      std::string error = tfc::checkNesting((*buffer)->getBuffer(), input);
      if (!error.empty()) {
        llvm::errs() << "tfc-opt: error: " << error << "\n";
        return 1;
      }
    }
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}
