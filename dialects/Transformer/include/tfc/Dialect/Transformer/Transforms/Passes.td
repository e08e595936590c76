//===- Passes.td - Transformer dialect passes --------------*- tablegen -*-===//

#ifndef TFC_DIALECT_TRANSFORMER_TRANSFORMS_PASSES_TD
#define TFC_DIALECT_TRANSFORMER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def TransformerDecompose : Pass<"transformer-decompose"> {
  let summary = "Decompose transformer ops back to TOSA and linalg primitives";
  let description = [{
    Replaces every `transformer.attention`, `transformer.softmax`,
    `transformer.layer_norm` and `transformer.rms_norm` by its decomposition
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


//===----------------------------------------------------------------------===//
// Fusion: recognise transformer blocks in the primitive TOSA graph
//===----------------------------------------------------------------------===//

defvar FuseDependentDialects = [
  "::mlir::tosa::TosaDialect",
  "::tfc::transformer::TransformerDialect"
];

class TransformerFusePass<string arg> : Pass<arg> {
  let dependentDialects = FuseDependentDialects;
  let options = [
    Option<"explainMissed", "explain-missed", "bool", /*default=*/"false",
           "Emit a remark at every candidate that is not fused, naming the "
           "first condition that failed">
  ];
}

def TransformerFuseSoftmax : TransformerFusePass<"transformer-fuse-softmax"> {
  let summary = "Recognise softmax chains and rewrite them to transformer.softmax";
  let description = [{
    Finds `exp(x - reduce_max(x)) * reciprocal(reduce_sum(exp(..)))` over
    one axis, with or without the max subtraction, and replaces it by
    `transformer.softmax` (which always subtracts the max). The exp, the sum
    and the reciprocal must have no other use.

    Before:
    ```mlir
    %m = tosa.reduce_max %x {axis = 1 : i32} : (tensor<4x10xf32>) -> tensor<4x1xf32>
    %d = tosa.sub %x, %m : (tensor<4x10xf32>, tensor<4x1xf32>) -> tensor<4x10xf32>
    %e = tosa.exp %d : (tensor<4x10xf32>) -> tensor<4x10xf32>
    %s = tosa.reduce_sum %e {axis = 1 : i32} : (tensor<4x10xf32>) -> tensor<4x1xf32>
    %r = tosa.reciprocal %s : (tensor<4x1xf32>) -> tensor<4x1xf32>
    %y = tosa.mul %e, %r, %shift : (tensor<4x10xf32>, tensor<4x1xf32>, tensor<1xi8>) -> tensor<4x10xf32>
    ```
    After:
    ```mlir
    %y = transformer.softmax %x {dimension = 1 : i64} : tensor<4x10xf32> -> tensor<4x10xf32>
    ```
    Candidates explained with `explain-missed`: every `tosa.mul` of an exp.
  }];
}

def TransformerFuseLayerNorm
    : TransformerFusePass<"transformer-fuse-layer-norm"> {
  let summary = "Recognise layer normalisation and rewrite it to transformer.layer_norm";
  let description = [{
    Finds, over the last axis of `x` with size `N`:
    `c = x - reduce_sum(x) * (1/N)`, `var = reduce_sum(c * c) * (1/N)` (or
    `pow(c, 2)`, and `1/N` as a constant or `reciprocal(N)`),
    `y = c * rsqrt(var + eps)`, optionally `* gamma` and `+ beta` with gamma
    and beta of shape `[1, .., 1, N]`. gamma and beta become rank-1 `[N]`
    operands (through `tosa.reshape`), or constant ones and zeros when the
    graph has none.

    Before:
    ```mlir
    %s = tosa.reduce_sum %x {axis = 1 : i32} : (tensor<8x64xf32>) -> tensor<8x1xf32>
    %mean = tosa.mul %s, %inv_n, %shift : ...
    %c = tosa.sub %x, %mean : ...
    %sq = tosa.mul %c, %c, %shift : ...
    %vs = tosa.reduce_sum %sq {axis = 1 : i32} : ...
    %var = tosa.mul %vs, %inv_n, %shift : ...
    %ve = tosa.add %var, %eps : ...
    %r = tosa.rsqrt %ve : ...
    %n = tosa.mul %c, %r, %shift : ...
    %g = tosa.mul %n, %gamma_1xN, %shift : ...
    %y = tosa.add %g, %beta_1xN : ...
    ```
    After:
    ```mlir
    %y = transformer.layer_norm %x, %gamma, %beta {epsilon = 1.0e-05 : f32}
        : tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<8x64xf32>
    ```
    Candidates explained with `explain-missed`: every `tosa.rsqrt`.
  }];
}

def TransformerFuseRmsNorm
    : TransformerFusePass<"transformer-fuse-rms-norm"> {
  let summary = "Recognise RMS normalisation and rewrite it to transformer.rms_norm";
  let description = [{
    Finds, over the last axis of `x` with size `N`:
    `ms = reduce_sum(x * x) * (1/N)` (or `pow(x, 2)`), `y = x * rsqrt(ms +
    eps)` with `x` not centred (else it is a layer_norm), optionally
    `* gamma` of shape `[1, .., 1, N]`. When `x` is an f16/bf16 value cast to
    f32 and `y` is cast back to that type before gamma (transformers'
    LlamaRMSNorm, and `tfc-import --dtype`), the op is of the narrow type:
    its definition rounds there too. gamma becomes a rank-1 `[N]` operand
    (constant ones when the graph has none).

    Before:
    ```mlir
    %sq = tosa.mul %x, %x, %shift : ...
    %s = tosa.reduce_sum %sq {axis = 2 : i32} : (tensor<1x8x64xf32>) -> tensor<1x8x1xf32>
    %ms = tosa.mul %s, %inv_n, %shift : ...
    %e = tosa.add %ms, %eps : ...
    %r = tosa.rsqrt %e : ...
    %n = tosa.mul %x, %r, %shift : ...
    %y = tosa.mul %gamma_1x1xN, %n, %shift : ...
    ```
    After:
    ```mlir
    %y = transformer.rms_norm %x, %gamma {epsilon = 1.0e-06 : f32}
        : tensor<1x8x64xf32>, tensor<64xf32> -> tensor<1x8x64xf32>
    ```
    Candidates explained with `explain-missed`: every `tosa.rsqrt` of a
    mean square of an uncentred value.
  }];
}

def TransformerFuseAttention
    : TransformerFusePass<"transformer-fuse-attention"> {
  let summary = "Recognise scaled dot-product attention and rewrite it to transformer.attention";
  let description = [{
    Finds `matmul(softmax(mask(scale * matmul(Q, Kᵀ))), V)` however an
    exporter wrote it, with one matcher (`matchAttention`) composed of small
    ones:

    - scale: `mul` by a splat constant or by `reciprocal(constant)`, on the
      scores, on Q, or split over Q and K (the product is the scale); none
      gives `scale = 1.0`;
    - Kᵀ: a `tosa.transpose` swapping exactly the last two dims, or K stored
      transposed (a transpose is inserted); a reshape in its place, or any
      other permutation, is rejected;
    - 4-D attention squeezed to 3-D matmuls by reshapes that only merge
      `[B, H]` into `B*H`;
    - an additive mask (`add`), a causal `select` (recognised as
      `is_causal` when the constant is exactly `j <= i + Skv - Sq`), or
      another constant boolean `select` (an additive `0 / fill` mask);
    - grouped-query attention with K/V repeated by `tosa.tile` on the head
      dim or by reshape/tile/reshape: the op reads the un-repeated K/V.
    - the softmax: `transformer.softmax` or the raw TOSA chain, on the last
      axis.

    Scores and probabilities must have no other use.

    Before (3-D, causal):
    ```mlir
    %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : ...
    %s = tosa.matmul %q, %kt, %zp, %zp : ...
    %ss = tosa.mul %s, %scale, %shift : ...
    %sm = tosa.select %tril, %ss, %neg_inf : ...
    %p = transformer.softmax %sm {dimension = 2 : i64} : ...
    %o = tosa.matmul %p, %v, %zp, %zp : ...
    ```
    After:
    ```mlir
    %o4 = transformer.attention %q4, %k4, %v4 {is_causal, scale = 1.250000e-01 : f32} : ...
    %o = tosa.reshape %o4, %shape : ...
    ```
    Candidates explained with `explain-missed`: every `tosa.matmul` whose
    LHS comes, through reshapes, from a softmax or a softmax-like `mul`.
  }];
}

def TransformerFuse : TransformerFusePass<"transformer-fuse"> {
  let summary = "Run every transformer fusion to a fixpoint";
  let description = [{
    Applies the softmax, layer-norm, RMS-norm and attention fusion patterns
    together with the greedy driver until none applies, so an attention is
    found whether its softmax was fused first or not. See
    `--transformer-fuse-softmax`, `--transformer-fuse-layer-norm`,
    `--transformer-fuse-rms-norm` and `--transformer-fuse-attention`.

    Before: a BERT layer in TOSA. After: the same layer with
    `transformer.attention` and two `transformer.layer_norm`.
  }];
}

#endif // TFC_DIALECT_TRANSFORMER_TRANSFORMS_PASSES_TD
