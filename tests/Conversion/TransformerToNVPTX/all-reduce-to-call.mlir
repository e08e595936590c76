// all_reduce on the GPU: the operand's device buffer as f32 rows (an f16
// op's operand widened and its result rounded back) and a fresh device
// buffer for the sum go to the runtime's tfc_device_all_reduce_f32 (NCCL
// on the model's stream), fused or unfused.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx | FileCheck %s
// RUN: tfc-opt %s --split-input-file --tfc-nvptx-pipeline | FileCheck %s --check-prefix=CALL
// RUN: tfc-opt %s --split-input-file --tfc-nvptx-pipeline-unfused | FileCheck %s --check-prefix=CALL

// CHECK: func.func private @tfc_device_all_reduce_f32(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @all_reduce_f32
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x5xf32>)
// CHECK: %[[R:.*]] = tosa.reshape %[[X]], %{{.*}} -> tensor<6x5xf32>
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[R]] read_only : tensor<6x5xf32> to memref<6x5xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<6x5xf32>
// CHECK: %[[A:.*]] = memref.cast %[[IN]] : memref<6x5xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK: %[[B:.*]] = memref.cast %[[OUT]] : memref<6x5xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
// CHECK: call @tfc_device_all_reduce_f32(%[[A]], %[[B]])
// CHECK: %[[SUM:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<6x5xf32> to tensor<6x5xf32>
// CHECK: %[[Y:.*]] = tosa.reshape %[[SUM]], %{{.*}} -> tensor<2x3x5xf32>
// CHECK: return %[[Y]]
// CHECK-NOT: transformer.all_reduce
// CALL-LABEL: llvm.func @all_reduce_f32(
// CALL: llvm.call @tfc_device_all_reduce_f32(
// CALL-NOT: transformer.all_reduce
func.func @all_reduce_f32(%x: tensor<2x3x5xf32>) -> tensor<2x3x5xf32> {
  %y = transformer.all_reduce %x : tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// CHECK-LABEL: func.func @all_reduce_f16
// CHECK: tosa.cast %{{.*}} : (tensor<4x7xf16>) -> tensor<4x7xf32>
// CHECK: call @tfc_device_all_reduce_f32
// CHECK: tosa.cast %{{.*}} : (tensor<4x7xf32>) -> tensor<4x7xf16>
// CALL-LABEL: llvm.func @all_reduce_f16(
// CALL: llvm.call @tfc_device_all_reduce_f32(
func.func @all_reduce_f16(%x: tensor<4x7xf16>) -> tensor<4x7xf16> {
  %y = transformer.all_reduce %x : tensor<4x7xf16>
  return %y : tensor<4x7xf16>
}
