// all_gather and parallel_rank on the GPU (a vocabulary-split model): the
// operand's device buffer as f32 rows and a fresh buffer of the ranks'
// rows one after another go to the runtime's tfc_device_all_gather_f32
// (NCCL), the result transposed to the ranks' columns side by side; the
// rank is a fresh device buffer that tfc_device_parallel_rank sets. Fused
// and unfused, down to LLVM.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx | FileCheck %s
// RUN: tfc-opt %s --split-input-file --tfc-nvptx-pipeline | FileCheck %s --check-prefix=CALL
// RUN: tfc-opt %s --split-input-file --tfc-nvptx-pipeline-unfused | FileCheck %s --check-prefix=CALL

// CHECK: func.func private @tfc_device_all_gather_f32(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @all_gather_f32
// CHECK-SAME: (%[[X:.*]]: tensor<1x3x5xf32>)
// CHECK: %[[R:.*]] = tosa.reshape %[[X]], %{{.*}} -> tensor<3x5xf32>
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[R]] read_only : tensor<3x5xf32> to memref<3x5xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<6x5xf32>
// CHECK: %[[A:.*]] = memref.cast %[[IN]]
// CHECK: %[[B:.*]] = memref.cast %[[OUT]]
// CHECK: call @tfc_device_all_gather_f32(%[[A]], %[[B]])
// CHECK: %[[G:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<6x5xf32> to tensor<6x5xf32>
// CHECK: %[[G3:.*]] = tosa.reshape %[[G]], %{{.*}} -> tensor<2x3x5xf32>
// CHECK: %[[T:.*]] = tosa.transpose %[[G3]] {perms = array<i32: 1, 0, 2>} : (tensor<2x3x5xf32>) -> tensor<3x2x5xf32>
// CHECK: %[[Y:.*]] = tosa.reshape %[[T]], %{{.*}} -> tensor<1x3x10xf32>
// CHECK: return %[[Y]]
// CHECK-NOT: transformer.all_gather
// CALL-LABEL: llvm.func @all_gather_f32(
// CALL: llvm.call @tfc_device_all_gather_f32(
// CALL-NOT: transformer.all_gather
func.func @all_gather_f32(%x: tensor<1x3x5xf32>) -> tensor<1x3x10xf32> {
  %y = transformer.all_gather %x : tensor<1x3x5xf32> -> tensor<1x3x10xf32>
  return %y : tensor<1x3x10xf32>
}

// -----

// CHECK: func.func private @tfc_device_parallel_rank(memref<?xi32, strided<[?], offset: ?>>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @rank
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1xi32>
// CHECK: %[[A:.*]] = memref.cast %[[OUT]] : memref<1xi32> to memref<?xi32, strided<[?], offset: ?>>
// CHECK: call @tfc_device_parallel_rank(%[[A]])
// CHECK: %[[R:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<1xi32> to tensor<1xi32>
// CHECK: return %[[R]]
// CHECK-NOT: transformer.parallel_rank
// CALL-LABEL: llvm.func @rank(
// CALL: llvm.call @tfc_device_parallel_rank(
// CALL-NOT: transformer.parallel_rank
func.func @rank() -> tensor<1xi32> {
  %r = transformer.parallel_rank : tensor<1xi32>
  return %r : tensor<1xi32>
}
