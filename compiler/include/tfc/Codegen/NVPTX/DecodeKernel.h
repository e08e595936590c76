//===- DecodeKernel.h - Split-KV attention for few query rows ---*- C++ -*-===//
//
// Attention whose query rows per KV head are few (decode: one new token per
// sequence; grouped-query heads; a few speculative tokens) as FlashDecoding
// computes it: the keys are split into chunks, a block per (batch x KV
// head, chunk) computes every query row of the KV head over its chunk, and
// the last block of each (batch x KV head) to finish combines the chunks'
// partial results: one launch.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_CODEGEN_NVPTX_DECODEKERNEL_H
#define TFC_CODEGEN_NVPTX_DECODEKERNEL_H

#include "tfc/Codegen/NVPTX/AttentionKernel.h"

namespace tfc {

/// Query rows per KV head (query heads sharing it x Sq) up to which the
/// decode kernel applies.
constexpr int64_t kMaxDecodeRows = 8;

/// Whether `shape` runs the decode kernel: at most kMaxDecodeRows query
/// rows per KV head and tiles that fit in shared memory. Any element type
/// and head dimension (odd ones included).
bool useDecodeKernel(const AttentionShape &shape);

struct DecodeLaunch {
  /// Arguments q, k, v, [mask,] then out [B, Hq, Sq, Dv] when the keys are
  /// one chunk, else the partial outputs [splits, B*Hq*Sq, Dv] (f32,
  /// unnormalised) and their row statistics [splits, B*Hq*Sq, 2] (f32: max,
  /// sum in the log2 domain), scratch buffers of the launch, then out.
  /// Grid (B * Hkv, splits).
  KernelLaunch decode;
};

/// Appends the decode kernel for `shape` to `module` (with more than one
/// chunk, and its arrival counters: a global of the module).
DecodeLaunch buildDecodeKernels(mlir::OpBuilder &builder,
                                mlir::gpu::GPUModuleOp module,
                                llvm::StringRef name,
                                const AttentionShape &shape);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_DECODEKERNEL_H
