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

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  tfc::transformer::registerTransformerPasses();
  tfc::registerTFCConversionPasses();
  tfc::registerCPUPipelines();
  tfc::registerNVPTXPipelines();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates kernels to LLVM IR inside the pipeline.
  mlir::registerAllToLLVMIRTranslations(registry);
  registry.insert<tfc::transformer::TransformerDialect>();
  tfc::registerCPUBufferizationModels(registry);

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tfc optimiser driver\n", registry));
}
