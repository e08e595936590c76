// all_gather and parallel_rank (a vocabulary-split embedding and LM head)
// on the CPU: f32 rows for the runtime's tfc_all_gather_f32 (an f16 op's
// operand widened and its result rounded back), gathered along the last
// axis; the rank a call of tfc_parallel_rank. The unfused build's
// decomposition leaves both, and both CPU pipelines, fused and unfused,
// lower them to the runtime's calls.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-cpu | FileCheck %s
// RUN: tfc-opt %s --split-input-file --transformer-decompose | FileCheck %s --check-prefix=DECOMPOSE
// RUN: tfc-opt %s --split-input-file --tfc-cpu-pipeline | FileCheck %s --check-prefix=CALL
// RUN: tfc-opt %s --split-input-file --tfc-cpu-pipeline-unfused | FileCheck %s --check-prefix=CALL

// CHECK: func.func private @tfc_all_gather_f32(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @all_gather_f32
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x5xf32>)
// CHECK: %[[R:.*]] = tosa.reshape %[[X]], %{{.*}} -> tensor<6x5xf32>
// CHECK: %[[Y:.*]] = transformer.all_gather %[[R]] : tensor<6x5xf32> -> tensor<6x10xf32>
// CHECK: %[[OUT:.*]] = tosa.reshape %[[Y]], %{{.*}} -> tensor<2x3x10xf32>
// CHECK: return %[[OUT]]
// DECOMPOSE-LABEL: func.func @all_gather_f32
// DECOMPOSE: transformer.all_gather %{{.*}} : tensor<2x3x5xf32> -> tensor<2x3x10xf32>
// CALL: llvm.call @_mlir_ciface_tfc_all_gather_f32(%{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr) -> ()
// CALL-LABEL: llvm.func @all_gather_f32(
// CALL: llvm.call @tfc_all_gather_f32(
// CALL-NOT: transformer.all_gather
func.func @all_gather_f32(%x: tensor<2x3x5xf32>) -> tensor<2x3x10xf32> {
  %y = transformer.all_gather %x : tensor<2x3x5xf32> -> tensor<2x3x10xf32>
  return %y : tensor<2x3x10xf32>
}

// -----

// CHECK-LABEL: func.func @all_gather_f16
// CHECK-SAME: (%[[X:.*]]: tensor<4x3xf16>)
// CHECK: %[[X32:.*]] = tosa.cast %[[X]] : (tensor<4x3xf16>) -> tensor<4x3xf32>
// CHECK: %[[Y:.*]] = transformer.all_gather %{{.*}} : tensor<4x3xf32> -> tensor<4x9xf32>
// CHECK: tosa.cast %{{.*}} : (tensor<4x9xf32>) -> tensor<4x9xf16>
// DECOMPOSE-LABEL: func.func @all_gather_f16
// DECOMPOSE: transformer.all_gather %{{.*}} : tensor<4x3xf16> -> tensor<4x9xf16>
// CALL-LABEL: llvm.func @all_gather_f16(
// CALL: llvm.call @tfc_all_gather_f32(
func.func @all_gather_f16(%x: tensor<4x3xf16>) -> tensor<4x9xf16> {
  %y = transformer.all_gather %x : tensor<4x3xf16> -> tensor<4x9xf16>
  return %y : tensor<4x9xf16>
}

// -----

// CHECK: func.func private @tfc_parallel_rank() -> i32
// CHECK-NOT: emit_c_interface
// CHECK-LABEL: func.func @rank
// CHECK: %[[R:.*]] = call @tfc_parallel_rank() : () -> i32
// CHECK: %[[T:.*]] = tensor.from_elements %[[R]] : tensor<1xi32>
// CHECK: return %[[T]]
// DECOMPOSE-LABEL: func.func @rank
// DECOMPOSE: transformer.parallel_rank : tensor<1xi32>
// CALL-LABEL: llvm.func @rank(
// CALL: llvm.call @tfc_parallel_rank() : () -> i32
// CALL-NOT: transformer.parallel_rank
func.func @rank() -> tensor<1xi32> {
  %r = transformer.parallel_rank : tensor<1xi32>
  return %r : tensor<1xi32>
}
