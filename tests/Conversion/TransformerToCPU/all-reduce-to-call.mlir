// all_reduce (tensor parallelism) on the CPU: f32 rows for the runtime's
// tfc_all_reduce_f32 (an f16 op's operand widened and its sum rounded back
// once); the unfused build's decomposition leaves it, and both CPU
// pipelines, fused and unfused, lower it to the call of the runtime's
// _mlir_ciface_tfc_all_reduce_f32.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-cpu | FileCheck %s
// RUN: tfc-opt %s --split-input-file --transformer-decompose | FileCheck %s --check-prefix=DECOMPOSE
// RUN: tfc-opt %s --split-input-file --tfc-cpu-pipeline | FileCheck %s --check-prefix=CALL
// RUN: tfc-opt %s --split-input-file --tfc-cpu-pipeline-unfused | FileCheck %s --check-prefix=CALL

// CHECK: func.func private @tfc_all_reduce_f32(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @all_reduce_f32
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8xf32>)
// CHECK: %[[R:.*]] = tosa.reshape %[[X]], %{{.*}} -> tensor<6x8xf32>
// CHECK: %[[Y:.*]] = transformer.all_reduce %[[R]] : tensor<6x8xf32>
// CHECK: %[[OUT:.*]] = tosa.reshape %[[Y]], %{{.*}} -> tensor<2x3x8xf32>
// CHECK: return %[[OUT]]
// DECOMPOSE-LABEL: func.func @all_reduce_f32
// DECOMPOSE: transformer.all_reduce %{{.*}} : tensor<2x3x8xf32>
// CALL: llvm.call @_mlir_ciface_tfc_all_reduce_f32(%{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr) -> ()
// CALL-LABEL: llvm.func @all_reduce_f32(
// CALL: llvm.call @tfc_all_reduce_f32(
// CALL-NOT: transformer.all_reduce
func.func @all_reduce_f32(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %y = transformer.all_reduce %x : tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// CHECK-LABEL: func.func @all_reduce_f16
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf16>)
// CHECK: %[[X32:.*]] = tosa.cast %[[X]] : (tensor<4x8xf16>) -> tensor<4x8xf32>
// CHECK: %[[Y:.*]] = transformer.all_reduce %{{.*}} : tensor<4x8xf32>
// CHECK: tosa.cast %{{.*}} : (tensor<4x8xf32>) -> tensor<4x8xf16>
// DECOMPOSE-LABEL: func.func @all_reduce_f16
// DECOMPOSE: transformer.all_reduce %{{.*}} : tensor<4x8xf16>
// CALL-LABEL: llvm.func @all_reduce_f16(
// CALL: llvm.call @tfc_all_reduce_f32(
func.func @all_reduce_f16(%x: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %y = transformer.all_reduce %x : tensor<4x8xf16>
  return %y : tensor<4x8xf16>
}
