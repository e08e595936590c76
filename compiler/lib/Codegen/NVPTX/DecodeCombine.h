//===- DecodeCombine.h - The decode kernel's chunks combined ----*- C++ -*-===//
//
// The split-KV decode kernel's last step: each chunk of keys leaves its rows'
// unnormalised output and statistics (max, sum in the log2 domain); the
// output row is their sum rescaled to the largest max over the same sum of
// sums. The block of each (batch, KV head) that arrives last, counted by an
// atomic counter, combines the chunks of every row of its KV head, so that
// a decode attention is one launch.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_CODEGEN_NVPTX_DECODECOMBINE_H
#define TFC_CODEGEN_NVPTX_DECODECOMBINE_H

#include "KernelBuilder.h"
#include "tfc/Codegen/NVPTX/AttentionKernel.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace tfc {

/// Globals of `module` named after the kernel: the arrival counters, a
/// zero-initialised i32 per block of the decode grid's x dimension (B x
/// Hkv) counting the blocks of that (batch, KV head) that have written
/// their chunk (the last one sets it back to 0, so every launch finds it
/// at 0); then the combine's shared tiles (static, beside the kernel's
/// dynamic ones): the chunks' weights and the arrival flag [1][splits + 1],
/// the warps' partial max and sum [2][warps] (f32).
SmallVector<mlir::memref::GlobalOp>
combineGlobals(mlir::OpBuilder &builder, mlir::gpu::GPUModuleOp module,
               llvm::StringRef kernel, int64_t blocks, int64_t splits,
               int64_t warps);

/// Emitted at the end of the decode kernel, by all `threads` threads of a
/// block once they have written their chunk to `part` [splits, rows, Dv]
/// and `stats` [splits, rows, 2]: the block's arrival on `counters` (the
/// kernel's first counter global, indexed by blockIdx.x; fenced, so that
/// the chunk is visible before it), and in the last block to arrive, the
/// combine of its `rows` output rows into `out` [B, Hq, Sq, Dv]
/// (`rowOf(blockIdx.x, r)`: row r's flat index into B x Hq x Sq). `tiles`:
/// the combine's shared tiles (combineGlobals). The thread and block
/// indices are read again here.
void combineInLastBlock(Arith &a, const AttentionShape &s, int64_t splits,
                        int64_t threads, int64_t rows, Value counters,
                        Value part, Value stats, Value out,
                        ArrayRef<Value> tiles,
                        llvm::function_ref<Value(Value, Value)> rowOf);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_DECODECOMBINE_H
