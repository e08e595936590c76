// rms_norm on the CPU: rows of f32 for the micro-kernel. An f32 op passes
// gamma to the kernel; an f16/bf16 op (defined to round the normalised value
// to its type before gamma) runs the kernel with ones and multiplies by gamma
// after the rounding, in its own type.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-cpu | FileCheck %s

// CHECK: func.func private @tfc_uk_rms_norm_f32(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, f32) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @rms_norm_f32
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8xf32>, %[[G:.*]]: tensor<8xf32>)
// CHECK: %[[R:.*]] = tosa.reshape %[[X]], %{{.*}} -> tensor<6x8xf32>
// CHECK: %[[Y:.*]] = transformer.rms_norm %[[R]], %[[G]] : tensor<6x8xf32>, tensor<8xf32> -> tensor<6x8xf32>
// CHECK: tosa.reshape %[[Y]], %{{.*}} -> tensor<2x3x8xf32>
// CHECK-NOT: tosa.mul
func.func @rms_norm_f32(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %y = transformer.rms_norm %x, %g : tensor<2x3x8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// CHECK-LABEL: func.func @rms_norm_f16
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8xf16>, %[[G:.*]]: tensor<8xf16>)
// CHECK: %[[ONES:.*]] = "tosa.const"() <{values = dense<1.000000e+00> : tensor<8xf32>}>
// CHECK: %[[X32:.*]] = tosa.cast %[[X]] : (tensor<2x3x8xf16>) -> tensor<2x3x8xf32>
// CHECK: %[[R:.*]] = tosa.reshape %[[X32]], %{{.*}} -> tensor<6x8xf32>
// CHECK: %[[Y:.*]] = transformer.rms_norm %[[R]], %[[ONES]] {epsilon = 9.99999974E-6 : f32} : tensor<6x8xf32>, tensor<8xf32> -> tensor<6x8xf32>
// CHECK: %[[Y3:.*]] = tosa.reshape %[[Y]], %{{.*}} -> tensor<2x3x8xf32>
// CHECK: %[[Y16:.*]] = tosa.cast %[[Y3]] : (tensor<2x3x8xf32>) -> tensor<2x3x8xf16>
// CHECK: %[[G3:.*]] = tosa.reshape %[[G]], %{{.*}} -> tensor<1x1x8xf16>
// CHECK: %[[OUT:.*]] = tosa.mul %[[Y16]], %[[G3]], %{{.*}} -> tensor<2x3x8xf16>
// CHECK: return %[[OUT]]
func.func @rms_norm_f16(%x: tensor<2x3x8xf16>, %g: tensor<8xf16>) -> tensor<2x3x8xf16> {
  %y = transformer.rms_norm %x, %g {epsilon = 1.0e-5 : f32} : tensor<2x3x8xf16>, tensor<8xf16> -> tensor<2x3x8xf16>
  return %y : tensor<2x3x8xf16>
}
