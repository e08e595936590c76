//===- GPU.h - tfc's NVPTX compilation pipeline -----------------*- C++ -*-===//

#ifndef TFC_PIPELINES_GPU_H
#define TFC_PIPELINES_GPU_H

#include "tfc/Pipelines/Options.h"

#include "mlir/Pass/PassOptions.h"

#include <optional>
#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace tfc {

/// The NVPTX pipeline's options: tfc-opt's `--tfc-nvptx-pipeline="..."`
/// takes them by these names, tfc-compile sets them from its --gpu-* flags.
struct NVPTXPipelineOptions : mlir::PassPipelineOptions<NVPTXPipelineOptions> {
  Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("Fused attention becomes one flash-attention "
                     "kernel; false decomposes every "
                     "transformer op (the unfused build)"),
      llvm::cl::init(true)};
  Option<std::string> chip{
      *this, "chip",
      llvm::cl::desc("The GPU architecture: sm_80, sm_90, sm_90a, ..."),
      llvm::cl::init("sm_90")};
  Option<bool> ldmatrix{
      *this, "ldmatrix",
      llvm::cl::desc("f16/bf16 attention reads K and V fragments with "
                     "ldmatrix"),
      llvm::cl::init(false)};
  Option<bool> asyncCopy{
      *this, "async-copy",
      llvm::cl::desc("f16/bf16 attention copies K/V tiles with cp.async, "
                     "double-buffered"),
      llvm::cl::init(false)};
  Option<bool> wgmma{*this, "wgmma",
                     llvm::cl::desc("f16/bf16 attention on wgmma (sm_90a)"),
                     llvm::cl::init(false)};
  Option<int64_t> wgmmaWarpgroups{
      *this, "wgmma-warpgroups",
      llvm::cl::desc("With wgmma: warpgroups per attention block (1 or 2)"),
      llvm::cl::init(1)};
  Option<bool> tma{*this, "tma",
                   llvm::cl::desc("With wgmma: the tiles of attention and "
                                  "matmuls by TMA instead of cp.async"),
                   llvm::cl::init(false)};
  Option<bool> tmaProducer{
      *this, "tma-producer",
      llvm::cl::desc("With tma and two warpgroups: a producer warpgroup "
                     "issues the copies"),
      llvm::cl::init(false)};
  Option<bool> decodeKernel{
      *this, "decode-kernel",
      llvm::cl::desc("Attention with few query rows per KV head runs the "
                     "split-KV decode kernel"),
      llvm::cl::init(true)};
  Option<int64_t> warpRows{
      *this, "warp-rows",
      llvm::cl::desc("f16/bf16 attention: query rows per warp (16 or 32)"),
      llvm::cl::init(16)};
  Option<int64_t> decodeBlocksPerSM{
      *this, "decode-blocks-per-sm",
      llvm::cl::desc("The decode kernel's blocks per SM (its split of the "
                     "keys)"),
      llvm::cl::init(4)};
  Option<int64_t> decodeStages{
      *this, "decode-stages",
      llvm::cl::desc("The decode kernel's cp.async stages"), llvm::cl::init(2)};
  Option<bool> decodeMma{
      *this, "decode-mma",
      llvm::cl::desc("The decode kernel's products on tensor cores "
                     "(f16/bf16)"),
      llvm::cl::init(false)};
  Option<GpuBinaryFormat> format{
      *this, "format",
      llvm::cl::desc("What the kernels become: isa (PTX) or bin (a cubin, "
                     "by ptxas)"),
      llvm::cl::init(GpuBinaryFormat::Isa), gpuBinaryFormatValues()};

  /// Fails, with `error` set, where an option is out of its range (`chip`
  /// not sm_80 or newer, counts the kernels do not have) or the options
  /// contradict each other (wgmma off sm_90a, TMA without wgmma, ...).
  /// `flag` names each option in the message (tfc-compile's flags); by
  /// default, its name here.
  mlir::LogicalResult
  verify(std::string &error,
         llvm::function_ref<std::string(llvm::StringRef)> flag = {}) const;
};

/// Sets the kernels tfc-compile builds for `options.chip` where no flag
/// chooses, the fastest of each kind in the H200 device check
/// (docs/performance/reports/2026-12-04-h200.md): on sm_90a, attention and
/// f16/bf16 matmuls on wgmma with their tiles copied by TMA, two warpgroups
/// (128 query rows) per attention block; on other chips, mma.sync attention
/// with cp.async stages and 32 query rows per warp. `wgmma`, where given,
/// overrides the chip's choice of wgmma, and the other defaults follow it.
void applyKernelDefaults(NVPTXPipelineOptions &options,
                         std::optional<bool> wgmma = std::nullopt);

/// The NVPTX lowering after the graph step (CPU.h, buildGraphPipeline),
/// from the graph IR to the LLVM dialect with the kernels compiled into a
/// gpu.binary (anchored on builtin.module).
void buildNVPTXLoweringPipeline(mlir::OpPassManager &pm,
                                const NVPTXPipelineOptions &options);

/// The graph step, then the NVPTX lowering.
void buildNVPTXPipeline(mlir::OpPassManager &pm,
                        const NVPTXPipelineOptions &options);

/// Registers `tfc-nvptx-pipeline` (options as above, verified; by default
/// it stops at PTX) and `tfc-nvptx-pipeline-unfused` (fuse=false), so that
/// tfc-opt can run them.
void registerNVPTXPipelines();

} // namespace tfc

#endif // TFC_PIPELINES_GPU_H
