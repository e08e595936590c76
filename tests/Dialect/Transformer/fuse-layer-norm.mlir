// RUN: tfc-opt %s --split-input-file --transformer-fuse-layer-norm="explain-missed=1" -verify-diagnostics | FileCheck %s
// RUN: tfc-opt %s --mlir-print-op-generic 2>/dev/null > %t.ref
// RUN: tfc-opt %s --transformer-fuse --mlir-print-op-generic 2>/dev/null > %t.fused
// RUN: python3 -m tfc_testing.tosa_eval compare %t.ref %t.fused --tol 1e-5 | FileCheck %s --check-prefix=NUMERIC
// NUMERIC: mismatches=0

// The usual export (epsilon 1e-5 is the default, so not printed): mean as sum * (1/N), variance of c * c, gamma and beta
// reshaped from [N] to [1, 1, N].
// CHECK-LABEL: func.func @layer_norm_reshaped_params
// CHECK-SAME: (%[[X:.*]]: tensor<2x5x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK-NOT: tosa.rsqrt
// CHECK: %[[Y:.*]] = transformer.layer_norm %[[X]], %[[G]], %[[B]] : tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x5x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm_reshaped_params(%x: tensor<2x5x8xf32>, %gamma: tensor<8xf32>, %beta: tensor<8xf32>) -> tensor<2x5x8xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv_n = "tosa.const"() <{values = dense<0.125> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-5> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %pshape = tosa.const_shape {values = dense<[1, 1, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s = tosa.reduce_sum %x {axis = 2 : i32} : (tensor<2x5x8xf32>) -> tensor<2x5x1xf32>
  %mean = tosa.mul %s, %inv_n, %shift : (tensor<2x5x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x5x1xf32>
  %c = tosa.sub %x, %mean : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xf32>
  %sq = tosa.mul %c, %c, %shift : (tensor<2x5x8xf32>, tensor<2x5x8xf32>, tensor<1xi8>) -> tensor<2x5x8xf32>
  %vs = tosa.reduce_sum %sq {axis = 2 : i32} : (tensor<2x5x8xf32>) -> tensor<2x5x1xf32>
  %var = tosa.mul %vs, %inv_n, %shift : (tensor<2x5x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x5x1xf32>
  %ve = tosa.add %var, %eps : (tensor<2x5x1xf32>, tensor<1x1x1xf32>) -> tensor<2x5x1xf32>
  %r = tosa.rsqrt %ve : (tensor<2x5x1xf32>) -> tensor<2x5x1xf32>
  %n = tosa.mul %c, %r, %shift : (tensor<2x5x8xf32>, tensor<2x5x1xf32>, tensor<1xi8>) -> tensor<2x5x8xf32>
  %g3 = tosa.reshape %gamma, %pshape : (tensor<8xf32>, !tosa.shape<3>) -> tensor<1x1x8xf32>
  %b3 = tosa.reshape %beta, %pshape : (tensor<8xf32>, !tosa.shape<3>) -> tensor<1x1x8xf32>
  %g = tosa.mul %n, %g3, %shift : (tensor<2x5x8xf32>, tensor<1x1x8xf32>, tensor<1xi8>) -> tensor<2x5x8xf32>
  %y = tosa.add %g, %b3 : (tensor<2x5x8xf32>, tensor<1x1x8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

// Mean as sum * reciprocal(N), variance by pow(c, 2), gamma and beta already
// rank-matched function arguments (reshaped back to [N] for the op), operand
// orders swapped.
// CHECK-LABEL: func.func @layer_norm_pow_rank_matched
// CHECK-SAME: (%[[X:.*]]: tensor<6x16xf32>, %[[G:.*]]: tensor<1x16xf32>, %[[B:.*]]: tensor<1x16xf32>)
// CHECK-DAG: %[[G1:.*]] = tosa.reshape %[[G]], %{{.*}} : (tensor<1x16xf32>, !tosa.shape<1>) -> tensor<16xf32>
// CHECK-DAG: %[[B1:.*]] = tosa.reshape %[[B]], %{{.*}} : (tensor<1x16xf32>, !tosa.shape<1>) -> tensor<16xf32>
// CHECK: transformer.layer_norm %[[X]], %[[G1]], %[[B1]] {epsilon = 9.99999996E-13 : f32}
// CHECK-NOT: tosa.rsqrt
func.func @layer_norm_pow_rank_matched(%x: tensor<6x16xf32>, %gamma: tensor<1x16xf32>, %beta: tensor<1x16xf32>) -> tensor<6x16xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %n16 = "tosa.const"() <{values = dense<16.0> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %two = "tosa.const"() <{values = dense<2.0> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-12> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %inv_n = tosa.reciprocal %n16 : (tensor<1x1xf32>) -> tensor<1x1xf32>
  %s = tosa.reduce_sum %x {axis = 1 : i32} : (tensor<6x16xf32>) -> tensor<6x1xf32>
  %mean = tosa.mul %inv_n, %s, %shift : (tensor<1x1xf32>, tensor<6x1xf32>, tensor<1xi8>) -> tensor<6x1xf32>
  %c = tosa.sub %x, %mean : (tensor<6x16xf32>, tensor<6x1xf32>) -> tensor<6x16xf32>
  %sq = tosa.pow %c, %two : (tensor<6x16xf32>, tensor<1x1xf32>) -> tensor<6x16xf32>
  %vs = tosa.reduce_sum %sq {axis = 1 : i32} : (tensor<6x16xf32>) -> tensor<6x1xf32>
  %var = tosa.mul %vs, %inv_n, %shift : (tensor<6x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<6x1xf32>
  %ve = tosa.add %eps, %var : (tensor<1x1xf32>, tensor<6x1xf32>) -> tensor<6x1xf32>
  %r = tosa.rsqrt %ve : (tensor<6x1xf32>) -> tensor<6x1xf32>
  %n = tosa.mul %r, %c, %shift : (tensor<6x1xf32>, tensor<6x16xf32>, tensor<1xi8>) -> tensor<6x16xf32>
  %g = tosa.mul %gamma, %n, %shift : (tensor<1x16xf32>, tensor<6x16xf32>, tensor<1xi8>) -> tensor<6x16xf32>
  %y = tosa.add %beta, %g : (tensor<1x16xf32>, tensor<6x16xf32>) -> tensor<6x16xf32>
  return %y : tensor<6x16xf32>
}

// -----

// No gamma and no beta: constant ones and zeros.
// CHECK-LABEL: func.func @layer_norm_no_affine
// CHECK-SAME: (%[[X:.*]]: tensor<3x4xf32>)
// CHECK-DAG: %[[ONE:.*]] = "tosa.const"() <{values = dense<1.000000e+00> : tensor<4xf32>}>
// CHECK-DAG: %[[ZERO:.*]] = "tosa.const"() <{values = dense<0.000000e+00> : tensor<4xf32>}>
// CHECK: %[[Y:.*]] = transformer.layer_norm %[[X]], %[[ONE]], %[[ZERO]] : tensor<3x4xf32>
// CHECK: return %[[Y]]
func.func @layer_norm_no_affine(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv_n = "tosa.const"() <{values = dense<0.25> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-5> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %s = tosa.reduce_sum %x {axis = 1 : i32} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %mean = tosa.mul %s, %inv_n, %shift : (tensor<3x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<3x1xf32>
  %c = tosa.sub %x, %mean : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %sq = tosa.mul %c, %c, %shift : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  %vs = tosa.reduce_sum %sq {axis = 1 : i32} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %var = tosa.mul %vs, %inv_n, %shift : (tensor<3x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<3x1xf32>
  %ve = tosa.add %var, %eps : (tensor<3x1xf32>, tensor<1x1xf32>) -> tensor<3x1xf32>
  %r = tosa.rsqrt %ve : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %y = tosa.mul %c, %r, %shift : (tensor<3x4xf32>, tensor<3x1xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// -----

// Unbiased variance (divided by N - 1) is not layer_norm's.
// CHECK-LABEL: func.func @negative_layer_norm_unbiased
// CHECK-NOT: transformer.layer_norm
func.func @negative_layer_norm_unbiased(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv_n = "tosa.const"() <{values = dense<0.25> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %inv_n1 = "tosa.const"() <{values = dense<0.333333343> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-5> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %s = tosa.reduce_sum %x {axis = 1 : i32} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %mean = tosa.mul %s, %inv_n, %shift : (tensor<3x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<3x1xf32>
  %c = tosa.sub %x, %mean : (tensor<3x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  %sq = tosa.mul %c, %c, %shift : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  %vs = tosa.reduce_sum %sq {axis = 1 : i32} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %var = tosa.mul %vs, %inv_n1, %shift : (tensor<3x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<3x1xf32>
  %ve = tosa.add %var, %eps : (tensor<3x1xf32>, tensor<1x1xf32>) -> tensor<3x1xf32>
  // expected-remark @+1 {{layer_norm not fused: variance sum is scaled by 0.333333, not 1/N = 1/4}}
  %r = tosa.rsqrt %ve : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %y = tosa.mul %c, %r, %shift : (tensor<3x4xf32>, tensor<3x1xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// -----

// Normalising over the first axis is not layer_norm (last axis only).
// CHECK-LABEL: func.func @negative_layer_norm_first_axis
// CHECK-NOT: transformer.layer_norm
func.func @negative_layer_norm_first_axis(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv_n = "tosa.const"() <{values = dense<0.25> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-5> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %s = tosa.reduce_sum %x {axis = 0 : i32} : (tensor<4x3xf32>) -> tensor<1x3xf32>
  %mean = tosa.mul %s, %inv_n, %shift : (tensor<1x3xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<1x3xf32>
  %c = tosa.sub %x, %mean : (tensor<4x3xf32>, tensor<1x3xf32>) -> tensor<4x3xf32>
  %sq = tosa.mul %c, %c, %shift : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<1xi8>) -> tensor<4x3xf32>
  %vs = tosa.reduce_sum %sq {axis = 0 : i32} : (tensor<4x3xf32>) -> tensor<1x3xf32>
  %var = tosa.mul %vs, %inv_n, %shift : (tensor<1x3xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<1x3xf32>
  %ve = tosa.add %var, %eps : (tensor<1x3xf32>, tensor<1x1xf32>) -> tensor<1x3xf32>
  // expected-remark @+1 {{layer_norm not fused: variance is reduced over axis 0, not the last axis}}
  %r = tosa.rsqrt %ve : (tensor<1x3xf32>) -> tensor<1x3xf32>
  %y = tosa.mul %c, %r, %shift : (tensor<4x3xf32>, tensor<1x3xf32>, tensor<1xi8>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// RMSNorm has no centring: not a layer_norm (the rms_norm fusion takes it,
// fuse-rms-norm.mlir), and not explained as one.
// CHECK-LABEL: func.func @negative_rms_norm
// CHECK-NOT: transformer.layer_norm
func.func @negative_rms_norm(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv_n = "tosa.const"() <{values = dense<0.25> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-6> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %sq = tosa.mul %x, %x, %shift : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  %vs = tosa.reduce_sum %sq {axis = 1 : i32} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %ms = tosa.mul %vs, %inv_n, %shift : (tensor<3x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<3x1xf32>
  %ve = tosa.add %ms, %eps : (tensor<3x1xf32>, tensor<1x1xf32>) -> tensor<3x1xf32>
  %r = tosa.rsqrt %ve : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %y = tosa.mul %x, %r, %shift : (tensor<3x4xf32>, tensor<3x1xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}
