//===- GPU.cpp - tfc's NVPTX compilation pipeline -------------------------===//

#include "tfc/Pipelines/GPU.h"

#include "tfc/Conversion/Passes.h"
#include "tfc/Dialect/Transformer/Transforms/Passes.h"
#include "tfc/Pipelines/CPU.h"
#include "tfc/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace tfc {

void applyKernelDefaults(NVPTXPipelineOptions &options,
                         std::optional<bool> wgmma) {
  options.wgmma = wgmma.value_or(options.chip == "sm_90a");
  options.tma = options.wgmma;
  options.wgmmaWarpgroups = options.wgmma ? 2 : 1;
  options.asyncCopy = !options.wgmma;
  options.warpRows = options.wgmma ? 16 : 32;
}

LogicalResult
NVPTXPipelineOptions::verify(std::string &error,
                             function_ref<std::string(StringRef)> flag) const {
  auto name = [&](StringRef option) {
    return flag ? flag(option) : option.str();
  };
  auto fail = [&](const Twine &message) {
    error = message.str();
    return failure();
  };
  // sm_NN or sm_NNa, NN >= 80 (mma.sync m16n8k16 with bf16).
  StringRef arch(chip);
  unsigned version = 0;
  bool prefixed = arch.consume_front("sm_");
  arch.consume_back("a");
  if (!prefixed || arch.getAsInteger(10, version) || version < 80)
    return fail("unknown " + name("chip") + " '" + chip +
                "' (expected sm_80 or newer, e.g. sm_80, sm_90, sm_90a)");
  if (wgmma && chip != "sm_90a")
    return fail(name("wgmma") + " needs " + name("chip") +
                "=sm_90a (wgmma is not part of " + chip + ")");
  if (tma && !wgmma)
    return fail(name("tma") + " needs " + name("wgmma") +
                " (TMA feeds the wgmma kernel)");
  if (tmaProducer && (!tma || wgmmaWarpgroups != 2))
    return fail(name("tma-producer") + " needs " + name("tma") + " and " +
                name("wgmma-warpgroups") +
                "=2 (the producer feeds two warpgroups)");
  if (wgmmaWarpgroups != 1 && wgmmaWarpgroups != 2)
    return fail("unknown " + name("wgmma-warpgroups") + " " +
                Twine(wgmmaWarpgroups) + " (supported: 1, 2)");
  if (warpRows != 16 && warpRows != 32)
    return fail("unknown " + name("warp-rows") + " " + Twine(warpRows) +
                " (supported: 16, 32)");
  if (decodeBlocksPerSM < 1 || decodeBlocksPerSM > 16)
    return fail("unknown " + name("decode-blocks-per-sm") + " " +
                Twine(decodeBlocksPerSM) + " (supported: 1 to 16)");
  if (decodeStages < 2 || decodeStages > 4)
    return fail("unknown " + name("decode-stages") + " " + Twine(decodeStages) +
                " (supported: 2 to 4)");
  return success();
}

void buildNVPTXLoweringPipeline(OpPassManager &pm,
                                const NVPTXPipelineOptions &options) {
  // Fused attention becomes one kernel launch each; whatever else remains
  // (softmax, layer_norm, unfused attention) is decomposed (the unfused
  // build's graph step decomposed everything but the collectives). A
  // tensor-parallel model's collectives and rank, fused or not, become
  // calls of the runtime (NCCL).
  ConvertTransformerToNVPTXOptions kernels;
  if (options.fuse) {
    kernels.ldmatrix = options.ldmatrix;
    kernels.asyncCopy = options.asyncCopy;
    kernels.wgmma = options.wgmma;
    kernels.wgmmaWarpgroups = options.wgmmaWarpgroups;
    kernels.tma = options.tma;
    kernels.tmaProducer = options.tmaProducer;
    kernels.decodeKernel = options.decodeKernel;
    kernels.warpRows = options.warpRows;
    kernels.decodeBlocksPerSM = options.decodeBlocksPerSM;
    kernels.decodeStages = options.decodeStages;
    kernels.decodeMma = options.decodeMma;
  }
  pm.addPass(createConvertTransformerToNVPTX(kernels));
  if (options.fuse)
    pm.addPass(transformer::createTransformerDecompose());
  addTosaToLinalgPasses(pm);
  // Buffers: results become caller-provided out-parameters (device
  // pointers), temporaries device buffers freed after their last use.
  addBufferizePasses(pm);
  pm.addPass(createCanonicalizerPass());
  // f16/bf16 matmuls run on tensor cores.
  ConvertLinalgMatmulToNVPTXOptions matmul;
  matmul.wgmma = options.wgmma;
  matmul.tma = options.tma;
  pm.addPass(createConvertLinalgMatmulToNVPTX(matmul));
  // Every remaining loop nest becomes a kernel (the constants of its index
  // arithmetic sunk into it, not passed as arguments); all kernels go into
  // one module, and the host code runs them in order on one stream. Each
  // device buffer is freed right after the last launch that uses it: stream
  // order makes the block safe to hand to the next allocation at once.
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createConvertLinalgToParallelLoopsPass());
  fn.addPass(createParallelLoopsToGPU());
  fn.addPass(createGPUDeviceBuffers());
  fn.addPass(createEarlyDealloc());
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createGPUMergeModules());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.nest<func::FuncOp>().addPass(createGpuAsyncRegionPass());
  gpu::GPUToNVVMPipelineOptions nvvm;
  nvvm.cubinChip = options.chip.getValue();
  nvvm.cubinFeatures = "+ptx80";
  nvvm.cubinFormat = options.format == GpuBinaryFormat::Isa ? "isa" : "bin";
  nvvm.optLevel = 3;
  gpu::buildLowerToNVVMPassPipeline(pm, nvvm);
}

void buildNVPTXPipeline(OpPassManager &pm,
                        const NVPTXPipelineOptions &options) {
  buildGraphPipeline(pm, options.fuse);
  buildNVPTXLoweringPipeline(pm, options);
}

void registerNVPTXPipelines() {
  registerVerifiedPipeline<NVPTXPipelineOptions>(
      "tfc-nvptx-pipeline",
      "Lower a graph to GPU kernels and LLVM host code (by default fused, "
      "the kernels as PTX)",
      buildNVPTXPipeline);
  PassPipelineRegistration<>(
      "tfc-nvptx-pipeline-unfused",
      "Lower a graph to PTX kernels and LLVM host code, unfused",
      [](OpPassManager &pm) {
        NVPTXPipelineOptions options;
        options.fuse = false;
        buildNVPTXPipeline(pm, options);
      });
}

} // namespace tfc
