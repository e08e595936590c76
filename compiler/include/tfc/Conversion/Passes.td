//===- Passes.td - tfc conversion passes -------------------*- tablegen -*-===//

#ifndef TFC_CONVERSION_PASSES_TD
#define TFC_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertTransformerToCPU : Pass<"convert-transformer-to-cpu", "mlir::ModuleOp"> {
  let summary = "Lower transformer ops to calls into tfc's CPU micro-kernels";
  let description = [{
    Replaces `transformer.attention`, `transformer.softmax` and
    `transformer.layer_norm` by calls into the CPU micro-kernels that
    tfc-compile links into every model (`compiler/ukernels/`): a flash
    attention with an online softmax that never forms the score matrix, and
    one-pass-per-row softmax and layer normalisation. The calls take memref
    descriptors (`llvm.emit_c_interface`); operands cross from tensors with
    `bufferization.to_buffer` and the result, written into a fresh 64-byte
    aligned buffer, comes back with `bufferization.to_tensor`, so one-shot
    bufferization sees no copy. f16 and bf16 operands are widened to f32
    around the call. Softmax over an inner dimension is transposed to the
    last one first.

    Before:
    ```mlir
    %o = transformer.attention %q, %k, %v {is_causal}
        : tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>,
          tensor<1x12x128x64xf32> -> tensor<1x12x128x64xf32>
    ```
    After:
    ```mlir
    %qb = bufferization.to_buffer %q read_only : tensor<1x12x128x64xf32> to memref<1x12x128x64xf32>
    ...
    %ob = memref.alloc() {alignment = 64 : i64} : memref<1x12x128x64xf32>
    func.call @tfc_uk_attention_f32(%qc, %kc, %vc, %qc, %oc, %scale, %c0_i32, %c1_i32) : (...) -> ()
    %o = bufferization.to_tensor %ob restrict writable : memref<1x12x128x64xf32> to tensor<1x12x128x64xf32>
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::tosa::TosaDialect"
  ];
}

#endif // TFC_CONVERSION_PASSES_TD
