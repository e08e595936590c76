// f16/bf16 matmuls on buffers become one tensor-core GEMM launch each:
// 64x64 tiles of C per block of 4 warps, K in slices of 32 staged through
// 16-byte aligned shared memory (A [64][32], B [32][64], rows padded by 16
// bytes), fragments by ldmatrix.x4 (B's transposed), mma.sync m16n8k16 with
// f32 accumulation, C += A·B kept. f32 and transposed-map matmuls stay
// loops.
//
// RUN: tfc-opt %s --split-input-file --convert-linalg-matmul-to-nvptx | FileCheck %s

// CHECK-LABEL: func.func @batch_f16_acc_f32
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0 blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}}) args(%{{.*}} : memref<3x65x48xf16>, %{{.*}} : memref<3x48x40xf16>, %{{.*}} : memref<3x65x40xf32>)
// CHECK-NOT: linalg.batch_matmul
// CHECK: gpu.module @tfc_matmul
// CHECK-DAG: memref.global "private" @matmul_0_tile0 : memref<64x40xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-DAG: memref.global "private" @matmul_0_tile1 : memref<32x72xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK: gpu.func @matmul_0
// CHECK: gpu.block_id  x
// CHECK: arith.divui
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: vector.store {{.*}} : memref<64x40xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK-NOT: memref.store
// CHECK: vector.store {{.*}} : memref<32x72xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: gpu.barrier
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x40xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<32x72xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32)
// CHECK: scf.yield
// C += A·B: the old C is read before the store.
// CHECK: vector.load %{{.*}} : memref<3x65x40xf32>, vector<2xf32>
// CHECK: arith.addf
// CHECK: vector.store %{{.*}} : memref<3x65x40xf32>, vector<2xf32>
func.func @batch_f16_acc_f32(%a: memref<3x65x48xf16>, %b: memref<3x48x40xf16>, %c: memref<3x65x40xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<3x65x48xf16>, memref<3x48x40xf16>) outs(%c : memref<3x65x40xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @plain_bf16
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0
// CHECK: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}} : (i32, i32, f32)
// CHECK: vector.store %{{.*}} : memref<128x256xbf16>, vector<2xbf16>
func.func @plain_bf16(%a: memref<128x96xbf16>, %b: memref<96x256xbf16>, %c: memref<128x256xbf16>) {
  linalg.matmul ins(%a, %b : memref<128x96xbf16>, memref<96x256xbf16>) outs(%c : memref<128x256xbf16>)
  return
}

// -----

// CHECK-LABEL: func.func @stays_a_loop
// CHECK: linalg.matmul
// CHECK: linalg.batch_matmul
// CHECK-NOT: gpu.launch_func
func.func @stays_a_loop(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>, %x: memref<1x8x7xf16>, %y: memref<1x7x8xf16>, %z: memref<1x8x8xf32>) {
  linalg.matmul ins(%a, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  linalg.batch_matmul ins(%x, %y : memref<1x8x7xf16>, memref<1x7x8xf16>) outs(%z : memref<1x8x8xf32>)
  return
}
