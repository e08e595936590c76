//===- ZeroInit.h - A matmul's C made all zeros before it -------*- C++ -*-===//
//
// A matmul on buffers computes C += A * B. Where C was made all zeros just
// for it, a kernel can write the product over C instead (no fill, no read of
// C): the CPU micro-kernel call without its accumulate flag, the GPU GEMM
// kernel with a storing epilogue.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_TRANSFORMS_ZEROINIT_H
#define TFC_TRANSFORMS_ZEROINIT_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace tfc {

/// The op that makes C (`c`, the matmul's init buffer) all zeros before
/// `matmul`, which the kernel can then overwrite instead of accumulating
/// into: the last op before the matmul in its block with memory effects
/// (casts and views of operands have none) is either a zero fill of C, or a
/// copy into C of a buffer whose last write before the copy is a zero fill;
/// or else, where C is an allocation, an earlier zero fill of C that
/// nothing touches C after (in the block, before the matmul; no view of C
/// taken before the matmul).
/// Bufferization leaves the last kind where one zero-filled tensor
/// initialises several products of one shape: the earlier ones take copies
/// of it, the last one the filled buffer itself, filled at the start. The
/// caller erases the returned fill or copy; null when there is none.
mlir::Operation *foldableZeroInit(mlir::Operation *matmul, mlir::Value c);

} // namespace tfc

#endif // TFC_TRANSFORMS_ZEROINIT_H
