// Few query rows per KV head (decode) take the split-KV decode kernel: a
// block of 4 warps per (batch x KV head, chunk of keys) holding every query
// row of the KV head's query heads, K and V tiles of 32 keys by cp.async in
// two stages, scores summed over a key's 4 lanes (shuffle xor 1, 2), the
// max over a warp's 8 keys (xor 4, 8, 16), probabilities broadcast by
// shuffle idx; several chunks write partial outputs that the last block of
// each (batch x KV head) to arrive combines (an atomic counter per (batch x
// KV head), a module global): one launch. Without decode-kernel, the tiled
// kernels.
//
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx | FileCheck %s
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="decode-kernel=false" | FileCheck %s --check-prefix=TILED
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="decode-mma=true" | FileCheck %s --check-prefix=MMA

// 16 query heads on 2 KV heads, one query: 8 rows per block; 35 key tiles in
// 7 chunks of 5 (the grid's y), 2 x 2 x 7 = 28 blocks; the chunks' outputs
// [7, B*Hq*Sq, Dv] and statistics [7, 32, 2] in device buffers, and the
// output, in the one launch.
// CHECK-LABEL: func.func @decode_gqa_f16
// CHECK: %[[PART:.*]] = memref.alloc() {alignment = 64 : i64} : memref<7x32x128xf32>
// CHECK: %[[STATS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<7x32x2xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x16x1x128xf16>
// CHECK: %[[BYTES:.*]] = arith.constant 41216 : i32
// CHECK-NEXT: %[[X:.*]] = arith.constant 4 : index
// CHECK-NEXT: %[[Y:.*]] = arith.constant 7 : index
// CHECK-NEXT: %[[Z:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[T:.*]] = arith.constant 128 : index
// CHECK: gpu.launch_func @tfc_fused::@attention_decode_0 blocks in (%[[X]], %[[Y]], %[[Z]]) threads in (%[[T]], %{{.*}}, %{{.*}}) dynamic_shared_memory_size %[[BYTES]] args({{.*}}, %[[PART]] : memref<7x32x128xf32>, %[[STATS]] : memref<7x32x2xf32>, %[[OUT]] : memref<2x16x1x128xf16>)
// CHECK-NOT: gpu.launch_func
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable
// CHECK-NOT: transformer.attention
// CHECK: memref.global "private" @attention_decode_0_arrivals : memref<4xi32, #gpu.address_space<global>> = dense<0>
// Q (f32, 8 rows), two stages of K (rows of 160: 8 keys x 4 chunks of 16
// bytes in different banks) and of V, the warps' statistics.
// CHECK: gpu.func @attention_decode_0({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// CHECK: memref.view {{.*}} to memref<8x128xf32, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<64x160xf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<64x128xf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<8x8xf32, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_copy {{.*}}, 8, {{.*}} {bypassL1}
// CHECK: nvgpu.device_async_create_group
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_create_group
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: vector.load {{.*}} : memref<64x160xf16, #gpu.address_space<workgroup>>, vector<8xf16>
// CHECK: vector.load {{.*}} : memref<8x128xf32, #gpu.address_space<workgroup>>, vector<8xf32>
// CHECK: math.fma
// CHECK: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c4_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c8_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK-NOT: math.exp2
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: gpu.shuffle  idx %{{.*}}, %c0_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK: vector.load {{.*}} : memref<64x128xf16, #gpu.address_space<workgroup>>, vector<2xf16>
// CHECK: scf.yield
// After the loop the warps' output rows take the V stages' place.
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: gpu.barrier
// CHECK: memref.view %{{.*}}[%c24576{{.*}}][] : {{.*}} to memref<32x128xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// The arrival: the block's stores done (a barrier), thread 0 fences them
// (membar.gl, cumulative) and adds one to the (batch x KV head)'s counter;
// the last block (a flag in shared memory after the chunks' weights) sets
// the counter back to 0, fences again and combines
// each of its 8 rows: each thread reads one chunk's statistics (7 chunks,
// 128 threads), the block's max and sum go through shared memory (the
// warps' values [2][4]), the chunks' weights into [1][7 + flag]; then one
// step of 7 independent loads per column (its outputs and weights), 7 FMAs.
// CHECK: memref.get_global @attention_decode_0_arrivals : memref<4xi32, #gpu.address_space<global>>
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK-NEXT: nvvm.memory.barrier <gpu>
// CHECK: memref.atomic_rmw addi %{{.*}}, %{{.*}}[%{{.*}}] : (i32, memref<4xi32, #gpu.address_space<global>>) -> i32
// CHECK: arith.cmpi eq, %{{.*}}, %c6_i32
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %c7{{.*}}] : memref<1x8xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store %c0_i32{{.*}} : memref<4xi32, #gpu.address_space<global>>
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK-NEXT: nvvm.memory.barrier <gpu>
// CHECK: memref.load %{{.*}} : memref<7x32x2xf32>
// CHECK: gpu.shuffle  xor
// CHECK: gpu.barrier
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: memref.store %{{.*}} : memref<1x8xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c7{{.*}} step %c7{{.*}} iter_args
// CHECK-COUNT-7: memref.load %{{.*}} : memref<7x32x128xf32>
// CHECK-COUNT-7: math.fma
// CHECK: scf.yield
// CHECK-NOT: mma
// With decode-mma, f16/bf16 heads of multiples of 16 columns run on tensor
// cores: tiles of 64 keys (16 per warp) in rows of D + 8 elements, no Q tile
// (Q is read as mma A fragments); 18 tiles in 9 chunks of 2 (at least 128
// keys each). S = Q·Kᵀ by ldmatrix and mma.sync m16n8k16, the row max over
// the row's 4 lanes (xor 1, 2), P·V with V loaded transposed.
// MMA-LABEL: func.func @decode_gqa_f16
// MMA: memref.alloc() {alignment = 64 : i64} : memref<9x32x128xf32>
// MMA: gpu.func @attention_decode_0(
// MMA: memref.view {{.*}} to memref<1x4xf32, #gpu.address_space<workgroup>>
// MMA: memref.view {{.*}} to memref<128x136xf16, #gpu.address_space<workgroup>>
// MMA: memref.view {{.*}} to memref<128x136xf16, #gpu.address_space<workgroup>>
// MMA: scf.for
// MMA: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// MMA: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>
// MMA: gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// MMA: gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}}, %c32_i32{{.*}} : f32
// MMA: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// MMA: nvvm.mma.sync
// MMA: scf.yield
// MMA: memref.atomic_rmw addi
// TILED-LABEL: func.func @decode_gqa_f16
// TILED: gpu.launch_func @tfc_fused::@attention_0
// TILED-NOT: attention_decode
func.func @decode_gqa_f16(%q: tensor<2x16x1x128xf16>, %k: tensor<2x2x1100x128xf16>, %v: tensor<2x2x1100x128xf16>) -> tensor<2x16x1x128xf16> {
  %o = transformer.attention %q, %k, %v : tensor<2x16x1x128xf16>, tensor<2x2x1100x128xf16>, tensor<2x2x1100x128xf16> -> tensor<2x16x1x128xf16>
  return %o : tensor<2x16x1x128xf16>
}

// -----

// 2 causal rows with a mask, f32, 70 keys in 3 tiles: one chunk, so the
// block writes the output itself: no scratch buffers, no counters.
// CHECK-LABEL: func.func @decode_one_chunk_f32
// CHECK: gpu.launch_func @tfc_fused::@attention_decode_0 blocks in
// CHECK-NOT: memref.alloc() {{.*}}xf32>
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: _arrivals
// CHECK: gpu.func @attention_decode_0(%{{.*}}: memref<1x2x2x40xf32>, %{{.*}}: memref<1x1x70x40xf32>, %{{.*}}: memref<1x1x70x40xf32>, %{{.*}}: memref<1x1x1x70xf32>, %{{.*}}: memref<1x2x2x40xf32>)
// CHECK-NOT: memref.atomic_rmw
// TILED-LABEL: func.func @decode_one_chunk_f32
// f32 keeps the CUDA cores under decode-mma.
// MMA-LABEL: func.func @decode_one_chunk_f32
// MMA: gpu.launch_func @tfc_fused::@attention_decode_0
// MMA-NOT: nvvm.mma.sync
// MMA: gpu.func @attention_decode_0(
// MMA-NOT: nvvm.mma.sync
// MMA: gpu.return
// TILED: gpu.launch_func @tfc_fused::@attention_0
func.func @decode_one_chunk_f32(%q: tensor<1x2x2x40xf32>, %k: tensor<1x1x70x40xf32>, %v: tensor<1x1x70x40xf32>, %m: tensor<1x1x1x70xf32>) -> tensor<1x2x2x40xf32> {
  %o = transformer.attention %q, %k, %v mask %m {is_causal} : tensor<1x2x2x40xf32>, tensor<1x1x70x40xf32>, tensor<1x1x70x40xf32>, tensor<1x1x1x70xf32> -> tensor<1x2x2x40xf32>
  return %o : tensor<1x2x2x40xf32>
}

// -----

// A soft cap of 4 with scale 0.5: Q pre-scaled by scale / softcap = 0.125,
// each score (summed over its lanes) through tanh, times softcap * log2(e);
// the same in the tiled f32 kernel.
// CHECK-LABEL: func.func @decode_softcap_f32
// CHECK: gpu.func @attention_decode_0
// CHECK: arith.constant 1.250000e-01 : f32
// CHECK: gpu.shuffle
// CHECK: arith.divf
// CHECK: arith.constant 5.770780e+00 : f32
// TILED-LABEL: func.func @decode_softcap_f32
// TILED: gpu.func @attention_0
// TILED: arith.constant 1.250000e-01 : f32
// TILED: scf.for
// TILED: arith.divf
// TILED: arith.constant 5.770780e+00 : f32
func.func @decode_softcap_f32(%q: tensor<1x2x1x40xf32>, %k: tensor<1x1x70x40xf32>, %v: tensor<1x1x70x40xf32>) -> tensor<1x2x1x40xf32> {
  %o = transformer.attention %q, %k, %v {scale = 0.5 : f32, softcap = 4.0 : f32} : tensor<1x2x1x40xf32>, tensor<1x1x70x40xf32>, tensor<1x1x70x40xf32> -> tensor<1x2x1x40xf32>
  return %o : tensor<1x2x1x40xf32>
}

// -----

// A window of 100 over 700 keys: the keys from 600 on, tiles 18 to 21 (of
// 32 keys) in one chunk, each key hidden unless key > 699 - 100 = 599.
// CHECK-LABEL: func.func @decode_window_f16
// CHECK: gpu.launch_func @tfc_fused::@attention_decode_0 blocks in (%c1, %c1{{.*}}, %c1{{.*}})
// CHECK: gpu.func @attention_decode_0
// CHECK: %[[C18:.*]] = arith.constant 18 : index
// CHECK: arith.addi %{{.*}}, %[[C18]] : index
// CHECK: %[[L:.*]] = arith.constant 599 : index
// CHECK: arith.cmpi sgt, %{{.*}}, %[[L]] : index
func.func @decode_window_f16(%q: tensor<1x2x1x40xf16>, %k: tensor<1x1x700x40xf16>, %v: tensor<1x1x700x40xf16>) -> tensor<1x2x1x40xf16> {
  %o = transformer.attention %q, %k, %v {is_causal, window = 100 : i64} : tensor<1x2x1x40xf16>, tensor<1x1x700x40xf16>, tensor<1x1x700x40xf16> -> tensor<1x2x1x40xf16>
  return %o : tensor<1x2x1x40xf16>
}

// -----

// 16 query rows per KV head (16 heads on one) are too many: the tiled
// kernel. So are odd head dimensions in f16 (cp.async copies 4 bytes or
// more): the decomposition.
// CHECK-LABEL: func.func @too_many_rows
// CHECK: gpu.launch_func @tfc_fused::@attention_0
// CHECK-NOT: attention_decode
// CHECK: transformer.attention
// CHECK-NOT: gpu.launch_func
func.func @too_many_rows(%q: tensor<1x16x1x64xf16>, %k: tensor<1x1x500x64xf16>, %v: tensor<1x1x500x64xf16>, %q2: tensor<1x1x1x81xf16>, %k2: tensor<1x1x500x81xf16>) -> (tensor<1x16x1x64xf16>, tensor<1x1x1x81xf16>) {
  %o = transformer.attention %q, %k, %v : tensor<1x16x1x64xf16>, tensor<1x1x500x64xf16>, tensor<1x1x500x64xf16> -> tensor<1x16x1x64xf16>
  %o2 = transformer.attention %q2, %k2, %k2 : tensor<1x1x1x81xf16>, tensor<1x1x500x81xf16>, tensor<1x1x500x81xf16> -> tensor<1x1x1x81xf16>
  return %o, %o2 : tensor<1x16x1x64xf16>, tensor<1x1x1x81xf16>
}

// -----

// Keys and values concatenated from a cache (1000 keys) and new ones (3): the
// decode kernel reads both parts where they are, each copy from its part
// (rows below 1000 from the first, the others at row - 1000 of the
// second); nothing but the kernel reads the concatenations, which are
// left dead. The tiled kernels read the concatenation.
// CHECK-LABEL: func.func @decode_two_parts
// CHECK-SAME: (%[[Q:.*]]: tensor<1x8x1x64xf16>, %[[K0:.*]]: tensor<1x2x1000x64xf16>, %[[K1:.*]]: tensor<1x2x3x64xf16>, %[[V0:.*]]: tensor<1x2x1000x64xf16>, %[[V1:.*]]: tensor<1x2x3x64xf16>)
// CHECK-DAG: %[[BK0:.*]] = bufferization.to_buffer %[[K0]] read_only
// CHECK-DAG: %[[BK1:.*]] = bufferization.to_buffer %[[K1]] read_only
// CHECK-DAG: %[[BV0:.*]] = bufferization.to_buffer %[[V0]] read_only
// CHECK-DAG: %[[BV1:.*]] = bufferization.to_buffer %[[V1]] read_only
// CHECK: gpu.launch_func @tfc_fused::@attention_decode_0 {{.*}} args(%{{.*}} : memref<1x8x1x64xf16>, %[[BK0]] : memref<1x2x1000x64xf16>, %[[BK1]] : memref<1x2x3x64xf16>, %[[BV0]] : memref<1x2x1000x64xf16>, %[[BV1]] : memref<1x2x3x64xf16>, %{{.*}} : memref<8x8x64xf32>, %{{.*}} : memref<8x8x2xf32>, %{{.*}} : memref<1x8x1x64xf16>)
// CHECK: gpu.func @attention_decode_0(%{{.*}}: memref<1x8x1x64xf16>, %[[GK0:.*]]: memref<1x2x1000x64xf16>, %[[GK1:.*]]: memref<1x2x3x64xf16>, %[[GV0:.*]]: memref<1x2x1000x64xf16>, %[[GV1:.*]]: memref<1x2x3x64xf16>, %{{.*}}: memref<8x8x64xf32>, %{{.*}}: memref<8x8x2xf32>, %{{.*}}: memref<1x8x1x64xf16>)
// CHECK: %[[FIRST:.*]] = arith.cmpi ult, %{{.*}}, %c1000{{.*}} : index
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK: nvgpu.device_async_copy %[[GK0]]
// CHECK: } else {
// CHECK: %[[ROW:.*]] = arith.subi %{{.*}}, %c1000{{.*}} : index
// CHECK: nvgpu.device_async_copy %[[GK1]]
// CHECK: nvgpu.device_async_copy %[[GV0]]
// CHECK: nvgpu.device_async_copy %[[GV1]]
// TILED-LABEL: func.func @decode_two_parts
// TILED: gpu.launch_func @tfc_fused::@attention_0 {{.*}} args(%{{.*}} : memref<1x8x1x64xf16>, %{{.*}} : memref<1x2x1003x64xf16>, %{{.*}} : memref<1x2x1003x64xf16>,
func.func @decode_two_parts(%q: tensor<1x8x1x64xf16>, %k0: tensor<1x2x1000x64xf16>, %k1: tensor<1x2x3x64xf16>, %v0: tensor<1x2x1000x64xf16>, %v1: tensor<1x2x3x64xf16>) -> tensor<1x8x1x64xf16> {
  %k = tosa.concat %k0, %k1 {axis = 2 : i32} : (tensor<1x2x1000x64xf16>, tensor<1x2x3x64xf16>) -> tensor<1x2x1003x64xf16>
  %v = tosa.concat %v0, %v1 {axis = 2 : i32} : (tensor<1x2x1000x64xf16>, tensor<1x2x3x64xf16>) -> tensor<1x2x1003x64xf16>
  %o = transformer.attention %q, %k, %v {is_causal} : tensor<1x8x1x64xf16>, tensor<1x2x1003x64xf16>, tensor<1x2x1003x64xf16> -> tensor<1x8x1x64xf16>
  return %o : tensor<1x8x1x64xf16>
}

// -----

// The split aims at decode-blocks-per-sm blocks per SM (132 SMs), chunks of
// at least 4 tiles: 8 KV heads x 128 tiles of 32 keys make 32 chunks of 4 by
// default (4 per SM: 66 wanted per KV head), 16 chunks of 8 at 1 per SM (17
// wanted). decode-stages=3 copies into three stages, two tiles in flight.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx="decode-blocks-per-sm=1 decode-stages=3" | FileCheck %s --check-prefix=TUNED
// CHECK-LABEL: func.func @decode_long_f16
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<32x8x64xf32>
// TUNED-LABEL: func.func @decode_long_f16
// TUNED: memref.alloc() {alignment = 64 : i64} : memref<16x8x64xf32>
// TUNED: gpu.func @attention_decode_0
// TUNED: memref.view {{.*}} to memref<96x{{[0-9]+}}xf16, #gpu.address_space<workgroup>>
// TUNED: memref.view {{.*}} to memref<96x64xf16, #gpu.address_space<workgroup>>
// TUNED: nvgpu.device_async_create_group
// TUNED: nvgpu.device_async_create_group
// TUNED: scf.for
// TUNED: gpu.barrier
// TUNED: nvgpu.device_async_create_group
// TUNED-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 2 : i32}
// TUNED-NEXT: gpu.barrier
func.func @decode_long_f16(%q: tensor<1x8x1x64xf16>, %k: tensor<1x8x4096x64xf16>, %v: tensor<1x8x4096x64xf16>) -> tensor<1x8x1x64xf16> {
  %o = transformer.attention %q, %k, %v : tensor<1x8x1x64xf16>, tensor<1x8x4096x64xf16>, tensor<1x8x4096x64xf16> -> tensor<1x8x1x64xf16>
  return %o : tensor<1x8x1x64xf16>
}
