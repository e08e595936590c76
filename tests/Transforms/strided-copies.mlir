// A copy into or out of a strided view becomes linalg.copy (loops later),
// not memref.copy, which finalize-memref-to-llvm would turn into a call to
// the MLIR runner library's memrefCopy; contiguous copies stay memref.copy
// (a memcpy).
// RUN: tfc-opt %s --tfc-strided-copies-to-linalg | FileCheck %s
// RUN: tfc-opt %s --tfc-strided-copies-to-linalg --convert-linalg-to-loops --finalize-memref-to-llvm="use-generic-functions=true" --convert-to-llvm --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM

// CHECK-LABEL: func.func @concat
func.func @concat(%a: memref<2x3x6xf32>, %b: memref<2x3x6xf32>, %out: memref<2x3x12xf32>) {
  %lo = memref.subview %out[0, 0, 0] [2, 3, 6] [1, 1, 1] : memref<2x3x12xf32> to memref<2x3x6xf32, strided<[36, 12, 1]>>
  %hi = memref.subview %out[0, 0, 6] [2, 3, 6] [1, 1, 1] : memref<2x3x12xf32> to memref<2x3x6xf32, strided<[36, 12, 1], offset: 6>>
  // CHECK: linalg.copy ins(%{{.*}} : memref<2x3x6xf32>) outs(%{{.*}} : memref<2x3x6xf32, strided<[36, 12, 1]>>)
  memref.copy %a, %lo : memref<2x3x6xf32> to memref<2x3x6xf32, strided<[36, 12, 1]>>
  // CHECK: linalg.copy ins(%{{.*}} : memref<2x3x6xf32>) outs(%{{.*}} : memref<2x3x6xf32, strided<[36, 12, 1], offset: 6>>)
  memref.copy %b, %hi : memref<2x3x6xf32> to memref<2x3x6xf32, strided<[36, 12, 1], offset: 6>>
  // CHECK-NOT: memref.copy
  return
}

// CHECK-LABEL: func.func @contiguous
func.func @contiguous(%a: memref<4x8xf32>, %out: memref<8x8xf32>) {
  // A leading-rows view is contiguous: memcpy.
  %top = memref.subview %out[0, 0] [4, 8] [1, 1] : memref<8x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  // CHECK: memref.copy %{{.*}} : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  memref.copy %a, %top : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
  // CHECK-NOT: linalg.copy
  return
}

// LLVM-NOT: memrefCopy
// LLVM: "llvm.intr.memcpy"
// LLVM-NOT: memrefCopy
