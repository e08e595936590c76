//===- TransformerOps.td - The transformer dialect ---------*- tablegen -*-===//
//
// The ops that upstream MLIR lacks for Transformer models: attention, softmax,
// layer and RMS normalisation as single, decomposable ops on tensors.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_DIALECT_TRANSFORMER_IR_TRANSFORMEROPS_TD
#define TFC_DIALECT_TRANSFORMER_IR_TRANSFORMEROPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Dialect/Linalg/IR/LinalgInterfaces.td"

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

def Transformer_Dialect : Dialect {
  let name = "transformer";
  let cppNamespace = "::tfc::transformer";
  let summary = "Transformer building blocks recognised by tfc's fusion passes";
  let description = [{
    The `transformer` dialect holds the few operations that upstream MLIR
    lacks for Transformer inference: a fused scaled-dot-product attention, a
    numerically safe softmax, a layer normalisation and an RMS
    normalisation. Each is a pure
    operation on ranked tensors with an exact decomposition back to TOSA and
    linalg primitives (the unfused path), so a fused and an unfused build of
    the same model always exist side by side.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::tosa::TosaDialect"
  ];
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Transformer_Float : AnyTypeOf<[F32, F16, BF16]>;
def Transformer_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;

class Transformer_Op<string mnemonic, list<Trait> traits = []>
    : Op<Transformer_Dialect, mnemonic, !listconcat(traits, [
        Pure,
        DeclareOpInterfaceMethods<InferTypeOpInterface>,
        DeclareOpInterfaceMethods<AggregatedOpInterface, ["decomposeOperation"]>
      ])>;

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

def Transformer_AttentionOp : Transformer_Op<"attention"> {
  let summary = "scaled dot-product attention";
  let description = [{
    Computes `softmax(scale * Q·Kᵀ + mask) · V` for every batch and query
    head, without naming the `Sq x Skv` score matrix.

    - `query`: `[B, Hq, Sq, D]`; `key`: `[B, Hkv, Skv, D]`;
      `value`: `[B, Hkv, Skv, Dv]`; result: `[B, Hq, Sq, Dv]`.
    - Grouped-query attention: `Hkv` must divide `Hq`; query head `h` reads
      key/value head `h / (Hq / Hkv)`.
    - `mask` (optional) is additive and broadcastable to `[B, Hq, Sq, Skv]`
      (numpy rules: rank at most 4, each dimension 1 or equal). A mask value
      of `-inf` hides a key.
    - `scale` defaults to `1/sqrt(D)`.
    - `softcap` (optional, positive): the scaled scores are capped before the
      mask is added, `s = softcap * tanh(s / softcap)` (Gemma 2's logit soft
      capping); without it the scores are not capped.
    - `is_causal`: key `j` is visible to query `i` iff `j <= i + (Skv - Sq)`
      (the last query sees every key).
    - `window` (optional, positive): a sliding window; key `j` is hidden
      from query `i` when `i + (Skv - Sq) - j >= window` (query `i` at
      position `i + Skv - Sq`, as `is_causal` places it: transformers'
      `sliding_window`). Hidden keys are left out as `is_causal`'s are; the
      kernels skip the key blocks below a query block's window.
    - A query row with no visible key (fully masked, or causal with
      `Sq > Skv`) yields zeros, never NaN.

    Example:

    ```mlir
    %o = transformer.attention %q, %k, %v mask %m {is_causal, scale = 0.125 : f32}
        : tensor<1x12x77x64xf32>, tensor<1x4x200x64xf32>, tensor<1x4x200x64xf32>,
          tensor<1x1x77x200xf32> -> tensor<1x12x77x64xf32>
    ```
  }];

  let arguments = (ins
    Transformer_FloatTensor:$query,
    Transformer_FloatTensor:$key,
    Transformer_FloatTensor:$value,
    Optional<Transformer_FloatTensor>:$mask,
    OptionalAttr<F32Attr>:$scale,
    UnitAttr:$is_causal,
    OptionalAttr<F32Attr>:$softcap,
    OptionalAttr<I64Attr>:$window
  );
  let results = (outs Transformer_FloatTensor:$result);

  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? attr-dict `:`
    type($query) `,` type($key) `,` type($value) (`,` type($mask)^)?
    `->` type($result)
  }];

  let extraClassDeclaration = [{
    /// The scale applied to Q·Kᵀ: the attribute, or 1/sqrt(D) without it.
    double getEffectiveScale();
    /// The soft cap of the scaled scores, or 0 when they are not capped.
    double getEffectiveSoftcap();
    /// The sliding window's length, or 0 without one.
    int64_t getEffectiveWindow();
  }];

  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// SoftmaxOp
//===----------------------------------------------------------------------===//

def Transformer_SoftmaxOp : Transformer_Op<"softmax"> {
  let summary = "numerically safe softmax along one dimension";
  let description = [{
    `exp(x - max(x)) / sum(exp(x - max(x)))` along `dimension`. The maximum
    is subtracted first, so large inputs do not overflow.

    Example:

    ```mlir
    %y = transformer.softmax %x {dimension = 3 : i64}
        : tensor<2x12x128x128xf32> -> tensor<2x12x128x128xf32>
    ```
  }];

  let arguments = (ins Transformer_FloatTensor:$input, I64Attr:$dimension);
  let results = (outs Transformer_FloatTensor:$result);

  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($result)
  }];

  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// LayerNormOp
//===----------------------------------------------------------------------===//

def Transformer_LayerNormOp : Transformer_Op<"layer_norm"> {
  let summary = "layer normalisation over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * gamma + beta`, with mean and the
    biased variance taken over the last dimension `N` of `input`. `gamma`
    and `beta` have shape `[N]`.

    Example:

    ```mlir
    %y = transformer.layer_norm %x, %gamma, %beta {epsilon = 1.0e-12 : f32}
        : tensor<8x128x384xf32>, tensor<384xf32>, tensor<384xf32>
          -> tensor<8x128x384xf32>
    ```
  }];

  let arguments = (ins
    Transformer_FloatTensor:$input,
    Transformer_FloatTensor:$gamma,
    Transformer_FloatTensor:$beta,
    DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon
  );
  let results = (outs Transformer_FloatTensor:$result);

  let assemblyFormat = [{
    $input `,` $gamma `,` $beta attr-dict `:` type($input) `,` type($gamma)
    `,` type($beta) `->` type($result)
  }];

  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// RmsNormOp
//===----------------------------------------------------------------------===//

def Transformer_RmsNormOp : Transformer_Op<"rms_norm"> {
  let summary = "root-mean-square normalisation over the last dimension";
  let description = [{
    `x * rsqrt(mean(x * x) + epsilon) * gamma`, the mean taken over the last
    dimension `N` of `input` (the RMSNorm of LLaMA, Mistral, Qwen2 and T5);
    `gamma` has shape `[N]`. The statistics and the normalisation are f32
    for every element type. For f16 and bf16 the normalised value is
    rounded to the type before it is multiplied by gamma, and the product
    is rounded again: transformers' `weight * x.to(input_dtype)`, so that
    fusing a half-precision model's RMSNorm changes no bit of its result.

    Example:

    ```mlir
    %y = transformer.rms_norm %x, %gamma {epsilon = 1.0e-06 : f32}
        : tensor<1x128x4096xf16>, tensor<4096xf16> -> tensor<1x128x4096xf16>
    ```
  }];

  let arguments = (ins
    Transformer_FloatTensor:$input,
    Transformer_FloatTensor:$gamma,
    DefaultValuedAttr<F32Attr, "1.0e-6">:$epsilon
  );
  let results = (outs Transformer_FloatTensor:$result);

  let assemblyFormat = [{
    $input `,` $gamma attr-dict `:` type($input) `,` type($gamma) `->`
    type($result)
  }];

  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// AllReduceOp
//===----------------------------------------------------------------------===//

def Transformer_AllReduceOp
    : Op<Transformer_Dialect, "all_reduce", [SameOperandsAndResultType]> {
  let summary = "sum of a tensor over the ranks of a tensor-parallel model";
  let description = [{
    The elementwise sum of `input` over every rank of a model split by
    `tfc-compile --tensor-parallel=N` (docs/tensor-parallel.md): each rank
    holds a partial sum (the product of its heads or of its part of the
    MLP's inner features) and gets the whole. It has no decomposition:
    the fused and the unfused build keep it, and the CPU lowering calls the
    runtime's all-reduce (`tfc_all_reduce_f32`, in f32). It is not pure:
    every rank must call it the same number of times in the same order, so
    it is neither moved, merged nor removed.

    Example:

    ```mlir
    %y = transformer.all_reduce %x : tensor<1x16x4096xf32>
    ```
  }];

  let arguments = (ins Transformer_FloatTensor:$input);
  let results = (outs Transformer_FloatTensor:$result);

  let assemblyFormat = [{
    $input attr-dict `:` type($input)
  }];
}

//===----------------------------------------------------------------------===//
// AllGatherOp
//===----------------------------------------------------------------------===//

def Transformer_AllGatherOp : Op<Transformer_Dialect, "all_gather"> {
  let summary = "concatenation of a tensor's parts over the ranks";
  let description = [{
    Every rank's `input` concatenated along the last axis, in rank order,
    on every rank of a model split by `tfc-compile --tensor-parallel=N`:
    the result's last axis is N times the input's (a vocabulary-split LM
    head's logits, each rank computing its part of the vocabulary). Like
    `all_reduce` it has no decomposition, the CPU lowering calls the
    runtime (`tfc_all_gather_f32`, in f32), and it is not pure: every rank
    must call it the same number of times in the same order.

    Example:

    ```mlir
    %y = transformer.all_gather %x : tensor<1x16x16000xf32> -> tensor<1x16x32000xf32>
    ```
  }];

  let arguments = (ins Transformer_FloatTensor:$input);
  let results = (outs Transformer_FloatTensor:$result);

  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ParallelRankOp
//===----------------------------------------------------------------------===//

def Transformer_ParallelRankOp
    : Op<Transformer_Dialect, "parallel_rank", [Pure]> {
  let summary = "this rank's index among the ranks of a split model";
  let description = [{
    The rank (0 to N - 1) of the process running a model split by
    `tfc-compile --tensor-parallel=N`, as a one-element tensor: one library
    serves every rank, which learns its index when it loads. A
    vocabulary-split embedding looks up the ids of its rank's rows with it.
    The CPU lowering calls the runtime's `tfc_parallel_rank`.

    Example:

    ```mlir
    %r = transformer.parallel_rank : tensor<1xi32>
    ```
  }];

  let results = (outs 1DTensorOf<[I32]>:$result);

  let assemblyFormat = [{
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

#endif // TFC_DIALECT_TRANSFORMER_IR_TRANSFORMEROPS_TD
