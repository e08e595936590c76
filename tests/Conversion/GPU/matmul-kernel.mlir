// f16/bf16 matmuls on buffers become one tensor-core GEMM launch each:
// 64x64 tiles of C per block of 4 warps, K in slices of 32 staged through
// 16-byte aligned shared memory (A [64][32], B [32][64], rows padded by 16
// bytes), fragments by ldmatrix.x4 (B's transposed), mma.sync m16n8k16 with
// f32 accumulation, C += A·B kept. f32 matmuls get an FMA GEMM (below);
// odd K or N in f16/bf16 and transposed maps stay loops.
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

// An odd K in f16 (pairs would straddle rows) and a transposed map stay
// loops.
// CHECK-LABEL: func.func @stays_a_loop
// CHECK: linalg.batch_matmul
// CHECK: linalg.matmul
// CHECK-NOT: gpu.launch_func
func.func @stays_a_loop(%x: memref<1x8x7xf16>, %y: memref<1x7x8xf16>, %z: memref<1x8x8xf32>, %a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>) {
  linalg.batch_matmul ins(%x, %y : memref<1x8x7xf16>, memref<1x7x8xf16>) outs(%z : memref<1x8x8xf32>)
  linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%a, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  return
}

// -----

// f32: an FMA GEMM, 64x64 tiles of C per block of 256 threads (grid x =
// ceil(41 / 64), y = ceil(33 / 64)), each thread 4x4 of them; K in slices
// of 16 staged through shared memory, one element at a time where K or N
// is not a multiple of 4 (here 17 and 41); f32 FMA, C += A·B.
// CHECK-LABEL: func.func @fma_f32
// CHECK-DAG: %[[T:.*]] = arith.constant 256 : index
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0 blocks in ({{.*}}) threads in (%[[T]], %{{.*}}, %{{.*}}) args(%{{.*}} : memref<33x17xf32>
// CHECK-DAG: memref.global "private" @matmul_0_tile0 : memref<64x16xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @matmul_0_tile1 : memref<16x64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.func @matmul_0
// CHECK: scf.for
// CHECK: vector.store {{.*}} : memref<64x16xf32, #gpu.address_space<workgroup>>, vector<1xf32>
// CHECK: vector.load {{.*}} : memref<16x64xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: memref.load {{.*}} : memref<64x16xf32, #gpu.address_space<workgroup>>
// CHECK: math.fma
// CHECK: scf.yield
// CHECK: memref.load %{{.*}} : memref<33x41xf32>
// CHECK: arith.addf
// CHECK: memref.store %{{.*}} : memref<33x41xf32>
// CHECK-NOT: nvvm.mma.sync
func.func @fma_f32(%a: memref<33x17xf32>, %b: memref<17x41xf32>, %c: memref<33x41xf32>) {
  linalg.matmul ins(%a, %b : memref<33x17xf32>, memref<17x41xf32>) outs(%c : memref<33x41xf32>)
  return
}

// -----

// With wgmma (sm_90a; K and N multiples of 8): 64 rows of C per warpgroup,
// two warpgroups per block where M exceeds 64 and N reaches 128 (here 65 x
// 200: 128 x 128 tiles, 256 threads; grid x = 3 batches x ceil(200 / 128),
// y = 1), K in slices of 64: A [128][64] and B [64][128] by cp.async
// (zero-filled past K = 72 and N = 200) into three stages of core matrices
// ([chunks][8], 96 KiB of dynamic shared memory), slices 0 and 1 first.
// Per slice: wait for it (the next may be in flight), proxy fence,
// barrier; 4 wgmma m64n128k16 per warpgroup read A (its 64 rows, K-major:
// transpose flag 0) and B (shared by both, N-major: 1) from shared memory
// by descriptor (operands 128, 129 after the 64 accumulators and their
// tied inputs); commit, and wait only for the previous slice's chain, so
// that this one runs through the barrier and the copies of slice + 2 into
// the stage the previous one used. After the loop, wait for the last; C +=
// A·B as before.
// RUN: tfc-opt %s --split-input-file --convert-linalg-matmul-to-nvptx="wgmma=true" | FileCheck %s --check-prefix=WGMMA
// CHECK-LABEL: func.func @wgmma_batch_f16
// WGMMA-LABEL: func.func @wgmma_batch_f16
// WGMMA-DAG: %[[X:.*]] = arith.constant 6 : index
// WGMMA-DAG: %[[T:.*]] = arith.constant 256 : index
// WGMMA-DAG: %[[BYTES:.*]] = arith.constant 98304 : i32
// WGMMA: gpu.launch_func @tfc_matmul::@matmul_0 blocks in (%[[X]], %{{.*}}, %{{.*}}) threads in (%[[T]], %{{.*}}, %{{.*}}) dynamic_shared_memory_size %[[BYTES]] args(%{{.*}} : memref<3x65x72xf16>
// WGMMA: gpu.func @matmul_0
// WGMMA: %[[AS:.*]] = memref.view {{.*}} to memref<3072x8xf16, #gpu.address_space<workgroup>>
// WGMMA: %[[BS:.*]] = memref.view {{.*}} to memref<3072x8xf16, #gpu.address_space<workgroup>>
// WGMMA: nvgpu.device_async_copy {{.*}}, %[[AS]][{{.*}}], 8, {{.*}} : memref<3x65x72xf16> to memref<3072x8xf16
// WGMMA: nvgpu.device_async_copy {{.*}}, %[[BS]][{{.*}}], 8, {{.*}} : memref<3x72x200xf16> to memref<3072x8xf16
// WGMMA: nvgpu.device_async_create_group
// WGMMA: nvgpu.device_async_create_group
// WGMMA: scf.for
// WGMMA-NEXT: nvvm.cp.async.wait.group 1
// WGMMA-NEXT: nvvm.fence.proxy
// WGMMA-NEXT: gpu.barrier
// WGMMA: memref.extract_aligned_pointer_as_index %[[AS]]
// WGMMA: nvvm.wgmma.fence.aligned
// WGMMA-COUNT-4: "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}} $63}, $128, $129, $130, 1, 1, 0, 1;"
// WGMMA-NOT: wgmma.mma_async
// WGMMA: nvvm.wgmma.commit.group.sync.aligned
// WGMMA-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// WGMMA-NEXT: gpu.barrier
// WGMMA: nvgpu.device_async_copy {{.*}}, %[[AS]]
// WGMMA: nvgpu.device_async_create_group
// WGMMA: scf.yield
// WGMMA-NEXT: }
// WGMMA-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA: vector.load %{{.*}} : memref<3x65x200xf32>, vector<2xf32>
// WGMMA-NOT: nvvm.mma.sync
func.func @wgmma_batch_f16(%a: memref<3x65x72xf16>, %b: memref<3x72x200xf16>, %c: memref<3x65x200xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<3x65x72xf16>, memref<3x72x200xf16>) outs(%c : memref<3x65x200xf32>)
  return
}

// -----

// M up to 64: one warpgroup per block (128 threads), and N = 64 narrower
// than 128: tiles of 64 x 64, m64n64k16, 48 KiB of static shared memory.
// CHECK-LABEL: func.func @wgmma_one_warpgroup
// WGMMA-LABEL: func.func @wgmma_one_warpgroup
// WGMMA-DAG: %[[T:.*]] = arith.constant 128 : index
// WGMMA: gpu.launch_func @tfc_matmul::@matmul_0 blocks in ({{.*}}) threads in (%[[T]], %{{.*}}, %{{.*}}) args
// WGMMA-DAG: memref.global "private" @matmul_0_tile0 : memref<1536x8xbf16, #gpu.address_space<workgroup>>
// WGMMA-DAG: memref.global "private" @matmul_0_tile1 : memref<1536x8xbf16, #gpu.address_space<workgroup>>
// WGMMA-COUNT-4: "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, 1, 1, 0, 1;"
func.func @wgmma_one_warpgroup(%a: memref<40x96xbf16>, %b: memref<96x64xbf16>, %c: memref<40x64xbf16>) {
  linalg.matmul ins(%a, %b : memref<40x96xbf16>, memref<96x64xbf16>) outs(%c : memref<40x64xbf16>)
  return
}

// -----

// K or N not a multiple of 8 (no 16-byte chunks): the mma.sync kernel.
// CHECK-LABEL: func.func @wgmma_fallback
// WGMMA-LABEL: func.func @wgmma_fallback
// WGMMA-NOT: wgmma
// WGMMA: nvvm.mma.sync
func.func @wgmma_fallback(%a: memref<64x36xbf16>, %b: memref<36x64xbf16>, %c: memref<64x64xbf16>) {
  linalg.matmul ins(%a, %b : memref<64x36xbf16>, memref<36x64xbf16>) outs(%c : memref<64x64xbf16>)
  return
}
