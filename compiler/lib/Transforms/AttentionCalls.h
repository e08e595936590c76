//===- AttentionCalls.h - Attention kernel calls, their buffers -*- C++ -*-===//
//
// What the rewrites of attention kernel calls share (tfc-attention-split-kv,
// tfc-attention-operand-views): the calls of the one-part kernels, and the
// buffers their operands are views of.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_TRANSFORMS_ATTENTIONCALLS_H
#define TFC_TRANSFORMS_ATTENTIONCALLS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"

namespace tfc {

/// The kv2 form of attention kernel `callee`, or "" for another callee.
llvm::StringRef kv2Of(llvm::StringRef callee);

/// The buffer `v` is a view of, through any chain of views.
mlir::Value rootOf(mlir::Value v);

/// Whether `op` or an op nested in it uses `buffer` (through any view;
/// making a view is no use): at all, or with `writesOnly` in any way but a
/// read (an op whose effects are unknown, a kernel call, counts).
bool touches(mlir::Operation *op, mlir::Value buffer, bool writesOnly);

/// The buffer that kernel operand `operand` of `call` casts: a static 4-d
/// allocation in the call's block, or null.
mlir::Value localBuffer(mlir::func::CallOp call, mlir::Value operand);

/// Erases `buffer`'s allocation, views and deallocations when nothing else
/// uses it.
void eraseIfUnused(mlir::RewriterBase &rewriter, mlir::Value buffer);

/// The calls of the one-part attention kernels in `module`.
llvm::SmallVector<mlir::func::CallOp> attentionCalls(mlir::ModuleOp module);

} // namespace tfc

#endif // TFC_TRANSFORMS_ATTENTIONCALLS_H
