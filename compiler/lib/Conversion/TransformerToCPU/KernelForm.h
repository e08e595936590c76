//===- KernelForm.h - transformer ops in CPU kernel form --------*- C++ -*-===//
//
// The form of transformer ops that the CPU micro-kernels take, which
// convert-transformer-to-cpu puts them in and their bufferization turns
// into kernel calls, and the kernel each one calls.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_CONVERSION_TRANSFORMERTOCPU_KERNELFORM_H
#define TFC_CONVERSION_TRANSFORMERTOCPU_KERNELFORM_H

#include "mlir/IR/Operation.h"

namespace tfc {

/// The kernel each op bufferizes into, with its argument types.
struct KernelSignature {
  llvm::StringRef name;
  llvm::SmallVector<mlir::Type> args;
};

/// Whether `op` is a layer_norm of bf16 input, gamma, beta and result (the
/// _bf16 kernel's form, rank 2 aside).
bool isAllBf16LayerNorm(mlir::Operation *op);

/// The kernel that `op`, in kernel form, calls.
KernelSignature kernelFor(mlir::Operation *op);

/// Marks a kernel-form attention whose query, key and value were bf16 (now
/// widened to f32): the kernel may multiply them as bf16 values
/// (TFC_UK_ATTENTION_BF16).
constexpr llvm::StringLiteral kBf16ValuesAttr = "tfc.bf16_values";

/// Whether `op` already has the form the kernels take: f32 (attention's K
/// and V may be f16 or bf16, both of one type, or all of its Q, K, V and
/// result bf16), statically shaped, attention with an f32 rank-4 mask,
/// softmax and the norms on [rows, n] over the last dimension.
bool isKernelForm(mlir::Operation *op);

/// Whether every operand and result of `op` has a static shape.
bool hasStaticShapes(mlir::Operation *op);

} // namespace tfc

#endif // TFC_CONVERSION_TRANSFORMERTOCPU_KERNELFORM_H
