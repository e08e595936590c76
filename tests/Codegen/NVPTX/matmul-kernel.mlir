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

// C made all zeros for the matmul alone (a zero fill, or a copy of a
// zero-filled buffer, with nothing touching C between: ZeroInit.h): the
// fill goes, and the kernel stores its product over C without reading it.
// CHECK-LABEL: func.func @zero_init
// CHECK-NOT: linalg.fill
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0
// CHECK: gpu.func @matmul_0
// CHECK: nvvm.mma.sync
// CHECK-NOT: vector.load %{{.*}} : memref<128x64xf32>
// CHECK-NOT: arith.addf
// CHECK: vector.store %{{.*}} : memref<128x64xf32>, vector<2xf32>
// CHECK: gpu.return
func.func @zero_init(%a: memref<128x96xf16>, %b: memref<96x64xf16>, %c: memref<128x64xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<128x64xf32>)
  linalg.matmul ins(%a, %b : memref<128x96xf16>, memref<96x64xf16>) outs(%c : memref<128x64xf32>)
  return
}

// -----

// The same for the f32 FMA GEMM; a fill of ones stays and is added to.
// CHECK-LABEL: func.func @zero_init_f32
// CHECK: linalg.fill {{.*}} outs(%arg3
// CHECK-NOT: linalg.fill
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0
// CHECK: gpu.launch_func @tfc_matmul::@matmul_1
// CHECK: gpu.func @matmul_0
// CHECK: math.fma
// CHECK: scf.yield
// CHECK-NOT: memref.load %{{.*}} : memref<33x41xf32>
// CHECK: memref.store %{{.*}} : memref<33x41xf32>
// CHECK: gpu.func @matmul_1
// CHECK: scf.yield
// CHECK: memref.load %{{.*}} : memref<33x41xf32>
// CHECK: arith.addf
// CHECK: memref.store %{{.*}} : memref<33x41xf32>
func.func @zero_init_f32(%a: memref<33x17xf32>, %b: memref<17x41xf32>, %c: memref<33x41xf32>, %d: memref<33x41xf32>) {
  %z = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%d : memref<33x41xf32>)
  linalg.fill ins(%z : f32) outs(%c : memref<33x41xf32>)
  linalg.matmul ins(%a, %b : memref<33x17xf32>, memref<17x41xf32>) outs(%c : memref<33x41xf32>)
  linalg.matmul ins(%a, %b : memref<33x17xf32>, memref<17x41xf32>) outs(%d : memref<33x41xf32>)
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
// is not a multiple of 4 (here 17 and 41); A read 4 k of a row at a time
// (16-byte loads), B 4 columns of a row; f32 FMA, C += A·B.
// CHECK-LABEL: func.func @fma_f32
// CHECK-DAG: %[[T:.*]] = arith.constant 256 : index
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0 blocks in ({{.*}}) threads in (%[[T]], %{{.*}}, %{{.*}}) args(%{{.*}} : memref<33x17xf32>
// CHECK-DAG: memref.global "private" @matmul_0_tile0 : memref<64x16xf32, #gpu.address_space<workgroup>>
// CHECK-DAG: memref.global "private" @matmul_0_tile1 : memref<16x64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.func @matmul_0
// CHECK: scf.for
// CHECK: vector.store {{.*}} : memref<64x16xf32, #gpu.address_space<workgroup>>, vector<1xf32>
// CHECK-COUNT-4: vector.load {{.*}} : memref<64x16xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: vector.load {{.*}} : memref<16x64xf32, #gpu.address_space<workgroup>>, vector<4xf32>
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

// Where N is a multiple of 4, a thread's 4 columns of a row of C go as one
// 16-byte load and store (16 threads: 256 contiguous bytes).
// CHECK-LABEL: func.func @fma_f32_vector_c
// CHECK: gpu.func @matmul_0
// CHECK: scf.yield
// CHECK: vector.load %{{.*}} : memref<33x44xf32>, vector<4xf32>
// CHECK: arith.addf {{.*}} : vector<4xf32>
// CHECK: vector.store %{{.*}} : memref<33x44xf32>, vector<4xf32>
// CHECK-NOT: memref.store %{{.*}} : memref<33x44xf32>
func.func @fma_f32_vector_c(%a: memref<33x17xf32>, %b: memref<17x44xf32>, %c: memref<33x44xf32>) {
  linalg.matmul ins(%a, %b : memref<33x17xf32>, memref<17x44xf32>) outs(%c : memref<33x44xf32>)
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
// With tma, the host code first asks the runtime for the tensor maps (f16:
// data type 6; 128-byte swizzle: 3) of A viewed {K, M, batch} = {72, 65,
// 3}, strides {144, 9360} bytes, boxes of 64 k x the block's 128 rows; and
// of B viewed {N, K, batch} = {200, 72, 3}, strides {400, 28800}, boxes of
// 64 columns x 64 k. Their device addresses follow the buffers. Two slices:
// both issued before the loop, none in it.
// TMA-LABEL: func.func @wgmma_batch_f16
// TMA: %[[MA:.*]] = call @tfc_gpu_tensor_map(%{{.*}}, %c6_i32, %c72_i64, %c65_i64, %c3_i64, %c144_i64, %c9360_i64, %c64_i32, %c128_i32, %c1_i32, %c3_i32)
// TMA: %[[A:.*]] = llvm.ptrtoint %[[MA]] : !llvm.ptr to i64
// TMA: %[[MB:.*]] = call @tfc_gpu_tensor_map(%{{.*}}, %c6_i32, %c200_i64, %c72_i64, %c3_i64, %c400_i64, %c28800_i64, %c64_i32, %c64_i32, %c1_i32, %c3_i32)
// TMA: %[[B:.*]] = llvm.ptrtoint %[[MB]] : !llvm.ptr to i64
// TMA: gpu.launch_func @tfc_matmul::@matmul_0 {{.*}} args(%{{.*}} : memref<3x65x72xf16>, %{{.*}} : memref<3x72x200xf16>, %{{.*}} : memref<3x65x200xf32>, %[[A]] : i64, %[[B]] : i64)
// TMA: gpu.func @matmul_0({{.*}}, %{{.*}}: i64, %{{.*}}: i64)
// TMA-COUNT-2: mbarrier.arrive.expect_tx
// TMA-NOT: mbarrier.arrive.expect_tx
// TMA: scf.for
// TMA-NOT: mbarrier.arrive
// TMA: scf.yield
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
// With tma: boxes of A are the block's 64 rows x 64 k; one 64-column block
// of B; stages of 16 KiB (3 x 16 KiB + 1024 + 48 bytes, dynamic); empty
// barriers count the 4 warps.
// TMA-LABEL: func.func @wgmma_one_warpgroup
// TMA: call @tfc_gpu_tensor_map(%{{.*}}, %c9_i32, %c96_i64, %c40_i64, %c1_i64, %c192_i64, %c7680_i64, %c64_i32, %c64_i32, %c1_i32, %c3_i32)
// TMA: call @tfc_gpu_tensor_map(%{{.*}}, %c9_i32, %c64_i64, %c96_i64, %c1_i64, %c128_i64, %c12288_i64, %c64_i32, %c64_i32, %c1_i32, %c3_i32)
// TMA: gpu.launch_func {{.*}} threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c50224_i32
// TMA: "mbarrier.init.shared::cta.b64 [$0], 4;"
// TMA: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}" %{{.*}}, %c16384_i32
// TMA-COUNT-4: "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, 1, 1, 0, 1;"
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
// TMA-LABEL: func.func @wgmma_fallback
// TMA-NOT: tfc_gpu_tensor_map
// TMA: nvvm.mma.sync
func.func @wgmma_fallback(%a: memref<64x36xbf16>, %b: memref<36x64xbf16>, %c: memref<64x64xbf16>) {
  linalg.matmul ins(%a, %b : memref<64x36xbf16>, memref<36x64xbf16>) outs(%c : memref<64x64xbf16>)
  return
}

// -----

// With tma (tfc-compile --gpu-tma): thread 0 copies each slice by TMA into
// three stages of 32 KiB, 1024-byte aligned in the dynamic shared memory
// (48 bytes of barriers, 3 x 32 KiB + 1024 to align: 99376 bytes): A's
// box of 128 rows x 64 k (bf16: data type 9; 128-byte rows, swizzled),
// then B's two boxes of 64 k x 64 columns (8 KiB each; columns 136..191 of
// the second column block are zero fill). Each stage has a full mbarrier
// (one arrival, thread 0's, with 32768 bytes expected) and an empty one (8
// arrivals: one per warp). K = 320: 5 slices, 0-2 issued before the loop.
// Per slice every thread waits on the full barrier (phase (sl / 3) % 2),
// then wgmma reads the stage through 128-byte swizzled descriptors (bit
// 62): A K-major, SBO 1024 (LBO 16, unused), the warpgroup's 64 rows 8192
// bytes apart, +32 bytes (2 in the descriptor) per k16; B N-major, LBO
// 8192 between the 64-column blocks, SBO 1024, +2048 (128) per k16:
//   A: 1 << 62 | (1024 >> 4) << 32 | (16 >> 4) << 16 = 4611686293305360384
//   B: 1 << 62 | (1024 >> 4) << 32 | (8192 >> 4) << 16 = 4611686293338849280
// After wait_group 1 the previous slice's stage is free in this warp: for
// slices 1..2 (slice + 2 < 5), lane 0 of each warp arrives on its empty
// barrier, and thread 0 waits for that (phase ((sl - 1) / 3) % 2) before
// it issues slice sl + 2 into it. No cp.async.
// RUN: tfc-opt %s --split-input-file --convert-linalg-matmul-to-nvptx="wgmma=true tma=true" -canonicalize | FileCheck %s --check-prefix=TMA
// CHECK-LABEL: func.func @tma_deep_k
// TMA-LABEL: func.func @tma_deep_k
// TMA: call @tfc_gpu_tensor_map(%{{.*}}, %c9_i32, %c320_i64, %c130_i64, %c1_i64, %c640_i64, %c83200_i64, %c64_i32, %c128_i32, %c1_i32, %c3_i32)
// TMA: call @tfc_gpu_tensor_map(%{{.*}}, %c9_i32, %c136_i64, %c320_i64, %c1_i64, %c272_i64, %c87040_i64, %c64_i32, %c64_i32, %c1_i32, %c3_i32)
// TMA: gpu.launch_func @tfc_matmul::@matmul_0 blocks in (%c2, %c2, %c1) threads in (%c256, %c1, %c1) dynamic_shared_memory_size %c99376_i32 args({{.*}}, %{{.*}} : i64, %{{.*}} : i64)
// TMA: gpu.func @matmul_0(%{{.*}}: memref<130x320xbf16>, %{{.*}}: memref<320x136xbf16>, %{{.*}}: memref<130x136xf32>, %[[MA:.*]]: i64, %[[MB:.*]]: i64)
// TMA-DAG: %[[DA:.*]] = arith.constant 4611686293305360384 : i64
// TMA-DAG: %[[DB:.*]] = arith.constant 4611686293338849280 : i64
// TMA: memref.view {{.*}} to memref<1x6xi64, #gpu.address_space<workgroup>>
// TMA: memref.view {{.*}} to memref<1x99328xi8, #gpu.address_space<workgroup>>
// TMA: %[[T0:.*]] = arith.cmpi ult, %thread_id_x, %c1 : index
// TMA: arith.andi %{{.*}}, %c-1024_i32 : i32
// TMA: scf.if %[[T0]] {
// TMA: "mbarrier.init.shared::cta.b64 [$0], 1;"
// TMA: "mbarrier.init.shared::cta.b64 [$0], 8;"
// TMA: "mbarrier.init.shared::cta.b64 [$0], 1;"
// TMA: "mbarrier.init.shared::cta.b64 [$0], 8;"
// TMA: "mbarrier.init.shared::cta.b64 [$0], 1;"
// TMA: "mbarrier.init.shared::cta.b64 [$0], 8;"
// TMA-NEXT: fence.mbarrier_init.release.cluster
// TMA-NEXT: {{^ *}}}{{$}}
// TMA-NEXT: gpu.barrier
// TMA-NEXT: scf.if %[[T0]] {
// TMA: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}" %{{.*}}, %c32768_i32
// TMA: "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $4}], [$5];", "r,l,r,r,r,r,~{memory}" %{{.*}}, %[[MA]],
// TMA: cp.async.bulk.tensor.3d{{.*}} %{{.*}}, %[[MB]],
// TMA: cp.async.bulk.tensor.3d{{.*}} %{{.*}}, %[[MB]],
// TMA: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}" %{{.*}}, %c32768_i32
// TMA: "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $4}], [$5];", "r,l,r,r,r,r,~{memory}" %{{.*}}, %[[MA]],
// TMA: cp.async.bulk.tensor.3d{{.*}} %{{.*}}, %[[MB]],
// TMA: cp.async.bulk.tensor.3d{{.*}} %{{.*}}, %[[MB]],
// TMA: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}" %{{.*}}, %c32768_i32
// TMA: "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $4}], [$5];", "r,l,r,r,r,r,~{memory}" %{{.*}}, %[[MA]],
// TMA: cp.async.bulk.tensor.3d{{.*}} %{{.*}}, %[[MB]],
// TMA: cp.async.bulk.tensor.3d{{.*}} %{{.*}}, %[[MB]],
// TMA: scf.for %[[SL:.*]] = %c0 to %c5 step %c1
// TMA: %[[Q:.*]] = arith.divui %[[SL]], %c3 : index
// TMA: %[[P:.*]] = arith.remui %[[Q]], %c2 : index
// TMA: %[[PI:.*]] = arith.index_cast %[[P]] : index to i32
// TMA: scf.while
// TMA: mbarrier.try_wait.parity.shared::cta.b64 {{.*}}, %[[PI]] :
// TMA: %[[A0:.*]] = arith.ori %{{.*}}, %[[DA]] : i64
// TMA: %[[B0:.*]] = arith.ori %{{.*}}, %[[DB]] : i64
// TMA: nvvm.wgmma.fence.aligned
// TMA: "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}} $63}, $128, $129, $130, 1, 1, 0, 1;"{{.*}} %[[A0]], %[[B0]],
// TMA: arith.addi %[[A0]], %c2_i64 : i64
// TMA: arith.addi %[[B0]], %c128_i64 : i64
// TMA: wgmma.mma_async
// TMA: arith.addi %[[A0]], %c4_i64 : i64
// TMA: arith.addi %[[B0]], %c256_i64 : i64
// TMA: wgmma.mma_async
// TMA: arith.addi %[[A0]], %c6_i64 : i64
// TMA: arith.addi %[[B0]], %c384_i64 : i64
// TMA: wgmma.mma_async
// TMA-NOT: wgmma.mma_async
// TMA: nvvm.wgmma.commit.group.sync.aligned
// TMA-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// TMA: %[[PREV:.*]] = arith.addi %[[SL]], %c-1 : index
// TMA: %[[REFILL:.*]] = arith.cmpi ult, %[[PREV]], %c2 : index
// TMA: scf.if %[[REFILL]] {
// TMA: scf.if
// TMA-NOT: {{^ *}}}{{$}}
// TMA: "mbarrier.arrive.shared::cta.b64 _, [$0];"
// TMA-NEXT: {{^ *}}}{{$}}
// TMA-NEXT: scf.if %[[T0]] {
// TMA: arith.divui %{{.*}}, %c3 : index
// TMA: scf.while
// TMA: mbarrier.try_wait.parity
// TMA: mbarrier.arrive.expect_tx{{.*}}%c32768_i32
// TMA-COUNT-3: cp.async.bulk.tensor.3d
// TMA: scf.yield
// TMA-NEXT: {{^ *}}}{{$}}
// TMA-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// TMA: vector.load %{{.*}} : memref<130x136xf32>, vector<2xf32>
// RUN: tfc-opt %s --split-input-file --convert-linalg-matmul-to-nvptx="wgmma=true tma=true" | FileCheck %s --check-prefix=TMA-NO-CP
// TMA-NO-CP-LABEL: func.func @tma_deep_k
// TMA-NO-CP-NOT: nvgpu.device_async
// TMA-NO-CP-NOT: nvvm.cp.async
// TMA-NO-CP-NOT: nvvm.mma.sync
// TMA-NO-CP: gpu.return
func.func @tma_deep_k(%a: memref<130x320xbf16>, %b: memref<320x136xbf16>, %c: memref<130x136xf32>) {
  linalg.matmul ins(%a, %b : memref<130x320xbf16>, memref<320x136xbf16>) outs(%c : memref<130x136xf32>)
  return
}

// -----

// A weight stored [N, K] and transposed just before its matmul (as an
// imported model's projections): the mma.sync kernel reads it as it is
// stored, its tile [64 of N][32 of K] with ldmatrix without .trans, and the
// transpose and its buffer go.
// CHECK-LABEL: func.func @weight_transposed
// CHECK-NOT: linalg.transpose
// CHECK-NOT: memref.alloc() {{.*}} : memref<1x96x40xf16>
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0 {{.*}} args(%{{.*}} : memref<1x33x96xf16>, %{{.*}} : memref<1x40x96xf16>, %{{.*}} : memref<1x33x40xf32>)
// CHECK: memref.global "private" @matmul_0_tile1 : memref<64x40xf16, #gpu.address_space<workgroup>>
// CHECK: gpu.func @matmul_0
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x40xf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x40xf16, #gpu.address_space<workgroup>>
// CHECK-NOT: transpose = true
// CHECK: nvvm.mma.sync
// The wgmma kernel takes it the same way: tiles of B [40 of N][64 of K] in
// core matrices as A's (3 stages: 960 x 8), read K-major (transpose flag
// 0) through the same descriptor layout as A (LBO 128, SBO 1024).
// WGMMA-LABEL: func.func @weight_transposed
// WGMMA-NOT: linalg.transpose
// WGMMA: gpu.launch_func @tfc_matmul::@matmul_0 {{.*}} args(%{{.*}} : memref<1x33x96xf16>, %{{.*}} : memref<1x40x96xf16>, %{{.*}} : memref<1x33x40xf32>)
// WGMMA: memref.global "private" @matmul_0_tile1 : memref<960x8xf16, #gpu.address_space<workgroup>>
// WGMMA: nvgpu.device_async_copy {{.*}} : memref<1x40x96xf16> to memref<960x8xf16
// WGMMA-COUNT-4: "wgmma.mma_async.sync.aligned.m64n40k16.f32.f16.f16 {{.*}}, 1, 1, 0, 0;"
// WGMMA-NOT: wgmma.mma_async
// WGMMA: nvvm.wgmma.commit.group.sync.aligned
// With tma: B's tensor map over the weight as stored, {K, N, batch} =
// {96, 40, 1}, boxes of 64 k x the block's 40 columns of C; a stage is A's
// 64 rows then B's 40 (13312 bytes, one box each), both read through the
// K-major swizzled descriptor (SBO 1024), +32 bytes (2) per k16.
// TMA-LABEL: func.func @weight_transposed
// TMA-NOT: linalg.transpose
// TMA: call @tfc_gpu_tensor_map(%{{.*}}, %c6_i32, %c96_i64, %c33_i64, %c1_i64, %c192_i64, %c6336_i64, %c64_i32, %c64_i32, %c1_i32, %c3_i32)
// TMA: call @tfc_gpu_tensor_map(%{{.*}}, %c6_i32, %c96_i64, %c40_i64, %c1_i64, %c192_i64, %c7680_i64, %c64_i32, %c40_i32, %c1_i32, %c3_i32)
// TMA: gpu.func @matmul_0
// TMA-DAG: %[[D:.*]] = arith.constant 4611686293305360384 : i64
// TMA: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}" %{{.*}}, %c13312_i32
// TMA-COUNT-2: cp.async.bulk.tensor.3d
// TMA-NOT: cp.async.bulk.tensor.3d
// TMA: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}" %{{.*}}, %c13312_i32
// TMA: %[[A0:.*]] = arith.ori %{{.*}}, %[[D]] : i64
// TMA: %[[B0:.*]] = arith.ori %{{.*}}, %[[D]] : i64
// TMA: "wgmma.mma_async.sync.aligned.m64n40k16.f32.f16.f16 {{.*}}, 1, 1, 0, 0;"{{.*}} %[[A0]], %[[B0]],
// TMA: arith.addi %[[A0]], %c2_i64 : i64
// TMA: arith.addi %[[B0]], %c2_i64 : i64
func.func @weight_transposed(%a: memref<1x33x96xf16>, %w: memref<40x96xf16>, %c: memref<1x33x40xf32>) {
  %e = memref.expand_shape %w [[0, 1], [2]] output_shape [1, 40, 96] : memref<40x96xf16> into memref<1x40x96xf16>
  %t = memref.alloc() : memref<1x96x40xf16>
  linalg.transpose ins(%e : memref<1x40x96xf16>) outs(%t : memref<1x96x40xf16>) permutation = [0, 2, 1]
  linalg.batch_matmul ins(%a, %t : memref<1x33x96xf16>, memref<1x96x40xf16>) outs(%c : memref<1x33x40xf32>)
  memref.dealloc %t : memref<1x96x40xf16>
  return
}

// -----

// The transposed copy stays where something else reads it: a second
// matmul, or a write to the weight between the transpose and the matmul.
// CHECK-LABEL: func.func @transpose_read_twice
// CHECK: linalg.transpose
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0 {{.*}} args(%{{.*}} : memref<1x33x96xf16>, %{{.*}} : memref<1x96x40xf16>
// CHECK: gpu.launch_func @tfc_matmul::@matmul_1 {{.*}} args(%{{.*}} : memref<1x33x96xf16>, %{{.*}} : memref<1x96x40xf16>
// CHECK-LABEL: func.func @weight_written_between
// CHECK: linalg.transpose
// CHECK: linalg.fill
// CHECK: gpu.launch_func @tfc_matmul::@matmul_2 {{.*}} args(%{{.*}} : memref<1x33x96xf16>, %{{.*}} : memref<1x96x40xf16>
// WGMMA-LABEL: func.func @transpose_read_twice
// WGMMA: linalg.transpose
// WGMMA: gpu.launch_func @tfc_matmul::@matmul_0 {{.*}} args(%{{.*}} : memref<1x33x96xf16>, %{{.*}} : memref<1x96x40xf16>
// WGMMA: "wgmma.mma_async.sync.aligned.m64n40k16.f32.f16.f16 {{.*}}, 1, 1, 0, 1;"
func.func @transpose_read_twice(%a: memref<1x33x96xf16>, %w: memref<1x40x96xf16>, %c: memref<1x33x40xf32>, %d: memref<1x33x40xf32>) {
  %t = memref.alloc() : memref<1x96x40xf16>
  linalg.transpose ins(%w : memref<1x40x96xf16>) outs(%t : memref<1x96x40xf16>) permutation = [0, 2, 1]
  linalg.batch_matmul ins(%a, %t : memref<1x33x96xf16>, memref<1x96x40xf16>) outs(%c : memref<1x33x40xf32>)
  linalg.batch_matmul ins(%a, %t : memref<1x33x96xf16>, memref<1x96x40xf16>) outs(%d : memref<1x33x40xf32>)
  return
}
func.func @weight_written_between(%a: memref<1x33x96xf16>, %w: memref<1x40x96xf16>, %c: memref<1x33x40xf32>) {
  %z = arith.constant 0.0 : f16
  %t = memref.alloc() : memref<1x96x40xf16>
  linalg.transpose ins(%w : memref<1x40x96xf16>) outs(%t : memref<1x96x40xf16>) permutation = [0, 2, 1]
  linalg.fill ins(%z : f16) outs(%w : memref<1x40x96xf16>)
  linalg.batch_matmul ins(%a, %t : memref<1x33x96xf16>, memref<1x96x40xf16>) outs(%c : memref<1x33x40xf32>)
  return
}

// -----

// The same in f32: the FMA kernel reads the weight as it is stored, a
// [64 of N][16 of K] tile of it stored transposed into its [16][64] tile
// from paired rows: the second chunk of each pair (k rows 4..7 of 8) at
// columns n ^ 16, which the reads of those rows take too.
// CHECK-LABEL: func.func @weight_transposed_f32
// CHECK-NOT: linalg.transpose
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0 {{.*}} args(%{{.*}} : memref<33x96xf32>, %{{.*}} : memref<40x96xf32>, %{{.*}} : memref<33x40xf32>)
// CHECK: gpu.func @matmul_0
// CHECK: %[[SWZ:.*]] = arith.xori %[[COL:.*]], %c16
// CHECK: vector.load %{{.*}} : memref<40x96xf32>, vector<4xf32>
// CHECK: arith.xori %{{.*}}, %c16
// CHECK: memref.store %{{.*}} : memref<16x64xf32, #gpu.address_space<workgroup>>
// CHECK: vector.load %{{.*}}[%c0{{.*}}, %[[COL]]] {{.*}} : memref<16x64xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: vector.load %{{.*}}[%c4{{.*}}, %[[SWZ]]] {{.*}} : memref<16x64xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: math.fma
func.func @weight_transposed_f32(%a: memref<33x96xf32>, %w: memref<40x96xf32>, %c: memref<33x40xf32>) {
  %t = memref.alloc() : memref<96x40xf32>
  linalg.transpose ins(%w : memref<40x96xf32>) outs(%t : memref<96x40xf32>) permutation = [1, 0]
  linalg.matmul ins(%a, %t : memref<33x96xf32>, memref<96x40xf32>) outs(%c : memref<33x40xf32>)
  memref.dealloc %t : memref<96x40xf32>
  return
}

// -----

// Few rows of A (a decode step's projections): the GEMV kernels. A weight
// [N, K] in f16/bf16 goes on tensor cores as Cᵀ = B·Aᵀ: blocks of 16
// columns of C (40 -> 3), 8 warps splitting K in 32-k blocks, each lane
// loading 16-byte chunks of B's rows g and g + 8 and of A's row g, two
// mma.sync per 32 k; the warps add up through a [8 warps x 8 rows][16 (+
// 4)] f32 tile. K = 96 is one step: no loop. With wgmma requested, the
// same kernel.
// CHECK-LABEL: func.func @gemv_weight
// CHECK-NOT: linalg.transpose
// CHECK-DAG: %[[X:.*]] = arith.constant 3 : index
// CHECK-DAG: %[[T:.*]] = arith.constant 256 : index
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0 blocks in (%[[X]], %{{.*}}, %{{.*}}) threads in (%[[T]], %{{.*}}, %{{.*}}) args(%{{.*}} : memref<1x2x96xf16>, %{{.*}} : memref<1x40x96xf16>, %{{.*}} : memref<1x2x40xf32>)
// CHECK: memref.global "private" @matmul_0_tile0 : memref<64x20xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.func @matmul_0
// CHECK-COUNT-2: vector.load %{{.*}} : memref<1x40x96xf16>, vector<8xf16>
// CHECK: vector.load %{{.*}} : memref<1x2x96xf16>, vector<8xf16>
// CHECK-NOT: scf.for
// CHECK-COUNT-2: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK-COUNT-4: memref.store %{{.*}} : memref<64x20xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}} : memref<1x2x40xf32>
// CHECK: gpu.return
// WGMMA-LABEL: func.func @gemv_weight
// WGMMA-NOT: wgmma
// WGMMA: nvvm.mma.sync
func.func @gemv_weight(%a: memref<1x2x96xf16>, %w: memref<40x96xf16>, %c: memref<1x2x40xf32>) {
  %e = memref.expand_shape %w [[0, 1], [2]] output_shape [1, 40, 96] : memref<40x96xf16> into memref<1x40x96xf16>
  %t = memref.alloc() : memref<1x96x40xf16>
  linalg.transpose ins(%e : memref<1x40x96xf16>) outs(%t : memref<1x96x40xf16>) permutation = [0, 2, 1]
  linalg.batch_matmul ins(%a, %t : memref<1x2x96xf16>, memref<1x96x40xf16>) outs(%c : memref<1x2x40xf32>)
  memref.dealloc %t : memref<1x96x40xf16>
  return
}

// -----

// K = 4096: 4 blocks of 32 k per warp and step (1024 k), 4 steps. The
// first step's 12 chunks are loaded before the loop, each of its 3 trips
// loads the next step's (carried with the 4 accumulators) before its 8
// mma.sync, and the last step's 8 follow the loop.
// Up to 32 rows of A go the same way, in groups of 8 (the B operand of an
// mma each): 20 rows are 3 groups, 5 chunks per 32-k block, so 2 blocks
// per warp and step (at most 12 chunks); 3 x 2 mma.sync per block.
// CHECK-LABEL: func.func @gemv_weight_deep_k
// CHECK: gpu.func @matmul_0
// CHECK-COUNT-8: vector.load %{{.*}} : memref<24x4096xbf16>, vector<8xbf16>
// CHECK: scf.for %{{.*}} = %{{.*}} to %c3{{.*}} -> (f32, f32, f32, f32, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>, vector<8xbf16>) {
// CHECK-COUNT-8: vector.load %{{.*}} : memref<24x4096xbf16>, vector<8xbf16>
// CHECK-COUNT-8: nvvm.mma.sync
// CHECK: scf.yield
// CHECK-COUNT-8: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: memref.store %{{.*}} : memref<3x24xbf16>
func.func @gemv_weight_deep_k(%a: memref<3x4096xbf16>, %w: memref<24x4096xbf16>, %c: memref<3x24xbf16>) {
  %t = memref.alloc() : memref<4096x24xbf16>
  linalg.transpose ins(%w : memref<24x4096xbf16>) outs(%t : memref<4096x24xbf16>) permutation = [1, 0]
  linalg.matmul ins(%a, %t : memref<3x4096xbf16>, memref<4096x24xbf16>) outs(%c : memref<3x24xbf16>)
  return
}

// -----

// B as [K, N] (not a transposed weight): CUDA cores. Blocks of 2 chunks of
// 8 columns (40 -> 3) and 128 threads, thread t on chunk t % 2 of rows t /
// 2, + 64, ..., 4 rows per step (600 -> 3 steps), 8 f32 FMA per row; the
// 16 row groups of a warp add by shuffles (xor 2 to 16), the 4 warps
// through a [4][16] tile.
// CHECK-LABEL: func.func @gemv_kn
// CHECK-DAG: %[[X:.*]] = arith.constant 3 : index
// CHECK-DAG: %[[T:.*]] = arith.constant 128 : index
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0 blocks in (%[[X]], %{{.*}}, %{{.*}}) threads in (%[[T]], %{{.*}}, %{{.*}})
// CHECK: memref.global "private" @matmul_0_tile0 : memref<4x16xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.func @matmul_0
// CHECK: scf.for %{{.*}} = %{{.*}} to %c3
// CHECK-COUNT-4: vector.load %{{.*}} : memref<600x40xf16>, vector<8xf16>
// CHECK: scf.yield
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK: gpu.barrier
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.return
func.func @gemv_kn(%a: memref<1x600xf16>, %b: memref<600x40xf16>, %c: memref<1x40xf32>) {
  linalg.matmul ins(%a, %b : memref<1x600xf16>, memref<600x40xf16>) outs(%c : memref<1x40xf32>)
  return
}

// -----

// f32, a weight [N, K]: each warp takes 4 rows of it, its lanes 16-byte
// chunks along K, then a butterfly (xor 1 to 16) per column of C.
// CHECK-LABEL: func.func @gemv_weight_f32
// CHECK-NOT: linalg.transpose
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0 {{.*}} args(%{{.*}} : memref<5x96xf32>, %{{.*}} : memref<40x96xf32>, %{{.*}} : memref<5x40xf32>)
// CHECK: gpu.func @matmul_0
// CHECK: scf.for
// CHECK-COUNT-4: vector.load %{{.*}} : memref<40x96xf32>, vector<4xf32>
// CHECK: math.fma
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
func.func @gemv_weight_f32(%a: memref<5x96xf32>, %w: memref<40x96xf32>, %c: memref<5x40xf32>) {
  %t = memref.alloc() : memref<96x40xf32>
  linalg.transpose ins(%w : memref<40x96xf32>) outs(%t : memref<96x40xf32>) permutation = [1, 0]
  linalg.matmul ins(%a, %t : memref<5x96xf32>, memref<96x40xf32>) outs(%c : memref<5x40xf32>)
  memref.dealloc %t : memref<96x40xf32>
  return
}

// -----

// CHECK-LABEL: func.func @gemv_weight_20_rows
// CHECK: gpu.launch_func @tfc_matmul::@matmul_0 {{.*}} threads in (%c256
// CHECK: memref.global "private" @matmul_0_tile0 : memref<192x20xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.func @matmul_0
// CHECK: scf.for %{{.*}} = %{{.*}} to %c3{{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, vector<8xf16>, vector<8xf16>, vector<8xf16>, vector<8xf16>, vector<8xf16>, vector<8xf16>, vector<8xf16>, vector<8xf16>, vector<8xf16>, vector<8xf16>) {
// CHECK-COUNT-12: nvvm.mma.sync
// CHECK: scf.yield
// CHECK-COUNT-12: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.return
func.func @gemv_weight_20_rows(%a: memref<20x2048xf16>, %w: memref<48x2048xf16>, %c: memref<20x48xf16>) {
  %t = memref.alloc() : memref<2048x48xf16>
  linalg.transpose ins(%w : memref<48x2048xf16>) outs(%t : memref<2048x48xf16>) permutation = [1, 0]
  linalg.matmul ins(%a, %t : memref<20x2048xf16>, memref<2048x48xf16>) outs(%c : memref<20x48xf16>)
  return
}
