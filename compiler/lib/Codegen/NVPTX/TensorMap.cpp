//===- TensorMap.cpp - TMA tensor maps made by the host code --------------===//

#include "tfc/Codegen/NVPTX/TensorMap.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace tfc {
namespace {

constexpr StringLiteral kTensorMapFunction = "tfc_gpu_tensor_map";

/// CUtensorMapDataType of an element type.
int32_t dataType(Type t) {
  if (t.isF16())
    return 6; // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
  if (t.isBF16())
    return 9; // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
  assert(t.isF32() && "tensor maps of f16, bf16 or f32");
  return 7; // CU_TENSOR_MAP_DATA_TYPE_FLOAT32
}

/// The runtime's void *tfc_gpu_tensor_map(void *base, int32_t dataType,
/// int64_t dim0, dim1, dim2, int64_t stride1, stride2, int32_t box0, box1,
/// box2, int32_t swizzle), declared once per module.
func::FuncOp declaration(OpBuilder &b, Location loc) {
  auto module =
      b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  if (auto f = module.lookupSymbol<func::FuncOp>(kTensorMapFunction))
    return f;
  Type ptr = LLVM::LLVMPointerType::get(b.getContext());
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto type = b.getFunctionType(
      {ptr, i32, i64, i64, i64, i64, i64, i32, i32, i32, i32}, {ptr});
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  auto f = func::FuncOp::create(b, loc, kTensorMapFunction, type);
  f.setPrivate();
  return f;
}

} // namespace

Value createTensorMap(OpBuilder &b, Location loc, Value buffer,
                      const TensorMapSpec &spec) {
  func::FuncOp f = declaration(b, loc);
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto c32 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, i32, v);
  };
  auto c64 = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, i64, v);
  };
  // The buffer's base (identity layout: offset 0).
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value ptr = LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()),
      arith::IndexCastUIOp::create(b, loc, i64, base).getResult());
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  SmallVector<Value> args = {ptr, c32(dataType(element))};
  for (int64_t d : spec.dims)
    args.push_back(c64(d));
  for (int64_t s : spec.strides)
    args.push_back(c64(s));
  for (int32_t x : spec.box)
    args.push_back(c32(x));
  args.push_back(c32(spec.swizzle));
  Value map = func::CallOp::create(b, loc, f, args).getResult(0);
  return LLVM::PtrToIntOp::create(b, loc, i64, map);
}

} // namespace tfc
