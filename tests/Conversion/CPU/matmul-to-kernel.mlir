// RUN: tfc-opt %s --convert-linalg-matmul-to-cpu | FileCheck %s
//
// Matmuls with an f32 result go to the packed f32 GEMM micro-kernel; f16
// (bf16) operands are widened into f32 temporaries first (the same
// products and f32 sums), freed after the call, and a widened weight is
// not marked constant (flag 2): the micro-kernel keys its packed weights
// by address, which the next temporary may reuse.

// CHECK-LABEL: func.func @f16_weight
// CHECK: %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x16x32xf32>
// CHECK: linalg.generic {{.*}} ins(%arg0 : memref<2x16x32xf16>) outs(%[[A]] : memref<2x16x32xf32>)
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: %[[B:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x32x24xf32>
// CHECK: linalg.generic {{.*}} ins(%arg1 : memref<2x32x24xf16>) outs(%[[B]] : memref<2x32x24xf32>)
// CHECK: %[[FLAGS:.*]] = arith.constant 1 : i32
// CHECK-NEXT: call @tfc_uk_batch_matmul_f32({{.*}}, %[[FLAGS]])
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: memref.dealloc %[[B]]
// The f32 weight is constant (1 | 2).
// CHECK-LABEL: func.func @f32_weight
// CHECK-NOT: memref.alloc
// CHECK: arith.constant 3 : i32
// CHECK: call @tfc_uk_matmul_f32
// An f16 result is not the micro-kernel's.
// CHECK-LABEL: func.func @f16_result
// CHECK: linalg.matmul
func.func @f16_weight(%a: memref<2x16x32xf16>, %w: memref<2x32x24xf16> {tfc.role = "weight"}, %c: memref<2x16x24xf32>) {
  linalg.batch_matmul ins(%a, %w : memref<2x16x32xf16>, memref<2x32x24xf16>) outs(%c : memref<2x16x24xf32>)
  return
}
func.func @f32_weight(%a: memref<16x32xf32>, %w: memref<32x24xf32> {tfc.role = "weight"}, %c: memref<16x24xf32>) {
  linalg.matmul ins(%a, %w : memref<16x32xf32>, memref<32x24xf32>) outs(%c : memref<16x24xf32>)
  return
}
func.func @f16_result(%a: memref<16x32xf16>, %w: memref<32x24xf16>, %c: memref<16x24xf16>) {
  linalg.matmul ins(%a, %w : memref<16x32xf16>, memref<32x24xf16>) outs(%c : memref<16x24xf16>)
  return
}
