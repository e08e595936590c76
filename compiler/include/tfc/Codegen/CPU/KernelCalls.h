//===- KernelCalls.h - Calls into the CPU micro-kernels ---------*- C++ -*-===//

#ifndef TFC_CODEGEN_CPU_KERNELCALLS_H
#define TFC_CODEGEN_CPU_KERNELCALLS_H

#include "tfc/ukernels/symbols.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace tfc {

/// memref<?x...x?xT, strided<[?, ...], offset: ?>>: the kernels' operand
/// type, which any memref of T casts to.
inline mlir::MemRefType dynamicMemRef(mlir::MLIRContext *ctx, int64_t rank,
                                      mlir::Type element) {
  llvm::SmallVector<int64_t> dyn(rank, mlir::ShapedType::kDynamic);
  return mlir::MemRefType::get(
      dyn, element,
      mlir::StridedLayoutAttr::get(ctx, mlir::ShapedType::kDynamic, dyn));
}

/// dynamicMemRef of f32.
inline mlir::MemRefType dynamicF32MemRef(mlir::MLIRContext *ctx, int64_t rank) {
  return dynamicMemRef(ctx, rank, mlir::Float32Type::get(ctx));
}

/// Declares kernel `name` in `module` once, private, with the C interface
/// (calls pass memref descriptors by pointer to `_mlir_ciface_<name>`).
inline void declareKernel(mlir::OpBuilder &builder, mlir::ModuleOp module,
                          llvm::StringRef name, mlir::TypeRange args) {
  if (module.lookupSymbol(name))
    return;
  mlir::OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(module.getBody());
  auto fn = mlir::func::FuncOp::create(builder, module.getLoc(), name,
                                       builder.getFunctionType(args, {}));
  fn.setPrivate();
  fn->setAttr("llvm.emit_c_interface", builder.getUnitAttr());
}

} // namespace tfc

#endif // TFC_CODEGEN_CPU_KERNELCALLS_H
