//===- CPU.h - tfc's CPU compilation pipeline -------------------*- C++ -*-===//

#ifndef TFC_PIPELINES_CPU_H
#define TFC_PIPELINES_CPU_H

#include <string>

namespace tfc {

struct CPUPipelineOptions {
  /// Recognise attention/softmax/layer_norm and use the fused kernels; when
  /// false, every transformer op is decomposed to primitives (the unfused
  /// build).
  bool fuse = true;
  /// Quantize the matmuls' weights as the kernels pack them: "none",
  /// "int8" (a scale per output column) or "int4" (a scale per output
  /// column and 128 input rows); weight-only.
  std::string quantizeWeights = "none";
  /// With quantizeWeights: "int8" quantizes those products' activations
  /// too (per row and block of 128), for integer dot products; or "none".
  std::string quantizeActivations = "none";
};

/// The textual pass pipeline (anchored on builtin.module, without the
/// `builtin.module(...)` wrapper) from the graph IR to the LLVM dialect.
std::string getCPUPipeline(const CPUPipelineOptions &options);

/// Registers `tfc-cpu-pipeline` (and `tfc-cpu-pipeline-unfused`) with the
/// pass registry, so that tfc-opt can run them.
void registerCPUPipelines();

} // namespace tfc

#endif // TFC_PIPELINES_CPU_H
