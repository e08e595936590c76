//===- Passes.td - Transformer dialect passes --------------*- tablegen -*-===//

#ifndef TFC_DIALECT_TRANSFORMER_TRANSFORMS_PASSES_TD
#define TFC_DIALECT_TRANSFORMER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TransformerDecompose : Pass<"transformer-decompose"> {
  let summary = "Decompose transformer ops back to TOSA and linalg primitives";
  let description = [{
    Replaces every `transformer.attention`, `transformer.softmax` and
    `transformer.layer_norm` by its decomposition
    (`AggregatedOpInterface::decomposeOperation`), giving the unfused form of
    a fused graph. The decomposition is exact: attention becomes
    `matmul(Q, Kᵀ) * scale [+ mask] [causal select] -> softmax -> matmul(·, V)`,
    with rows that see no key producing zeros.

    Before:
    ```mlir
    %y = transformer.softmax %x {dimension = 1 : i64}
        : tensor<4x10xf32> -> tensor<4x10xf32>
    ```
    After:
    ```mlir
    %m = tosa.reduce_max %x {axis = 1 : i32} : (tensor<4x10xf32>) -> tensor<4x1xf32>
    %d = tosa.sub %x, %m : ...
    %e = tosa.exp %d : ...
    %s = tosa.reduce_sum %e {axis = 1 : i32} : ...
    %r = tosa.reciprocal %s : ...
    %y = tosa.mul %e, %r, %shift : ...
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::tosa::TosaDialect"
  ];
}

#endif // TFC_DIALECT_TRANSFORMER_TRANSFORMS_PASSES_TD
