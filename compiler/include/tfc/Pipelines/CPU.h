//===- CPU.h - tfc's CPU compilation pipeline -------------------*- C++ -*-===//

#ifndef TFC_PIPELINES_CPU_H
#define TFC_PIPELINES_CPU_H

#include "tfc/Pipelines/Options.h"

#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace tfc {

/// The CPU pipeline's options: tfc-opt's `--tfc-cpu-pipeline="..."` takes
/// them by these names, tfc-compile sets them from its flags.
struct CPUPipelineOptions : mlir::PassPipelineOptions<CPUPipelineOptions> {
  Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("Recognise attention, softmax and the norms and use the "
                     "fused kernels; false decomposes every transformer op "
                     "(the unfused build)"),
      llvm::cl::init(true)};
  Option<QuantizeWeights> quantizeWeights{
      *this, "quantize-weights",
      llvm::cl::desc("Quantize the matmuls' weights as the kernels pack "
                     "them: none, int8 (a scale per output column) or int4 "
                     "(a scale per output column and 128 input rows)"),
      llvm::cl::init(QuantizeWeights::None), quantizeWeightsValues()};
  Option<QuantizeActivations> quantizeActivations{
      *this, "quantize-activations",
      llvm::cl::desc("With quantize-weights: int8 quantizes those products' "
                     "activations too (per row and block of 128), for "
                     "integer dot products; or none"),
      llvm::cl::init(QuantizeActivations::None), quantizeActivationsValues()};

  /// Fails, with `error` set, where the options contradict each other.
  /// `prefix` comes before each option's name in the message ("--" for
  /// tfc-compile's flags).
  mlir::LogicalResult verify(std::string &error,
                             llvm::StringRef prefix = "") const {
    return verifyQuantization(quantizeWeights, quantizeActivations, error,
                              prefix);
  }
};

/// The graph step of every target: the transformer fusions, or for the
/// unfused build the decomposition of every transformer op.
void buildGraphPipeline(mlir::OpPassManager &pm, bool fuse);

/// The CPU lowering after the graph step, from the graph IR to the LLVM
/// dialect (anchored on builtin.module).
void buildCPULoweringPipeline(mlir::OpPassManager &pm,
                              const CPUPipelineOptions &options);

/// The graph step, then the CPU lowering.
void buildCPUPipeline(mlir::OpPassManager &pm,
                      const CPUPipelineOptions &options);

/// Steps the CPU and NVPTX lowerings share: TOSA to linalg, tensor, arith
/// (then elementwise fusion); one-shot bufferization with function results
/// as out-parameters.
void addTosaToLinalgPasses(mlir::OpPassManager &pm);
void addBufferizePasses(mlir::OpPassManager &pm);

/// Registers `tfc-cpu-pipeline` (options as above, verified) and
/// `tfc-cpu-pipeline-unfused` (fuse=false) with the pass registry, so that
/// tfc-opt can run them.
void registerCPUPipelines();

} // namespace tfc

#endif // TFC_PIPELINES_CPU_H
