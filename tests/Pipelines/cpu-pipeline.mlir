// RUN: tfc-opt %s --tfc-cpu-pipeline | FileCheck %s
// RUN: tfc-opt %s --tfc-cpu-pipeline-unfused | FileCheck %s --check-prefix=UNFUSED

// The whole CPU lowering to the LLVM dialect, runnable by hand. Fused: the
// attention is one call into the micro-kernel, writing the out-parameter;
// unfused: the matmuls call the GEMM kernel and the softmax is loops (on
// OpenMP threads), with no attention kernel.

// CHECK:       llvm.func private @tfc_uk_attention_f32(
// CHECK:         llvm.call @_mlir_ciface_tfc_uk_attention_f32
// CHECK-LABEL: llvm.func @main(
// CHECK:         llvm.call @tfc_uk_attention_f32(
// CHECK-NOT:     tfc_uk_batch_matmul

// UNFUSED:       llvm.call @_mlir_ciface_tfc_uk_batch_matmul_f32
// UNFUSED-LABEL: llvm.func @main(
// UNFUSED:         omp.parallel
// UNFUSED:         llvm.call @tfc_uk_batch_matmul_f32(
// UNFUSED-NOT:     tfc_uk_attention
func.func @main(%q: tensor<1x4x77x64xf32>, %k: tensor<1x2x200x64xf32>, %v: tensor<1x2x200x64xf32>) -> tensor<1x4x77x64xf32> {
  %o = transformer.attention %q, %k, %v {is_causal} : tensor<1x4x77x64xf32>, tensor<1x2x200x64xf32>, tensor<1x2x200x64xf32> -> tensor<1x4x77x64xf32>
  return %o : tensor<1x4x77x64xf32>
}
