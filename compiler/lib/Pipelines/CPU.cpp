//===- CPU.cpp - tfc's CPU compilation pipeline ---------------------------===//

#include "tfc/Pipelines/CPU.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace tfc {

std::string getCPUPipeline(const CPUPipelineOptions &options) {
  std::string p;
  // Graph level: fuse, then lower the fused ops to micro-kernel calls; the
  // unfused build decomposes every transformer op instead.
  if (options.fuse)
    p += "transformer-fuse,convert-transformer-to-cpu,";
  else
    p += "transformer-decompose,";
  p += "func.func(tosa-to-linalg-named,tosa-to-linalg,tosa-to-arith,"
       "tosa-to-tensor),canonicalize,cse,"
       "func.func(tfc-fuse-elementwise),canonicalize,cse,";
  // Buffers: function results become caller-provided out-parameters, and
  // temporaries are allocated through the runtime's caching allocator.
  // Attention then reads a concatenation nothing else needs (a decoder's
  // cache and new keys) from its parts, and its heads through transposed
  // views rather than transposed copies; matmuls become GEMM kernel calls
  // (their weights quantized as packed, if asked).
  p += "one-shot-bufferize{bufferize-function-boundaries "
       "function-boundary-type-conversion=identity-layout-map},"
       "buffer-results-to-out-params{modify-public-functions=true "
       "hoist-static-allocs=true},"
       "buffer-deallocation-pipeline,tfc-attention-split-kv,"
       "tfc-attention-operand-views,";
  p += "convert-linalg-matmul-to-cpu{quantize-weights=" +
       options.quantizeWeights +
       " quantize-activations=" + options.quantizeActivations + "},";
  p += "tfc-strided-copies-to-linalg,";
  // Each temporary is freed after its last use, not at the function's end,
  // so that the caching allocator hands it to the next one.
  p += "func.func(tfc-early-dealloc),";
  // The remaining linalg ops become loops whose outermost parallel loop
  // runs on OpenMP threads; inner loops stay plain for LLVM to vectorise.
  // Single-iteration loops (a batch of 1) are promoted first, so the loop
  // that runs on the threads is the first one with work to share.
  p += "func.func(convert-linalg-to-affine-loops,"
       "affine-loop-normalize{promote-single-iter=true},"
       "affine-parallelize{max-nested=1}),"
       "lower-affine,tfc-serialize-small-loops,convert-scf-to-openmp,"
       "tfc-inline-alloca-scopes,"
       "tfc-math-approximation,"
       "arith-emulate-unsupported-floats{source-types=bf16 target-type=f32},"
       "tfc-expand-bf16-casts,convert-scf-to-cf,"
       "expand-strided-metadata,"
       "finalize-memref-to-llvm{use-generic-functions=true},"
       "convert-to-llvm,reconcile-unrealized-casts";
  return p;
}

void registerCPUPipelines() {
  for (bool fuse : {true, false}) {
    std::string name = fuse ? "tfc-cpu-pipeline" : "tfc-cpu-pipeline-unfused";
    std::string pipeline = getCPUPipeline({fuse});
    mlir::PassPipelineRegistration<>(
        name,
        fuse ? "Lower a graph to the LLVM dialect for the CPU, fused"
             : "Lower a graph to the LLVM dialect for the CPU, unfused",
        [pipeline](mlir::OpPassManager &pm) {
          if (mlir::failed(mlir::parsePassPipeline(pipeline, pm)))
            llvm::report_fatal_error("tfc: invalid CPU pipeline");
        });
  }
}

} // namespace tfc
