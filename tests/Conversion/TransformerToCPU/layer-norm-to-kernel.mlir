// layer_norm on the CPU: rows by the last dimension for the kernel. An f32
// op goes to the _f32 kernel, and so does an f16 one, widened around it; a
// bf16 op goes to the _bf16 kernel whole (input, gamma, beta and result
// bf16: the kernel computes in f32 and rounds its rows).
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-cpu | FileCheck %s
// RUN: tfc-opt %s --split-input-file --pass-pipeline="builtin.module(convert-transformer-to-cpu,func.func(tosa-to-linalg,tosa-to-arith,tosa-to-tensor),one-shot-bufferize{bufferize-function-boundaries})" | FileCheck %s --check-prefix=CALL

// CHECK-LABEL: func.func @layer_norm_f32
// CHECK: %[[R:.*]] = tosa.reshape %{{.*}} -> tensor<6x8xf32>
// CHECK: transformer.layer_norm %[[R]], %{{.*}}, %{{.*}} : tensor<6x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<6x8xf32>
// CALL-LABEL: func.func @layer_norm_f32
// CALL: call @tfc_uk_layer_norm_f32(
func.func @layer_norm_f32(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %y = transformer.layer_norm %x, %g, %b : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// CHECK-LABEL: func.func @layer_norm_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8xbf16>, %[[G:.*]]: tensor<8xbf16>, %[[B:.*]]: tensor<8xbf16>)
// CHECK-NOT: tosa.cast
// CHECK: %[[R:.*]] = tosa.reshape %[[X]], %{{.*}} -> tensor<6x8xbf16>
// CHECK: %[[Y:.*]] = transformer.layer_norm %[[R]], %[[G]], %[[B]] {{.*}}: tensor<6x8xbf16>, tensor<8xbf16>, tensor<8xbf16> -> tensor<6x8xbf16>
// CHECK: %[[Y3:.*]] = tosa.reshape %[[Y]], %{{.*}} -> tensor<2x3x8xbf16>
// CHECK-NEXT: return %[[Y3]]
// CALL-LABEL: func.func @layer_norm_bf16
// CALL-NOT: linalg.generic
// CALL: call @tfc_uk_layer_norm_bf16({{.*}}) : (memref<?x?xbf16, {{.*}}>, memref<?xbf16, {{.*}}>, memref<?xbf16, {{.*}}>, memref<?x?xbf16, {{.*}}>, f32) -> ()
func.func @layer_norm_bf16(%x: tensor<2x3x8xbf16>, %g: tensor<8xbf16>, %b: tensor<8xbf16>) -> tensor<2x3x8xbf16> {
  %y = transformer.layer_norm %x, %g, %b {epsilon = 1.0e-12 : f32} : tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<8xbf16> -> tensor<2x3x8xbf16>
  return %y : tensor<2x3x8xbf16>
}

// -----

// CHECK-LABEL: func.func @layer_norm_f16
// CHECK: tosa.cast %{{.*}} : (tensor<2x3x8xf16>) -> tensor<2x3x8xf32>
// CHECK: transformer.layer_norm {{.*}} : tensor<6x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<6x8xf32>
// CHECK: tosa.cast %{{.*}} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf16>
// CALL-LABEL: func.func @layer_norm_f16
// CALL: call @tfc_uk_layer_norm_f32(
func.func @layer_norm_f16(%x: tensor<2x3x8xf16>, %g: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<2x3x8xf16> {
  %y = transformer.layer_norm %x, %g, %b : tensor<2x3x8xf16>, tensor<8xf16>, tensor<8xf16> -> tensor<2x3x8xf16>
  return %y : tensor<2x3x8xf16>
}
