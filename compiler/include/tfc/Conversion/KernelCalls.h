//===- KernelCalls.h - Calls into the CPU micro-kernels ---------*- C++ -*-===//

#ifndef TFC_CONVERSION_KERNELCALLS_H
#define TFC_CONVERSION_KERNELCALLS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace tfc {

/// memref<?x...x?xf32, strided<[?, ...], offset: ?>>: the kernels' operand
/// type, which any f32 memref casts to.
inline mlir::MemRefType dynamicF32MemRef(mlir::MLIRContext *ctx, int64_t rank) {
  llvm::SmallVector<int64_t> dyn(rank, mlir::ShapedType::kDynamic);
  return mlir::MemRefType::get(
      dyn, mlir::Float32Type::get(ctx),
      mlir::StridedLayoutAttr::get(ctx, mlir::ShapedType::kDynamic, dyn));
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

#endif // TFC_CONVERSION_KERNELCALLS_H
