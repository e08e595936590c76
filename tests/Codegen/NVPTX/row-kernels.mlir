// Softmax over the last dimension, layer_norm and rms_norm become one kernel
// each: a
// warp per row, lanes striding the row (contiguous warp accesses), f32
// statistics combined by a butterfly of shuffles over the 32 lanes, the
// result written in a second sweep. Inputs are viewed as [rows, n].
//
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-nvptx | FileCheck %s

// CHECK-LABEL: func.func @softmax_f16
// CHECK: tosa.reshape %{{.*}} : (tensor<2x3x50xf16>, !tosa.shape<2>) -> tensor<6x50xf16>
// CHECK: gpu.launch_func @tfc_fused::@softmax_0 blocks in (%[[G:.*]], %{{.*}}, %{{.*}}) threads in (%[[T:.*]], %{{.*}}, %{{.*}}) args(%{{.*}} : memref<6x50xf16>, %{{.*}} : memref<6x50xf16>)
// CHECK: tosa.reshape %{{.*}} -> tensor<2x3x50xf16>
// CHECK: gpu.func @softmax_0({{.*}}) kernel attributes {known_block_size = array<i32: 128, 1, 1>}
// Running max and rescaled sum per lane, in the log2 domain:
// CHECK: scf.for
// CHECK: arith.maxnumf
// CHECK: math.exp2
// CHECK: scf.yield
// Across the warp: offsets 1, 2, 4, 8, 16.
// CHECK: gpu.shuffle  xor %{{.*}}, %c16_i32
// CHECK: scf.for
// CHECK: memref.store %{{.*}} : memref<6x50xf16>
func.func @softmax_f16(%x: tensor<2x3x50xf16>) -> tensor<2x3x50xf16> {
  %y = transformer.softmax %x {dimension = 2 : i64} : tensor<2x3x50xf16> -> tensor<2x3x50xf16>
  return %y : tensor<2x3x50xf16>
}

// -----

// CHECK-LABEL: func.func @layer_norm_f32
// CHECK: gpu.launch_func @tfc_fused::@layer_norm_0 {{.*}} args(%{{.*}} : memref<17x96xf32>, %{{.*}} : memref<96xf32>, %{{.*}} : memref<96xf32>, %{{.*}} : memref<17x96xf32>)
// CHECK: gpu.func @layer_norm_0
// CHECK: scf.for
// CHECK: math.fma
// CHECK: gpu.shuffle  xor
// CHECK: math.rsqrt
// CHECK: scf.for
// CHECK: memref.store
func.func @layer_norm_f32(%x: tensor<17x96xf32>, %g: tensor<96xf32>, %b: tensor<96xf32>) -> tensor<17x96xf32> {
  %y = transformer.layer_norm %x, %g, %b {epsilon = 1.0e-5 : f32} : tensor<17x96xf32>, tensor<96xf32>, tensor<96xf32> -> tensor<17x96xf32>
  return %y : tensor<17x96xf32>
}

// -----

// rms_norm in bf16: the sum of squares per lane, shuffled, rsqrt; the
// normalised value is rounded to bf16 and widened again before gamma.
// CHECK-LABEL: func.func @rms_norm_bf16
// CHECK: gpu.launch_func @tfc_fused::@rms_norm_0 {{.*}} args(%{{.*}} : memref<6x130xbf16>, %{{.*}} : memref<130xbf16>, %{{.*}} : memref<6x130xbf16>)
// CHECK: gpu.func @rms_norm_0
// CHECK: scf.for
// CHECK: math.fma
// CHECK: gpu.shuffle  xor
// CHECK: math.rsqrt
// CHECK: scf.for
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: arith.extf %{{.*}} : bf16 to f32
// CHECK: memref.load %{{.*}} : memref<130xbf16>
// CHECK: memref.store %{{.*}} : memref<6x130xbf16>
func.func @rms_norm_bf16(%x: tensor<2x3x130xbf16>, %g: tensor<130xbf16>) -> tensor<2x3x130xbf16> {
  %y = transformer.rms_norm %x, %g {epsilon = 1.0e-5 : f32} : tensor<2x3x130xbf16>, tensor<130xbf16> -> tensor<2x3x130xbf16>
  return %y : tensor<2x3x130xbf16>
}

// -----

// A softmax over an inner dimension is left to the decomposition.
// CHECK-LABEL: func.func @inner_softmax
// CHECK: transformer.softmax
// CHECK-NOT: gpu.launch_func
func.func @inner_softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = transformer.softmax %x {dimension = 0 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
