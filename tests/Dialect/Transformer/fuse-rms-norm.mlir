// RUN: tfc-opt %s --split-input-file --transformer-fuse-rms-norm="explain-missed=1" -verify-diagnostics | FileCheck %s
// RUN: tfc-opt %s --mlir-print-op-generic 2>/dev/null > %t.ref
// RUN: tfc-opt %s --transformer-fuse --mlir-print-op-generic 2>/dev/null > %t.fused
// RUN: python3 -m tfc_testing.tosa_eval compare %t.ref %t.fused --tol 1e-5 | FileCheck %s --check-prefix=NUMERIC
// NUMERIC: mismatches=0

// LlamaRMSNorm in f32 as tfc-import writes it: gamma first.
// CHECK-LABEL: func.func @rms_norm_llama
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8xf32>, %[[G:.*]]: tensor<8xf32>)
// CHECK: %[[Y:.*]] = transformer.rms_norm %[[X]], %[[G]] {epsilon = 9.99999974E-6 : f32} : tensor<2x3x8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @rms_norm_llama(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv_n = "tosa.const"() <{values = dense<0.125> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-5> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %gs = tosa.const_shape {values = dense<[1, 1, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %sq = tosa.mul %x, %x, %shift : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<1xi8>) -> tensor<2x3x8xf32>
  %s = tosa.reduce_sum %sq {axis = 2 : i32} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %ms = tosa.mul %s, %inv_n, %shift : (tensor<2x3x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x3x1xf32>
  %e = tosa.add %ms, %eps : (tensor<2x3x1xf32>, tensor<1x1x1xf32>) -> tensor<2x3x1xf32>
  %r = tosa.rsqrt %e : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n = tosa.mul %x, %r, %shift : (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<1xi8>) -> tensor<2x3x8xf32>
  %g3 = tosa.reshape %g, %gs : (tensor<8xf32>, !tosa.shape<3>) -> tensor<1x1x8xf32>
  %y = tosa.mul %g3, %n, %shift : (tensor<1x1x8xf32>, tensor<2x3x8xf32>, tensor<1xi8>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// pow(x, 2), 1/N as reciprocal(N), no gamma (ones); epsilon 1e-6 is the
// default and not printed.
// CHECK-LABEL: func.func @rms_norm_pow_no_gamma
// CHECK: %[[ONES:.*]] = "tosa.const"() <{values = dense<1.000000e+00> : tensor<5xf32>}>
// CHECK: transformer.rms_norm %{{.*}}, %[[ONES]] : tensor<4x5xf32>, tensor<5xf32> -> tensor<4x5xf32>
// CHECK-NOT: tosa.rsqrt
func.func @rms_norm_pow_no_gamma(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %two = "tosa.const"() <{values = dense<2.0> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %n = "tosa.const"() <{values = dense<5.0> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-6> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %sq = tosa.pow %x, %two : (tensor<4x5xf32>, tensor<1x1xf32>) -> tensor<4x5xf32>
  %s = tosa.reduce_sum %sq {axis = 1 : i32} : (tensor<4x5xf32>) -> tensor<4x1xf32>
  %inv_n = tosa.reciprocal %n : (tensor<1x1xf32>) -> tensor<1x1xf32>
  %ms = tosa.mul %s, %inv_n, %shift : (tensor<4x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<4x1xf32>
  %e = tosa.add %eps, %ms : (tensor<1x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %r = tosa.rsqrt %e : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %y = tosa.mul %r, %x, %shift : (tensor<4x1xf32>, tensor<4x5xf32>, tensor<1xi8>) -> tensor<4x5xf32>
  return %y : tensor<4x5xf32>
}

// -----

// A mean over the wrong count is not a mean square.
// CHECK-LABEL: func.func @negative_rms_norm_count
// CHECK-NOT: transformer.rms_norm
func.func @negative_rms_norm_count(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv = "tosa.const"() <{values = dense<0.2> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-6> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %sq = tosa.mul %x, %x, %shift : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  %s = tosa.reduce_sum %sq {axis = 1 : i32} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %ms = tosa.mul %s, %inv, %shift : (tensor<3x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<3x1xf32>
  %e = tosa.add %ms, %eps : (tensor<3x1xf32>, tensor<1x1xf32>) -> tensor<3x1xf32>
  // expected-remark @+1 {{rms_norm not fused: mean square sum is scaled by 0.200000, not 1/N = 1/4}}
  %r = tosa.rsqrt %e : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %y = tosa.mul %x, %r, %shift : (tensor<3x4xf32>, tensor<3x1xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// -----

// The rsqrt used twice: fusing would leave the other use without it.
// CHECK-LABEL: func.func @negative_rms_norm_rsqrt_reused
// CHECK-NOT: transformer.rms_norm
func.func @negative_rms_norm_rsqrt_reused(%x: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x1xf32>) {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv = "tosa.const"() <{values = dense<0.25> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-6> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %sq = tosa.mul %x, %x, %shift : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  %s = tosa.reduce_sum %sq {axis = 1 : i32} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %ms = tosa.mul %s, %inv, %shift : (tensor<3x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<3x1xf32>
  %e = tosa.add %ms, %eps : (tensor<3x1xf32>, tensor<1x1xf32>) -> tensor<3x1xf32>
  // expected-remark @+1 {{rms_norm not fused: rsqrt is not applied (alone) to the input}}
  %r = tosa.rsqrt %e : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %y = tosa.mul %x, %r, %shift : (tensor<3x4xf32>, tensor<3x1xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  return %y, %r : tensor<3x4xf32>, tensor<3x1xf32>
}

// -----

// Over the first axis: not the last-axis normalisation the op is.
// CHECK-LABEL: func.func @negative_rms_norm_first_axis
// CHECK-NOT: transformer.rms_norm
func.func @negative_rms_norm_first_axis(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv = "tosa.const"() <{values = dense<0.25> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-6> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %sq = tosa.mul %x, %x, %shift : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<1xi8>) -> tensor<4x3xf32>
  %s = tosa.reduce_sum %sq {axis = 0 : i32} : (tensor<4x3xf32>) -> tensor<1x3xf32>
  %ms = tosa.mul %s, %inv, %shift : (tensor<1x3xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<1x3xf32>
  %e = tosa.add %ms, %eps : (tensor<1x3xf32>, tensor<1x1xf32>) -> tensor<1x3xf32>
  // expected-remark @+1 {{rms_norm not fused: mean square is reduced over axis 0, not the last axis}}
  %r = tosa.rsqrt %e : (tensor<1x3xf32>) -> tensor<1x3xf32>
  %y = tosa.mul %x, %r, %shift : (tensor<4x3xf32>, tensor<1x3xf32>, tensor<1xi8>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}
