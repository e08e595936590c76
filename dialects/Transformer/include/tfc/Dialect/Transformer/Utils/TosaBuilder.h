//===- TosaBuilder.h - Build TOSA 1.0 graphs with shapes inferred -*- C++ -*-//
//
// A thin helper over OpBuilder that emits MLIR 22's TOSA 1.0 forms (matmul
// with zero points, mul with a shift, reshape through tosa.const_shape) and
// computes every static result type. Used by the decompositions of the
// transformer ops and by the importers, which write the unfused graph.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_DIALECT_TRANSFORMER_UTILS_TOSABUILDER_H
#define TFC_DIALECT_TRANSFORMER_UTILS_TOSABUILDER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

namespace tfc {

class TosaBuilder {
public:
  TosaBuilder(mlir::OpBuilder &builder, mlir::Location loc)
      : b(builder), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location getLoc() const { return loc; }

  /// A constant of shape [1 x ... x 1] (`rank` ones) holding `value`.
  mlir::Value splat(double value, mlir::Type elementType, int64_t rank);
  /// A constant tensor of the given type filled with `value`.
  mlir::Value constant(mlir::RankedTensorType type, double value);

  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value v, llvm::ArrayRef<int32_t> perms);
  /// Batched [N, M, K] x [N, K, P] -> [N, M, P], accumulated and returned in
  /// `resultType` (default: the operands' element type; f32 for f16/bf16
  /// operands accumulates in f32).
  mlir::Value matmul(mlir::Value lhs, mlir::Value rhs,
                     mlir::Type resultType = {});

  // Elementwise ops; operands have equal rank and broadcast over size-1 dims.
  mlir::Value add(mlir::Value lhs, mlir::Value rhs);
  mlir::Value sub(mlir::Value lhs, mlir::Value rhs);
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value maximum(mlir::Value lhs, mlir::Value rhs);
  mlir::Value equal(mlir::Value lhs, mlir::Value rhs);
  mlir::Value greaterEqual(mlir::Value lhs, mlir::Value rhs);
  mlir::Value select(mlir::Value cond, mlir::Value onTrue, mlir::Value onFalse);

  mlir::Value exp(mlir::Value v);
  mlir::Value reciprocal(mlir::Value v);
  mlir::Value rsqrt(mlir::Value v);
  mlir::Value erf(mlir::Value v);
  mlir::Value tanh(mlir::Value v);
  mlir::Value sigmoid(mlir::Value v);
  /// tosa.clamp of an integer tensor to [lo, hi].
  mlir::Value clampInt(mlir::Value v, int64_t lo, int64_t hi);
  /// `v` itself when it already has `elementType`, else a tosa.cast.
  mlir::Value cast(mlir::Value v, mlir::Type elementType);

  /// Reductions keep the reduced axis with size 1, as TOSA does.
  mlir::Value reduceMax(mlir::Value v, int32_t axis);
  mlir::Value reduceSum(mlir::Value v, int32_t axis);

  /// tosa.gather: values [N, K, C], indices [N, W] (i32) -> [N, W, C].
  mlir::Value gather(mlir::Value values, mlir::Value indices);
  /// tosa.slice of `size` elements starting at `start` in every dimension.
  mlir::Value slice(mlir::Value v, llvm::ArrayRef<int64_t> start,
                    llvm::ArrayRef<int64_t> size);

  /// tosa.tile: dimension i repeated `multiples[i]` times.
  mlir::Value tile(mlir::Value v, llvm::ArrayRef<int64_t> multiples);
  /// tosa.concat of `values` (equal but for `axis`) along `axis`.
  mlir::Value concat(mlir::ValueRange values, int32_t axis);

  /// Reshapes `v` to rank `rank` by prepending ones.
  mlir::Value expandToRank(mlir::Value v, int64_t rank);

  /// The result type of an elementwise op on `lhs` and `rhs` (of equal
  /// rank, size-1 dims broadcast), of `elementType` or lhs's.
  mlir::RankedTensorType broadcastType(mlir::Value lhs, mlir::Value rhs,
                                       mlir::Type elementType = {});

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace tfc

#endif // TFC_DIALECT_TRANSFORMER_UTILS_TOSABUILDER_H
