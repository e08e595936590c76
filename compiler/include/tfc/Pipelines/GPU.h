//===- GPU.h - tfc's NVPTX compilation pipeline -----------------*- C++ -*-===//

#ifndef TFC_PIPELINES_GPU_H
#define TFC_PIPELINES_GPU_H

#include <optional>
#include <string>

namespace tfc {

struct NVPTXPipelineOptions {
  /// Fused attention becomes one flash-attention kernel; when false, every
  /// transformer op is decomposed to primitives (the unfused build).
  bool fuse = true;
  /// The GPU architecture, e.g. sm_90, sm_90a, sm_80.
  std::string chip = "sm_90";
  /// f16/bf16 attention reads K and V fragments with ldmatrix.
  bool ldmatrix = false;
  /// f16/bf16 attention copies K/V tiles with cp.async, double-buffered.
  bool asyncCopy = false;
  /// f16/bf16 attention on wgmma (chip sm_90a).
  bool wgmma = false;
  /// With wgmma: warpgroups per attention block (1 or 2).
  int64_t wgmmaWarpgroups = 1;
  /// With wgmma: the tiles of attention and matmuls by TMA instead of
  /// cp.async.
  bool tma = false;
  /// With tma and two warpgroups: a producer warpgroup issues the copies.
  bool tmaProducer = false;
  /// Attention with few query rows per KV head runs the split-KV decode
  /// kernel.
  bool decodeKernel = true;
  /// f16/bf16 attention: query rows per warp (16 or 32).
  int64_t warpRows = 16;
  /// The decode kernel's blocks per SM (its split of the keys) and cp.async
  /// stages.
  int64_t decodeBlocksPerSM = 4, decodeStages = 2;
  /// The decode kernel's products on tensor cores (f16/bf16).
  bool decodeMma = false;
  /// What the kernels become: "bin" (cubin, by ptxas) or "isa" (PTX).
  std::string format = "bin";
};

/// The kernels tfc-compile builds for `chip` where no flag chooses, the
/// fastest of each kind in the H200 device check (docs/Performance.md,
/// 2026-12-04): on sm_90a, attention and f16/bf16 matmuls on wgmma with
/// their tiles copied by TMA, two warpgroups (128 query rows) per attention
/// block; on other chips, mma.sync attention with cp.async stages and 32
/// query rows per warp. `wgmma`, where given, overrides the chip's choice
/// of wgmma, and the other defaults follow it.
NVPTXPipelineOptions
nvptxKernelDefaults(const std::string &chip,
                    std::optional<bool> wgmma = std::nullopt);

/// The textual pass pipeline (anchored on builtin.module, without the
/// `builtin.module(...)` wrapper) from the graph IR to the LLVM dialect with
/// the kernels compiled into a gpu.binary.
std::string getNVPTXPipeline(const NVPTXPipelineOptions &options);

/// Registers `tfc-nvptx-pipeline` (and `tfc-nvptx-pipeline-unfused`), which
/// stop at PTX (`cubin-format=isa`), so that tfc-opt can run them.
void registerNVPTXPipelines();

} // namespace tfc

#endif // TFC_PIPELINES_GPU_H
