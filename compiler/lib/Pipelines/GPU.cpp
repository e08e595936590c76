//===- GPU.cpp - tfc's NVPTX compilation pipeline -------------------------===//

#include "tfc/Pipelines/GPU.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace tfc {

NVPTXPipelineOptions nvptxKernelDefaults(const std::string &chip,
                                         std::optional<bool> wgmma) {
  NVPTXPipelineOptions options;
  options.chip = chip;
  options.wgmma = wgmma.value_or(chip == "sm_90a");
  options.tma = options.wgmma;
  options.wgmmaWarpgroups = options.wgmma ? 2 : 1;
  options.asyncCopy = !options.wgmma;
  options.warpRows = options.wgmma ? 16 : 32;
  return options;
}

std::string getNVPTXPipeline(const NVPTXPipelineOptions &options) {
  std::string p;
  // Graph level: fused attention becomes one kernel launch each; whatever
  // else remains (softmax, layer_norm, unfused attention) is decomposed.
  if (options.fuse)
    p += std::string("transformer-fuse,convert-transformer-to-nvptx{") +
         "ldmatrix=" + (options.ldmatrix ? "true" : "false") +
         " async-copy=" + (options.asyncCopy ? "true" : "false") +
         " wgmma=" + (options.wgmma ? "true" : "false") +
         " wgmma-warpgroups=" + std::to_string(options.wgmmaWarpgroups) +
         " tma=" + (options.tma ? "true" : "false") +
         " tma-producer=" + (options.tmaProducer ? "true" : "false") +
         " decode-kernel=" + (options.decodeKernel ? "true" : "false") +
         " warp-rows=" + std::to_string(options.warpRows) +
         " decode-blocks-per-sm=" + std::to_string(options.decodeBlocksPerSM) +
         " decode-stages=" + std::to_string(options.decodeStages) +
         " decode-mma=" + (options.decodeMma ? "true" : "false") + "},";
  p += "transformer-decompose,"
       "func.func(tosa-to-linalg-named,tosa-to-linalg,tosa-to-arith,"
       "tosa-to-tensor),canonicalize,cse,"
       "func.func(tfc-fuse-elementwise),canonicalize,cse,";
  // Buffers: results become caller-provided out-parameters (device
  // pointers), temporaries device buffers freed after their last use.
  p += std::string("one-shot-bufferize{bufferize-function-boundaries "
                   "function-boundary-type-conversion=identity-layout-map},"
                   "buffer-results-to-out-params{modify-public-functions=true "
                   "hoist-static-allocs=true},canonicalize,"
                   "convert-linalg-matmul-to-nvptx{wgmma=") +
       (options.wgmma ? "true" : "false") +
       " tma=" + (options.tma ? "true" : "false") + "},";
  // f16/bf16 matmuls run on tensor cores; every remaining loop nest becomes
  // a kernel (the constants of its index arithmetic sunk into it, not
  // passed as arguments); all kernels go into one module, and the host code
  // runs them in order on one stream. Each device buffer is freed right after
  // the last launch that uses it: stream order makes the block safe to hand to
  // the next allocation at once.
  p += "func.func(convert-linalg-to-parallel-loops,tfc-parallel-loops-to-gpu,"
       "tfc-gpu-device-buffers,tfc-early-dealloc),"
       "gpu-launch-sink-index-computations,gpu-kernel-outlining,"
       "tfc-gpu-merge-modules,lower-affine,canonicalize,"
       "cse,func.func(gpu-async-region),";
  p += "gpu-lower-to-nvvm-pipeline{cubin-chip=" + options.chip +
       " cubin-features=+ptx80 cubin-format=" + options.format +
       " opt-level=3}";
  return p;
}

void registerNVPTXPipelines() {
  for (bool fuse : {true, false}) {
    std::string name =
        fuse ? "tfc-nvptx-pipeline" : "tfc-nvptx-pipeline-unfused";
    NVPTXPipelineOptions options;
    options.fuse = fuse;
    options.format = "isa";
    std::string pipeline = getNVPTXPipeline(options);
    mlir::PassPipelineRegistration<>(
        name,
        fuse ? "Lower a graph to PTX kernels and LLVM host code, fused"
             : "Lower a graph to PTX kernels and LLVM host code, unfused",
        [pipeline](mlir::OpPassManager &pm) {
          if (mlir::failed(mlir::parsePassPipeline(pipeline, pm)))
            llvm::report_fatal_error("tfc: invalid NVPTX pipeline");
        });
  }
}

} // namespace tfc
