// The fused attention becomes one flash-attention kernel per op: K and Vᵀ
// tiles in 16-byte aligned shared memory, S = Q·Kᵀ and O += P·V on tensor
// cores (mma.sync m16n8k16, f32 accumulation) for f16 and bf16, the online
// softmax across the 4 lanes of a quad (shuffle xor 1, 2), one launch of
// 4 warps per (batch x head, 64 queries). f32 runs on FMA.
//
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx | FileCheck %s

// CHECK-LABEL: func.func @causal_gqa_f16
// CHECK: bufferization.to_buffer %{{.*}} read_only : tensor<2x8x100x64xf16>
// CHECK: gpu.launch_func @tfc_fused::@attention_0 blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in
// CHECK: bufferization.to_tensor %{{.*}} restrict writable
// CHECK-NOT: transformer.attention
// CHECK: gpu.module @tfc_fused
// CHECK-DAG: memref.global "private" @attention_0_tile0 : memref<64x72xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-DAG: memref.global "private" @attention_0_tile1 : memref<64x72xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK: gpu.func @attention_0({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// Causal: query blocks in reverse order (the last of the 2 blocks of 64
// rows, which has the most keys to visit, starts first), and the number of
// key tiles depends on the query block.
// CHECK: %[[Y:.*]] = gpu.block_id  y
// CHECK-NEXT: %[[N:.*]] = gpu.grid_dim  y
// CHECK-NEXT: %[[M1:.*]] = arith.constant -1 : index
// CHECK-NEXT: %[[LAST:.*]] = arith.addi %[[N]], %[[M1]] : index
// CHECK-NEXT: arith.subi %[[LAST]], %[[Y]] : index
// The register-staged build does not assume it below Sq (ASYNC below).
// CHECK-NOT: llvm.intr.assume
// CHECK: arith.ceildivui
// The first K/V tile is loaded before the loop (16-byte chunks), each next
// one while the current tile is computed.
// CHECK: vector.load {{.*}}vector<8xf16>
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: vector.store {{.*}}vector<8xf16>
// CHECK: gpu.barrier
// CHECK: vector.load {{.*}}vector<8xf16>
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32)
// CHECK: gpu.shuffle  xor {{.*}}, %{{.*}} : f32
// The exponentials flush subnormals (one MUFU.EX2 each in SASS).
// CHECK-NOT: math.exp2
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK-NOT: math.exp2
// CHECK: nvvm.mma.sync
// CHECK: scf.yield
func.func @causal_gqa_f16(%q: tensor<2x8x100x64xf16>, %k: tensor<2x2x130x64xf16>, %v: tensor<2x2x130x64xf16>) -> tensor<2x8x100x64xf16> {
  %o = transformer.attention %q, %k, %v {is_causal} : tensor<2x8x100x64xf16>, tensor<2x2x130x64xf16>, tensor<2x2x130x64xf16> -> tensor<2x8x100x64xf16>
  return %o : tensor<2x8x100x64xf16>
}

// -----

// bf16 pairs travel as i32 operands; a rank-2 mask becomes rank 4 and is
// read in the kernel; D = 80 is padded to 80 (a multiple of 16), Dv too.
// CHECK-LABEL: func.func @masked_bf16
// CHECK: tosa.reshape
// CHECK: gpu.launch_func @tfc_fused::@attention_0
// CHECK: gpu.func @attention_0(%{{.*}}: memref<1x4x77x80xbf16>, %{{.*}}: memref<1x4x200x80xbf16>, %{{.*}}: memref<1x4x200x80xbf16>, %{{.*}}: memref<1x1x77x200xbf16>, %{{.*}}: memref<1x4x77x80xbf16>)
// CHECK-NOT: arith.ceildivui
// CHECK: scf.for
// CHECK: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}} : (i32, i32, f32)
func.func @masked_bf16(%q: tensor<1x4x77x80xbf16>, %k: tensor<1x4x200x80xbf16>, %v: tensor<1x4x200x80xbf16>, %m: tensor<77x200xbf16>) -> tensor<1x4x77x80xbf16> {
  %o = transformer.attention %q, %k, %v mask %m : tensor<1x4x77x80xbf16>, tensor<1x4x200x80xbf16>, tensor<1x4x200x80xbf16>, tensor<77x200xbf16> -> tensor<1x4x77x80xbf16>
  return %o : tensor<1x4x77x80xbf16>
}

// -----

// f32 keeps f32 accuracy: FMA, no tensor cores, one thread per query row.
// CHECK-LABEL: func.func @plain_f32
// CHECK: gpu.launch_func @tfc_fused::@attention_0
// CHECK: gpu.func @attention_0({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// CHECK-NOT: nvvm.mma.sync
// CHECK: math.fma
// CHECK: gpu.return
func.func @plain_f32(%q: tensor<1x2x33x64xf32>, %k: tensor<1x2x47x64xf32>, %v: tensor<1x2x47x64xf32>) -> tensor<1x2x33x64xf32> {
  %o = transformer.attention %q, %k, %v {scale = 0.5 : f32} : tensor<1x2x33x64xf32>, tensor<1x2x47x64xf32>, tensor<1x2x47x64xf32> -> tensor<1x2x33x64xf32>
  return %o : tensor<1x2x33x64xf32>
}

// -----

// A soft cap (Gemma 2) in the score epilogue of the tensor-core kernel: each
// product times scale / softcap (1/8 / 50), through tanh's rational form
// (clamped, one division), times softcap * log2(e), before the exponentials.
// CHECK-LABEL: func.func @softcap_f16
// CHECK: gpu.func @attention_0
// CHECK: nvvm.mma.sync
// CHECK: arith.constant 2.500000e-03 : f32
// CHECK: arith.constant 7.90531111 : f32
// CHECK: arith.minimumf
// CHECK: arith.maximumf
// CHECK: arith.divf
// CHECK: arith.constant 72.1347503 : f32
// CHECK: arith.mulf
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
func.func @softcap_f16(%q: tensor<1x4x70x64xf16>, %k: tensor<1x2x90x64xf16>, %v: tensor<1x2x90x64xf16>) -> tensor<1x4x70x64xf16> {
  %o = transformer.attention %q, %k, %v {is_causal, softcap = 50.0 : f32} : tensor<1x4x70x64xf16>, tensor<1x2x90x64xf16>, tensor<1x2x90x64xf16> -> tensor<1x4x70x64xf16>
  return %o : tensor<1x4x70x64xf16>
}

// -----

// A sliding window of 50 keys (causal, 200 queries in blocks of 64): the
// block's key tiles start at the tile of its first row's window,
// (qBlock * 64 - 49) / 64 clamped to [0, the causal end], and the loop runs
// over the tiles from there; the tiles that start before the window of the
// warp's last row hide the scores before each row's window (key + 50 >
// row). The f32 kernel's loop starts at its first tile too.
// CHECK-LABEL: func.func @window_f16
// CHECK: gpu.func @attention_0
// CHECK: %[[END:.*]] = arith.ceildivui
// CHECK: %[[C:.*]] = arith.constant -49 : index
// CHECK: %[[S:.*]] = arith.addi %{{.*}}, %[[C]] : index
// CHECK: %[[S0:.*]] = arith.maxsi %[[S]], %{{.*}} : index
// CHECK: %[[T:.*]] = arith.divui %[[S0]], %{{.*}} : index
// CHECK: %[[FIRST:.*]] = arith.minui %[[T]], %[[END]] : index
// CHECK: %[[N:.*]] = arith.subi %[[END]], %[[FIRST]] : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[N]]
// CHECK: nvvm.mma.sync
// CHECK: %[[T50:.*]] = arith.addi %{{.*}}, %c50{{.*}} : index
// CHECK: %[[BEFORE:.*]] = arith.cmpi sle, %[[T50]], %{{.*}} : index
// CHECK: %[[NEEDED:.*]] = arith.ori %{{.*}}, %[[BEFORE]] : i1
// CHECK: scf.if %[[NEEDED]]
// CHECK: %[[K50:.*]] = arith.addi %{{.*}}, %c50{{.*}} : index
// CHECK: arith.cmpi sgt, %[[K50]], %{{.*}} : index
func.func @window_f16(%q: tensor<1x4x200x64xf16>, %k: tensor<1x2x200x64xf16>, %v: tensor<1x2x200x64xf16>) -> tensor<1x4x200x64xf16> {
  %o = transformer.attention %q, %k, %v {is_causal, window = 50 : i64} : tensor<1x4x200x64xf16>, tensor<1x2x200x64xf16>, tensor<1x2x200x64xf16> -> tensor<1x4x200x64xf16>
  return %o : tensor<1x4x200x64xf16>
}

// -----

// CHECK-LABEL: func.func @window_f32
// CHECK: gpu.func @attention_0
// CHECK: arith.maxsi
// CHECK: %[[T32:.*]] = arith.divui
// CHECK: %[[FIRST32:.*]] = arith.minui %[[T32]], %[[SIX:.*]] : index
// CHECK: scf.for %{{.*}} = %[[FIRST32]] to %[[SIX]]
// CHECK: arith.cmpi sgt
func.func @window_f32(%q: tensor<1x2x70x40xf32>, %k: tensor<1x1x90x40xf32>, %v: tensor<1x1x90x40xf32>) -> tensor<1x2x70x40xf32> {
  %o = transformer.attention %q, %k, %v {window = 9 : i64} : tensor<1x2x70x40xf32>, tensor<1x1x90x40xf32>, tensor<1x1x90x40xf32> -> tensor<1x2x70x40xf32>
  return %o : tensor<1x2x70x40xf32>
}

// -----

// Odd head dimensions in f16 are left to the decomposition.
// CHECK-LABEL: func.func @odd_head_dim_f16
// CHECK: transformer.attention
// CHECK-NOT: gpu.launch_func
func.func @odd_head_dim_f16(%q: tensor<1x1x8x7xf16>, %k: tensor<1x1x8x7xf16>, %v: tensor<1x1x8x7xf16>) -> tensor<1x1x8x7xf16> {
  %o = transformer.attention %q, %k, %v : tensor<1x1x8x7xf16>, tensor<1x1x8x7xf16>, tensor<1x1x8x7xf16> -> tensor<1x1x8x7xf16>
  return %o : tensor<1x1x8x7xf16>
}

// -----

// With ldmatrix: K fragments by ldmatrix.x4, V staged row-major (16-byte
// stores) and its fragments loaded transposed; no scalar shared stores.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="ldmatrix=true" | FileCheck %s --check-prefix=LDM
// CHECK-LABEL: func.func @ldmatrix_bf16
// LDM-LABEL: func.func @ldmatrix_bf16
// LDM-DAG: memref.global "private" @attention_0_tile0 : memref<64x72xbf16, #gpu.address_space<workgroup>>
// LDM-DAG: memref.global "private" @attention_0_tile1 : memref<64x136xbf16, #gpu.address_space<workgroup>>
// LDM: scf.for
// LDM-NOT: memref.store
// LDM: vector.store {{.*}} : memref<64x136xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// LDM: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<64x72xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// LDM: nvvm.mma.sync
// LDM: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<64x136xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// LDM: nvvm.mma.sync
func.func @ldmatrix_bf16(%q: tensor<1x2x100x64xbf16>, %k: tensor<1x2x100x64xbf16>, %v: tensor<1x2x100x128xbf16>) -> tensor<1x2x100x128xbf16> {
  %o = transformer.attention %q, %k, %v : tensor<1x2x100x64xbf16>, tensor<1x2x100x64xbf16>, tensor<1x2x100x128xbf16> -> tensor<1x2x100x128xbf16>
  return %o : tensor<1x2x100x128xbf16>
}

// -----

// With async-copy: K and V tiles go from global to shared memory by
// cp.async (16-byte chunks, zero-filled out of range) into two stages of
// 64 keys; tile j + 1 is in flight while tile j is computed, nothing is
// staged in registers, and a barrier ends each tile before its stage is
// refilled. At D = 128 the stages (2 x 2 x 64 x 136 x 2 bytes) exceed the
// 48 KiB of static shared memory: they are views of dynamic shared memory,
// whose size the launch passes.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="async-copy=true" | FileCheck %s --check-prefix=ASYNC
// CHECK-LABEL: func.func @async_f16
// LDM-LABEL: func.func @async_f16
// ASYNC-LABEL: func.func @async_f16
// ASYNC: %[[BYTES:.*]] = arith.constant 69632 : i32
// ASYNC: gpu.launch_func @tfc_fused::@attention_0 {{.*}} dynamic_shared_memory_size %[[BYTES]] args
// ASYNC: gpu.func @attention_0
// ASYNC: %[[DYN:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// ASYNC: memref.view %[[DYN]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128x136xf16, #gpu.address_space<workgroup>>
// ASYNC: memref.view %[[DYN]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128x136xf16, #gpu.address_space<workgroup>>
// Causal query blocks in reverse order, the index assumed below Sq (300),
// as blockIdx.y's range says of it otherwise: LLVM keeps the row and tile
// arithmetic unsigned.
// ASYNC: %[[Y:.*]] = gpu.block_id  y
// ASYNC: %[[QB:.*]] = arith.subi %{{.*}}, %[[Y]] : index
// ASYNC-NEXT: %[[SQ:.*]] = arith.constant 300 : index
// ASYNC-NEXT: %[[BELOW:.*]] = arith.cmpi ult, %[[QB]], %[[SQ]] : index
// ASYNC-NEXT: llvm.intr.assume %[[BELOW]] : i1
// ASYNC: nvgpu.device_async_copy {{.*}}, 8, %{{.*}} {bypassL1} : memref<2x8x300x128xf16> to memref<128x136xf16, #gpu.address_space<workgroup>>
// ASYNC: nvgpu.device_async_create_group
// ASYNC: scf.for
// ASYNC: nvgpu.device_async_copy
// ASYNC: nvgpu.device_async_create_group
// ASYNC: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// ASYNC-NEXT: gpu.barrier
// ASYNC-NOT: vector.store
// ASYNC: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// ASYNC: nvvm.mma.sync
// Causal: only tiles reaching past the warp's first row hide scores (the
// 32 scores of a thread go through one scf.if; other tiles skip it).
// ASYNC: arith.cmpi sgt
// ASYNC: scf.if %{{.*}} -> (f32, f32,
// ASYNC: arith.select
// ASYNC: } else {
// ASYNC-NEXT: scf.yield
// Lazy rescaling: O (64 accumulators per thread at D = 128) is rescaled
// only when some row of the warp has a max beyond 2^8 over its reference.
// ASYNC: arith.cmpf ogt
// ASYNC: %[[GROW:.*]] = nvvm.vote.sync any %{{.*}}, %{{.*}} -> i1
// ASYNC: scf.if %[[GROW]] -> (f32, f32,
// ASYNC: arith.mulf
// ASYNC: } else {
// ASYNC: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// ASYNC: nvvm.mma.sync
// ASYNC: gpu.barrier
// ASYNC-NEXT: scf.yield
func.func @async_f16(%q: tensor<2x8x300x128xf16>, %k: tensor<2x8x300x128xf16>, %v: tensor<2x8x300x128xf16>) -> tensor<2x8x300x128xf16> {
  %o = transformer.attention %q, %k, %v {is_causal} : tensor<2x8x300x128xf16>, tensor<2x8x300x128xf16>, tensor<2x8x300x128xf16> -> tensor<2x8x300x128xf16>
  return %o : tensor<2x8x300x128xf16>
}

// -----

// A head dimension that is not a multiple of 8 elements has no 16-byte
// chunks: async-copy keeps the register-staged tiles.
// CHECK-LABEL: func.func @async_d36_bf16
// LDM-LABEL: func.func @async_d36_bf16
// ASYNC-LABEL: func.func @async_d36_bf16
// ASYNC-NOT: nvgpu.device_async_copy
// ASYNC: scf.for
// ASYNC: vector.store
// ASYNC: nvvm.mma.sync
func.func @async_d36_bf16(%q: tensor<1x2x40x36xbf16>, %k: tensor<1x2x40x36xbf16>, %v: tensor<1x2x40x36xbf16>) -> tensor<1x2x40x36xbf16> {
  %o = transformer.attention %q, %k, %v : tensor<1x2x40x36xbf16>, tensor<1x2x40x36xbf16>, tensor<1x2x40x36xbf16> -> tensor<1x2x40x36xbf16>
  return %o : tensor<1x2x40x36xbf16>
}

// -----

// 32 query rows per warp: blocks of 128 rows (grid y = ceil(300 / 128) = 3),
// and each K fragment (ldmatrix) serves the two 16-row slabs of the warp.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="async-copy=true warp-rows=32" | FileCheck %s --check-prefix=ROWS32
// CHECK-LABEL: func.func @rows32_f16
// LDM-LABEL: func.func @rows32_f16
// ASYNC-LABEL: func.func @rows32_f16
// ROWS32-LABEL: func.func @rows32_f16
// ROWS32: %[[Y:.*]] = arith.constant 3 : index
// ROWS32: gpu.launch_func @tfc_fused::@attention_0 blocks in (%{{.*}}, %[[Y]], %{{.*}}) threads in
// ROWS32: scf.for
// ROWS32: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<128x72xf16
// ROWS32: nvvm.mma.sync A[{{.*}}] B[%[[B0:[0-9]+]], %[[B1:[0-9]+]]]
// ROWS32-NOT: nvgpu.ldmatrix
// ROWS32: nvvm.mma.sync A[{{.*}}] B[%[[B0]], %[[B1]]]
// ROWS32: nvgpu.ldmatrix
func.func @rows32_f16(%q: tensor<1x4x300x64xf16>, %k: tensor<1x4x300x64xf16>, %v: tensor<1x4x300x64xf16>) -> tensor<1x4x300x64xf16> {
  %o = transformer.attention %q, %k, %v : tensor<1x4x300x64xf16>, tensor<1x4x300x64xf16>, tensor<1x4x300x64xf16> -> tensor<1x4x300x64xf16>
  return %o : tensor<1x4x300x64xf16>
}

// -----

// With wgmma (sm_90a): the block's 4 warps are one warpgroup. K and V go by
// cp.async into two stages of 128 keys stored as 8x8 core matrices
// ([chunks][8], 2 x 2 x 128 x 64 x 2 bytes = 64 KiB of dynamic shared
// memory), V one tile behind K. The copied tiles are made visible to
// wgmma's reads (async proxy) by a proxy fence before the barrier. Per
// tile: S = Q·Kᵀ is one chain of 4 wgmma m64n128k16 (Q from registers, K
// by descriptor, K-major: transpose flag 0), the first without
// accumulation, committed; then O += P·V of the previous tile, a chain of 8
// m64n64k16 (P from registers, V N-major: transpose flag 1), committed as
// a second group; waiting for all but one group gives S while P·V still
// runs during the softmax; O is waited for only before its rescale. Empty
// asm statements pin the accumulators after each wait, and P and O before
// the fence. After the loop, the last tile's P·V.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="wgmma=true" | FileCheck %s --check-prefix=WGMMA
// CHECK-LABEL: func.func @wgmma_f16
// WGMMA-LABEL: func.func @wgmma_f16
// WGMMA: %[[BYTES:.*]] = arith.constant 65536 : i32
// WGMMA: gpu.launch_func @tfc_fused::@attention_0 {{.*}} dynamic_shared_memory_size %[[BYTES]] args
// WGMMA: %[[K:.*]] = memref.view {{.*}} to memref<2048x8xf16, #gpu.address_space<workgroup>>
// WGMMA: %[[V:.*]] = memref.view {{.*}} to memref<2048x8xf16, #gpu.address_space<workgroup>>
// WGMMA: nvgpu.device_async_copy {{.*}}, %[[K]][%{{.*}}, %{{.*}}], 8, %{{.*}} {bypassL1} : memref<2x8x300x64xf16> to memref<2048x8xf16
// WGMMA: scf.for
// WGMMA: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// WGMMA-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// WGMMA-NEXT: gpu.barrier
// WGMMA: memref.extract_aligned_pointer_as_index %[[K]]
// WGMMA: llvm.inline_asm has_side_effects "", "=f,
// WGMMA: llvm.inline_asm has_side_effects "", "=r,
// WGMMA: nvvm.wgmma.fence.aligned
// WGMMA: llvm.inline_asm has_side_effects "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, 1, 1, 0;"
// WGMMA-SAME: : (f32, {{.*}}, i64, i1) -> !llvm.struct<(f32,
// WGMMA-COUNT-3: llvm.inline_asm has_side_effects "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, 1, 1, 0;"
// WGMMA-NOT: wgmma.mma_async
// WGMMA: nvvm.wgmma.commit.group.sync.aligned
// WGMMA: memref.extract_aligned_pointer_as_index %[[V]]
// WGMMA-COUNT-8: llvm.inline_asm has_side_effects "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, 1, 1, 1;"
// WGMMA-NOT: wgmma.mma_async
// WGMMA: nvvm.wgmma.commit.group.sync.aligned
// WGMMA-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// WGMMA-NEXT: llvm.inline_asm has_side_effects "", "=f,
// WGMMA-NOT: wgmma.mma_async
// WGMMA: nvvm.vote.sync any
// WGMMA-NOT: wgmma.mma_async
// WGMMA: nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA-NEXT: llvm.inline_asm has_side_effects "", "=f,
// WGMMA-NOT: wgmma.mma_async
// WGMMA: gpu.barrier
// WGMMA-NEXT: scf.yield
// WGMMA: nvvm.cp.async.wait.group 0
// WGMMA-NEXT: nvvm.fence.proxy
// WGMMA-NEXT: gpu.barrier
// WGMMA: nvvm.wgmma.fence.aligned
// WGMMA-COUNT-8: "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, 1, 1, 1;"
// WGMMA-NOT: wgmma.mma_async
// WGMMA: nvvm.wgmma.commit.group.sync.aligned
// WGMMA-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA-NOT: nvvm.mma.sync
func.func @wgmma_f16(%q: tensor<2x8x300x64xf16>, %k: tensor<2x8x300x64xf16>, %v: tensor<2x8x300x64xf16>) -> tensor<2x8x300x64xf16> {
  %o = transformer.attention %q, %k, %v {is_causal} : tensor<2x8x300x64xf16>, tensor<2x8x300x64xf16>, tensor<2x8x300x64xf16> -> tensor<2x8x300x64xf16>
  return %o : tensor<2x8x300x64xf16>
}

// -----

// bf16 at D = 128: two stages of 128 keys would take 128 KiB; 64 keys
// (64 KiB): S by wgmma m64n64k16, O by m64n128k16 (in the loop and after).
// On TMA tiles with two warpgroups (one block per SM), D = 128 takes 128
// keys too: boxes of 64 columns x 128 keys, 129 KiB of stages (+ 32 bytes
// of mbarriers), S and O both by m64n128k16 (8 + 8 in the loop, 8 after).
// The warpgroups take turns issuing their wgmma (ping-pong): warpgroup 1
// (warps 4-7) opens warpgroup 0's first turn (bar.arrive 1); per tile,
// warpgroup w waits for its turn (bar.sync 1 + w) before its fence and
// hands the turn over (bar.arrive 2 - w) once its chains are issued, before
// waiting for S.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="wgmma=true tma=true wgmma-warpgroups=2" | FileCheck %s --check-prefix=TMA2
// CHECK-LABEL: func.func @wgmma_d128_bf16
// WGMMA-LABEL: func.func @wgmma_d128_bf16
// TMA2-LABEL: func.func @wgmma_d128_bf16
// TMA2: call @tfc_gpu_tensor_map(%{{.*}}, %c9_i32, %c128_i64, %c100_i64, %c2_i64, %c256_i64, %c25600_i64, %c64_i32, %c128_i32, %c1_i32, %c3_i32)
// TMA2: %[[BYTES:.*]] = arith.constant 132128 : i32
// TMA2: gpu.launch_func @tfc_fused::@attention_0 {{.*}} threads in (%c256, {{.*}} dynamic_shared_memory_size %[[BYTES]]
// TMA2: %[[SECOND:.*]] = arith.cmpi ult, %c3, %{{.*}} : index
// TMA2-NEXT: scf.if %[[SECOND]] {
// TMA2-NEXT: "bar.arrive 1, 256;"
// TMA2: scf.for
// TMA2: scf.if %[[SECOND]] {
// TMA2-NEXT: "bar.sync 2, 256;"
// TMA2-NEXT: } else {
// TMA2-NEXT: "bar.sync 1, 256;"
// TMA2: nvvm.wgmma.fence.aligned
// TMA2-COUNT-8: "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, 1, 1, 0;"
// TMA2-COUNT-8: "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, 1, 1, 1;"
// TMA2: nvvm.wgmma.commit.group.sync.aligned
// TMA2-NEXT: scf.if %[[SECOND]] {
// TMA2-NEXT: "bar.arrive 1, 256;"
// TMA2-NEXT: } else {
// TMA2-NEXT: "bar.arrive 2, 256;"
// TMA2: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
// TMA2: nvvm.wgmma.wait.group.sync.aligned 1
// TMA2: scf.yield
// TMA2-COUNT-8: "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, 1, 1, 1;"
// TMA2: gpu.return
// With a producer warpgroup (warps 8-11, 384 threads, launch bounds fixed
// by the block size and one block per SM, as setmaxnreg needs): after the
// mbarriers' initialisation and the block's barrier, it returns registers
// (setmaxnreg.dec to 24) and its first thread issues every copy group
// (waiting for the empty barrier first, from group 2 on); the consumer
// warpgroups take them (setmaxnreg.inc to 240) and issue no copy.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="wgmma=true tma=true wgmma-warpgroups=2 tma-producer=true" | FileCheck %s --check-prefix=PROD
// PROD-LABEL: func.func @wgmma_d128_bf16
// PROD: gpu.launch_func @tfc_fused::@attention_0 {{.*}} threads in (%c384,
// PROD: gpu.func @attention_0({{.*}} kernel attributes {known_block_size = array<i32: 384, 1, 1>, nvvm.minctasm = 1 : i32}
// PROD: "mbarrier.init.shared::cta.b64 [$0], 8;"
// PROD: "fence.mbarrier_init.release.cluster;"
// PROD: gpu.barrier
// PROD: %[[PRODUCER:.*]] = arith.cmpi ult, %c255, %[[TID:.*]] : index
// PROD-NEXT: scf.if %[[PRODUCER]] {
// PROD-NEXT: nvvm.setmaxregister decrease 24
// PROD: %[[FIRST:.*]] = arith.cmpi ult, %[[TID]], %c257 : index
// PROD-NEXT: scf.if %[[FIRST]] {
// PROD: scf.for
// PROD: mbarrier.try_wait.parity
// PROD: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
// PROD: cp.async.bulk.tensor.3d
// PROD: } else {
// PROD-NEXT: nvvm.setmaxregister increase 240
// PROD-NOT: expect_tx
// PROD-NOT: cp.async.bulk.tensor
// PROD: "bar.arrive 1, 256;"
// PROD-NOT: expect_tx
// PROD-NOT: cp.async.bulk.tensor
// PROD: "bar.sync 1, 256;"
// PROD-NOT: expect_tx
// PROD-NOT: cp.async.bulk.tensor
// PROD-COUNT-8: "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, 1, 1, 0;"
// PROD-NOT: expect_tx
// PROD-NOT: cp.async.bulk.tensor
// PROD: gpu.return
// WGMMA: %[[BYTES:.*]] = arith.constant 65536 : i32
// WGMMA: to memref<2048x8xbf16, #gpu.address_space<workgroup>>
// WGMMA-COUNT-8: "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, 1, 1, 0;"
// WGMMA-COUNT-4: "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, 1, 1, 1;"
// WGMMA: scf.yield
// WGMMA-COUNT-4: "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, 1, 1, 1;"
func.func @wgmma_d128_bf16(%q: tensor<1x2x100x128xbf16>, %k: tensor<1x2x100x128xbf16>, %v: tensor<1x2x100x128xbf16>) -> tensor<1x2x100x128xbf16> {
  %o = transformer.attention %q, %k, %v : tensor<1x2x100x128xbf16>, tensor<1x2x100x128xbf16>, tensor<1x2x100x128xbf16> -> tensor<1x2x100x128xbf16>
  return %o : tensor<1x2x100x128xbf16>
}

// -----

// Shapes wgmma does not take keep the mma.sync kernels: head dimensions
// that are not multiples of 8 (no 16-byte chunks) or beyond 128.
// CHECK-LABEL: func.func @wgmma_fallback
// WGMMA-LABEL: func.func @wgmma_fallback
// WGMMA-NOT: wgmma
// WGMMA: nvvm.mma.sync
// WGMMA-NOT: wgmma
// WGMMA: nvvm.mma.sync
// WGMMA-NOT: wgmma
func.func @wgmma_fallback(%q: tensor<1x2x40x36xf16>, %k: tensor<1x2x40x36xf16>, %v: tensor<1x2x40x36xf16>, %q2: tensor<1x1x40x160xf16>) -> (tensor<1x2x40x36xf16>, tensor<1x1x40x160xf16>) {
  %o = transformer.attention %q, %k, %v : tensor<1x2x40x36xf16>, tensor<1x2x40x36xf16>, tensor<1x2x40x36xf16> -> tensor<1x2x40x36xf16>
  %o2 = transformer.attention %q2, %q2, %q2 : tensor<1x1x40x160xf16>, tensor<1x1x40x160xf16>, tensor<1x1x40x160xf16> -> tensor<1x1x40x160xf16>
  return %o, %o2 : tensor<1x2x40x36xf16>, tensor<1x1x40x160xf16>
}

// -----

// Two warpgroups per block: 128 query rows (grid y = ceil(300 / 128) = 3,
// 256 threads), each K and V tile copied once (by 256 threads: 4 chunks
// of each tile per thread instead of 8) and read by both warpgroups'
// wgmma.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="wgmma=true wgmma-warpgroups=2" | FileCheck %s --check-prefix=WG2
// CHECK-LABEL: func.func @wgmma_two_warpgroups
// WGMMA-LABEL: func.func @wgmma_two_warpgroups
// WG2-LABEL: func.func @wgmma_two_warpgroups
// WG2-DAG: %[[Y:.*]] = arith.constant 3 : index
// WG2-DAG: %[[T:.*]] = arith.constant 256 : index
// WG2: gpu.launch_func @tfc_fused::@attention_0 blocks in (%{{.*}}, %[[Y]], %{{.*}}) threads in (%[[T]],
// WG2: gpu.func @attention_0({{.*}}known_block_size = array<i32: 256, 1, 1>
// WG2-COUNT-8: nvgpu.device_async_copy {{.*}} : memref<1x4x300x64xf16> to memref<2048x8xf16
// WG2-NOT: nvgpu.device_async_copy
// WG2: nvgpu.device_async_create_group
// WG2: scf.for
// WG2: "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
func.func @wgmma_two_warpgroups(%q: tensor<1x4x300x64xf16>, %k: tensor<1x4x300x64xf16>, %v: tensor<1x4x300x64xf16>) -> tensor<1x4x300x64xf16> {
  %o = transformer.attention %q, %k, %v : tensor<1x4x300x64xf16>, tensor<1x4x300x64xf16>, tensor<1x4x300x64xf16> -> tensor<1x4x300x64xf16>
  return %o : tensor<1x4x300x64xf16>
}

// -----

// wgmma on tiles copied by TMA. The host code asks the runtime for tensor
// maps of K and V ([batch * kv heads = 8][300 keys][64 columns], 128-byte
// rows: strides 128 and 38400 bytes; boxes of 64 columns x 128 keys;
// f16 = 6, 128-byte swizzle = 3) and passes their device addresses after
// the buffers. In the kernel, thread 0 initialises two full mbarriers (one
// arrival per phase) and two empty ones (one per warp) and issues each
// group's copies: K tile g (none from the last tile on) and V tile g - 1,
// with the bytes they bring (32 KiB, or 16 without K), once the warps have
// released the stages (from group 2 on, a wait on an empty barrier); every
// thread waits on the group's full barrier with try_wait in a loop (group
// j at the top of iteration j; group j + 1 is issued once the tile's wgmma
// are, before the wait for S). The descriptors name the 128-byte swizzle
// (bit 62) with 1024 bytes between groups of 8 rows (and, for V, 16 KiB
// between its blocks of 64 columns).
// Each warp releases the tile's stages (lane 0 arrives on the empty
// barrier) once its wgmma that read them are done; no block barrier in the
// loop, and no cp.async.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="wgmma=true tma=true" | FileCheck %s --check-prefix=TMA
// CHECK-LABEL: func.func @tma_gqa
// WGMMA-LABEL: func.func @tma_gqa
// WG2-LABEL: func.func @tma_gqa
// TMA-LABEL: func.func @tma_gqa
// TMA-DAG: %[[F16:.*]] = arith.constant 6 : i32
// TMA-DAG: %[[D:.*]] = arith.constant 64 : i64
// TMA-DAG: %[[S:.*]] = arith.constant 300 : i64
// TMA-DAG: %[[BH:.*]] = arith.constant 8 : i64
// TMA-DAG: %[[ROW:.*]] = arith.constant 128 : i64
// TMA-DAG: %[[HEAD:.*]] = arith.constant 38400 : i64
// TMA-DAG: %[[BOX0:.*]] = arith.constant 64 : i32
// TMA-DAG: %[[BOX1:.*]] = arith.constant 128 : i32
// TMA-DAG: %[[ONE:.*]] = arith.constant 1 : i32
// TMA-DAG: %[[SW:.*]] = arith.constant 3 : i32
// TMA: %[[KMAP:.*]] = call @tfc_gpu_tensor_map(%{{.*}}, %[[F16]], %[[D]], %[[S]], %[[BH]], %[[ROW]], %[[HEAD]], %[[BOX0]], %[[BOX1]], %[[ONE]], %[[SW]]) : (!llvm.ptr, i32, i64, i64, i64, i64, i64, i32, i32, i32, i32) -> !llvm.ptr
// TMA: %[[K:.*]] = llvm.ptrtoint %[[KMAP]] : !llvm.ptr to i64
// TMA: %[[VMAP:.*]] = call @tfc_gpu_tensor_map(
// TMA: %[[V:.*]] = llvm.ptrtoint %[[VMAP]] : !llvm.ptr to i64
// TMA: gpu.launch_func @tfc_fused::@attention_0 {{.*}} args({{.*}} : memref<2x8x300x64xf16>, %[[K]] : i64, %[[V]] : i64)
// TMA: gpu.func @attention_0({{.*}}: i64, %{{.*}}: i64) kernel
// TMA-NOT: nvgpu.device_async_copy
// TMA: "mbarrier.init.shared::cta.b64 [$0], 1;"
// TMA: "mbarrier.init.shared::cta.b64 [$0], 1;"
// TMA: "mbarrier.init.shared::cta.b64 [$0], 4;"
// TMA: "mbarrier.init.shared::cta.b64 [$0], 4;"
// TMA-NEXT: "fence.mbarrier_init.release.cluster;"
// TMA: gpu.barrier
// TMA-DAG: arith.constant 32768 : i32
// TMA-DAG: arith.constant 16384 : i32
// TMA: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
// TMA: scf.if
// TMA: "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $4}], [$5];"
// TMA: scf.for
// TMA: scf.while
// TMA: mbarrier.try_wait.parity.shared::cta.b64
// TMA: arith.constant 4611686293305360384 : i64
// TMA: nvvm.wgmma.fence.aligned
// TMA-COUNT-4: "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, 1, 1, 0;"
// TMA: arith.constant 4611686293372403712 : i64
// TMA-COUNT-8: "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, 1, 1, 1;"
// TMA: nvvm.wgmma.commit.group.sync.aligned
// TMA: arith.cmpi uge, %{{.*}}, %c2
// TMA: scf.while
// TMA: mbarrier.try_wait.parity.shared::cta.b64
// TMA: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
// TMA: "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// TMA: "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// TMA: nvvm.wgmma.wait.group.sync.aligned 1
// TMA-NOT: gpu.barrier
// TMA: nvvm.wgmma.wait.group.sync.aligned 0
// TMA-NOT: gpu.barrier
// TMA: "mbarrier.arrive.shared::cta.b64 _, [$0];"
// TMA-NOT: gpu.barrier
// TMA: scf.while
// TMA: mbarrier.try_wait.parity.shared::cta.b64
// TMA-COUNT-8: "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, 1, 1, 1;"
// TMA-NOT: cp.async
func.func @tma_gqa(%q: tensor<2x8x300x64xf16>, %k: tensor<2x4x300x64xf16>, %v: tensor<2x4x300x64xf16>) -> tensor<2x8x300x64xf16> {
  %o = transformer.attention %q, %k, %v {is_causal} : tensor<2x8x300x64xf16>, tensor<2x4x300x64xf16>, tensor<2x4x300x64xf16> -> tensor<2x8x300x64xf16>
  return %o : tensor<2x8x300x64xf16>
}
