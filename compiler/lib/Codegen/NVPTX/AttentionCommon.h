//===- AttentionCommon.h - What the attention kernels share -----*- C++ -*-===//
//
// The pieces the tensor-core and the FMA attention kernels share: their
// arguments, the query block of a block, the key tiles it visits and the
// sliding window.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_CODEGEN_NVPTX_ATTENTIONCOMMON_H
#define TFC_CODEGEN_NVPTX_ATTENTIONCOMMON_H

#include "KernelBuilder.h"
#include "tfc/Codegen/NVPTX/AttentionKernel.h"

namespace tfc {

/// Lazy rescaling: the reference max moves when a row's max exceeds it by
/// more than this (log2 domain: a factor of 256).
constexpr double kLazyRescaleLog2 = 8.0;

struct KernelArguments {
  Value q, k, v, mask, out; // mask is null without one
  Value kMap, vMap;         // TMA: the tensor maps' device addresses (i64)
};

/// The kernel's arguments: q, k, v, [mask,] out[, the tensor maps of K and
/// V].
KernelArguments kernelArguments(mlir::gpu::GPUFuncOp func,
                                const AttentionShape &s);

/// The block's query block: blockIdx.y, or with a causal mask the
/// blocks in reverse order, since blocks start in blockIdx order and a
/// causal block's work grows with its query rows: the longest then start
/// first, and the last blocks to start are the shortest instead of the
/// longest (a shorter tail once the SMs run out of blocks). From the
/// grid's size (%nctaid.y): with the block count as a constant, ptxas
/// spilled 4 bytes in the register-staged causal kernel (D = 64).
/// `assumeBelowSq` tells LLVM that the index is below Sq, as blockIdx.y's
/// range does: without it the key-tile and row arithmetic stays signed,
/// clamps and sign extensions included (3-10% more instructions per
/// product in the wgmma and TMA builds). Where registers are at the edge
/// LLVM's other choices cost more than that (see the caller).
Value queryBlock(Arith &a, const AttentionShape &s, bool assumeBelowSq);

/// The key tiles [first, end) of `tileKeys` that the block of `rows`
/// queries starting at qBlock * rows visits. Causal rows stop at their
/// diagonal: the last row sees keys below qBlock * rows + rows + (Skv -
/// Sq), clamped to [0, Skv] (signed index arithmetic). With a sliding
/// window they start at the tile holding the start of the first row's
/// window (qBlock * rows + Skv - Sq - window + 1); without one at tile 0.
struct KeyTiles {
  Value first, end;
};
KeyTiles keyTiles(Arith &a, const AttentionShape &s, Value qBlock, int64_t rows,
                  int64_t tileKeys);

/// Whether `key` is inside the sliding window of query `row` (i1): key >
/// row + Skv - Sq - window, signed.
Value inWindow(Arith &a, const AttentionShape &s, Value key, Value row);

/// The f32 kernel into `func` (AttentionFmaKernel.cpp): `rowsPerBlock`
/// threads, a query row each, keys in shared-memory tiles `ks` and `vs` of
/// `bc` keys.
void buildFmaAttentionKernel(const AttentionShape &s, Arith &a,
                             mlir::gpu::GPUFuncOp func, Value ks, Value vs,
                             int64_t rowsPerBlock, int64_t bc);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_ATTENTIONCOMMON_H
