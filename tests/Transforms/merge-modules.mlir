// RUN: tfc-opt %s --tfc-gpu-merge-modules | FileCheck %s
//
// One gpu.module per model; kernels that are the same but for their names
// (and their tiles' names) are kept once, with their tiles, and every
// launch goes to the one kept.

// CHECK: gpu.module @tfc_kernels
// CHECK-NEXT: memref.global "private" @a_tile0
// CHECK-NEXT: gpu.func @a(
// CHECK: memref.get_global @a_tile0
// CHECK-NOT: @b_tile0
// CHECK-NOT: gpu.func @b(
// CHECK: gpu.func @c(
// CHECK: gpu.thread_id y
// CHECK: func.func @main
// CHECK-NEXT: arith.constant
// CHECK-NEXT: gpu.launch_func @tfc_kernels::@a
// CHECK-NEXT: gpu.launch_func @tfc_kernels::@a
// CHECK-NEXT: gpu.launch_func @tfc_kernels::@c
module attributes {gpu.container_module} {
  gpu.module @m0 {
    memref.global "private" @a_tile0 : memref<4xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
    gpu.func @a(%x: memref<4xf32>) kernel {
      %t = memref.get_global @a_tile0 : memref<4xf32, #gpu.address_space<workgroup>>
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<4xf32>
      memref.store %v, %t[%i] : memref<4xf32, #gpu.address_space<workgroup>>
      gpu.return
    }
  }
  gpu.module @m1 {
    memref.global "private" @b_tile0 : memref<4xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
    gpu.func @b(%x: memref<4xf32>) kernel {
      %t = memref.get_global @b_tile0 : memref<4xf32, #gpu.address_space<workgroup>>
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<4xf32>
      memref.store %v, %t[%i] : memref<4xf32, #gpu.address_space<workgroup>>
      gpu.return
    }
  }
  gpu.module @m2 {
    gpu.func @c(%x: memref<4xf32>) kernel {
      %i = gpu.thread_id y
      %v = memref.load %x[%i] : memref<4xf32>
      memref.store %v, %x[%i] : memref<4xf32>
      gpu.return
    }
  }
  func.func @main(%x: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @m0::@a blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    gpu.launch_func @m1::@b blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    gpu.launch_func @m2::@c blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    return
  }
}
