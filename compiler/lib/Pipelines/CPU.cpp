//===- CPU.cpp - tfc's CPU compilation pipeline ---------------------------===//

#include "tfc/Pipelines/CPU.h"

#include "tfc/Conversion/Passes.h"
#include "tfc/Dialect/Transformer/Transforms/Passes.h"
#include "tfc/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Affine/Transforms/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace tfc {

void buildGraphPipeline(OpPassManager &pm, bool fuse) {
  // Fuse the transformer blocks the graph computes, or (the unfused build)
  // decompose every transformer op it holds into primitives.
  if (fuse)
    pm.addPass(transformer::createTransformerFuse());
  else
    pm.addPass(transformer::createTransformerDecompose());
}

void addTosaToLinalgPasses(OpPassManager &pm) {
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(tosa::createTosaToLinalgNamed());
  fn.addPass(tosa::createTosaToLinalg());
  fn.addPass(createTosaToArithPass());
  fn.addPass(createTosaToTensorPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.nest<func::FuncOp>().addPass(createFuseElementwise());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addBufferizePasses(OpPassManager &pm) {
  // Function results become caller-provided out-parameters (the ABI's
  // buffers), one each: a value returned twice is copied first.
  pm.nest<func::FuncOp>().addPass(createDistinctResults());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.modifyPublicFunctions = true;
  outParams.hoistStaticAllocs = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
}

void buildCPULoweringPipeline(OpPassManager &pm,
                              const CPUPipelineOptions &options) {
  // The fused ops become micro-kernel calls (emitted as they bufferize);
  // an unfused build's are its collectives (transformer.all_reduce) only.
  pm.addPass(createConvertTransformerToCPU());
  addTosaToLinalgPasses(pm);
  // Buffers: temporaries are allocated through the runtime's caching
  // allocator. Attention then reads a concatenation nothing else needs (a
  // decoder's cache and new keys) from its parts, and its heads through
  // transposed views rather than transposed copies; matmuls become GEMM
  // kernel calls (their weights quantized as packed, if asked).
  addBufferizePasses(pm);
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createAttentionSplitKV());
  pm.addPass(createAttentionOperandViews());
  LinalgMatmulToCPUOptions matmul;
  matmul.quantizeWeights = options.quantizeWeights;
  matmul.quantizeActivations = options.quantizeActivations;
  pm.addPass(createLinalgMatmulToCPU(matmul));
  pm.addPass(createStridedCopiesToLinalg());
  // Each temporary is freed after its last use, not at the function's end,
  // so that the caching allocator hands it to the next one.
  pm.nest<func::FuncOp>().addPass(createEarlyDealloc());
  // The remaining linalg ops become loops whose outermost parallel loop
  // runs on OpenMP threads; inner loops stay plain for LLVM to vectorise.
  // Single-iteration loops (a batch of 1) are promoted first, so the loop
  // that runs on the threads is the first one with work to share.
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createConvertLinalgToAffineLoopsPass());
  fn.addPass(affine::createAffineLoopNormalizePass(/*promoteSingleIter=*/true));
  affine::AffineParallelizeOptions parallelize;
  parallelize.maxNested = 1;
  fn.addPass(affine::createAffineParallelize(parallelize));
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSerializeSmallLoops());
  pm.addPass(createConvertSCFToOpenMPPass());
  pm.addPass(createInlineAllocaScopes());
  pm.addPass(createMathApproximation());
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16"};
  emulate.targetTypeStr = "f32";
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  pm.addPass(createExpandBF16Casts());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void buildCPUPipeline(OpPassManager &pm, const CPUPipelineOptions &options) {
  buildGraphPipeline(pm, options.fuse);
  buildCPULoweringPipeline(pm, options);
}

void registerCPUPipelines() {
  registerVerifiedPipeline<CPUPipelineOptions>(
      "tfc-cpu-pipeline",
      "Lower a graph to the LLVM dialect for the CPU (by default fused)",
      buildCPUPipeline);
  PassPipelineRegistration<>(
      "tfc-cpu-pipeline-unfused",
      "Lower a graph to the LLVM dialect for the CPU, unfused",
      [](OpPassManager &pm) {
        CPUPipelineOptions options;
        options.fuse = false;
        buildCPUPipeline(pm, options);
      });
}

} // namespace tfc
