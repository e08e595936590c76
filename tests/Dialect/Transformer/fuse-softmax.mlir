// RUN: tfc-opt %s --split-input-file --transformer-fuse-softmax="explain-missed=1" -verify-diagnostics | FileCheck %s
// RUN: tfc-opt %s --mlir-print-op-generic 2>/dev/null > %t.ref
// RUN: tfc-opt %s --transformer-fuse --mlir-print-op-generic 2>/dev/null > %t.fused
// RUN: python3 -m tfc_testing.tosa_eval compare %t.ref %t.fused --tol 1e-5 | FileCheck %s --check-prefix=NUMERIC
// NUMERIC: mismatches=0

// The safe form: exp(x - max) * reciprocal(sum).
// CHECK-LABEL: func.func @softmax_safe
// CHECK-SAME: (%[[X:.*]]: tensor<4x10xf32>)
// CHECK-NEXT: %[[Y:.*]] = transformer.softmax %[[X]] {dimension = 1 : i64} : tensor<4x10xf32> -> tensor<4x10xf32>
// CHECK-NEXT: return %[[Y]]
func.func @softmax_safe(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %m = tosa.reduce_max %x {axis = 1 : i32} : (tensor<4x10xf32>) -> tensor<4x1xf32>
  %d = tosa.sub %x, %m : (tensor<4x10xf32>, tensor<4x1xf32>) -> tensor<4x10xf32>
  %e = tosa.exp %d : (tensor<4x10xf32>) -> tensor<4x10xf32>
  %s = tosa.reduce_sum %e {axis = 1 : i32} : (tensor<4x10xf32>) -> tensor<4x1xf32>
  %r = tosa.reciprocal %s : (tensor<4x1xf32>) -> tensor<4x1xf32>
  %y = tosa.mul %e, %r, %shift : (tensor<4x10xf32>, tensor<4x1xf32>, tensor<1xi8>) -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

// Without the max, reciprocal first, over a middle axis of a 3-D tensor.
// CHECK-LABEL: func.func @softmax_no_max_axis1
// CHECK-SAME: (%[[X:.*]]: tensor<2x7x3xf16>)
// CHECK: transformer.softmax %[[X]] {dimension = 1 : i64} : tensor<2x7x3xf16> -> tensor<2x7x3xf16>
// CHECK-NOT: tosa.exp
func.func @softmax_no_max_axis1(%x: tensor<2x7x3xf16>) -> tensor<2x7x3xf16> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %e = tosa.exp %x : (tensor<2x7x3xf16>) -> tensor<2x7x3xf16>
  %s = tosa.reduce_sum %e {axis = 1 : i32} : (tensor<2x7x3xf16>) -> tensor<2x1x3xf16>
  %r = tosa.reciprocal %s : (tensor<2x1x3xf16>) -> tensor<2x1x3xf16>
  %y = tosa.mul %r, %e, %shift : (tensor<2x1x3xf16>, tensor<2x7x3xf16>, tensor<1xi8>) -> tensor<2x7x3xf16>
  return %y : tensor<2x7x3xf16>
}

// -----

// Max and sum over different axes is not a softmax.
// CHECK-LABEL: func.func @negative_softmax_axes_differ
// CHECK-NOT: transformer.softmax
func.func @negative_softmax_axes_differ(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %m = tosa.reduce_max %x {axis = 0 : i32} : (tensor<4x10xf32>) -> tensor<1x10xf32>
  %d = tosa.sub %x, %m : (tensor<4x10xf32>, tensor<1x10xf32>) -> tensor<4x10xf32>
  %e = tosa.exp %d : (tensor<4x10xf32>) -> tensor<4x10xf32>
  %s = tosa.reduce_sum %e {axis = 1 : i32} : (tensor<4x10xf32>) -> tensor<4x1xf32>
  %r = tosa.reciprocal %s : (tensor<4x1xf32>) -> tensor<4x1xf32>
  // expected-remark @+1 {{softmax not fused: reduce_max axis 0 differs from reduce_sum axis 1}}
  %y = tosa.mul %e, %r, %shift : (tensor<4x10xf32>, tensor<4x1xf32>, tensor<1xi8>) -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

// The exp is needed elsewhere.
// CHECK-LABEL: func.func @negative_softmax_exp_used
// CHECK-NOT: transformer.softmax
func.func @negative_softmax_exp_used(%x: tensor<4x10xf32>) -> (tensor<4x10xf32>, tensor<4x10xf32>) {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %e = tosa.exp %x : (tensor<4x10xf32>) -> tensor<4x10xf32>
  %s = tosa.reduce_sum %e {axis = 1 : i32} : (tensor<4x10xf32>) -> tensor<4x1xf32>
  %r = tosa.reciprocal %s : (tensor<4x1xf32>) -> tensor<4x1xf32>
  // expected-remark @+1 {{softmax not fused: exp has another use}}
  %y = tosa.mul %e, %r, %shift : (tensor<4x10xf32>, tensor<4x1xf32>, tensor<1xi8>) -> tensor<4x10xf32>
  return %y, %e : tensor<4x10xf32>, tensor<4x10xf32>
}

// -----

// The sum of another tensor is not this exp's normaliser.
// CHECK-LABEL: func.func @negative_softmax_other_sum
// CHECK-NOT: transformer.softmax
func.func @negative_softmax_other_sum(%x: tensor<4x10xf32>, %z: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %e = tosa.exp %x : (tensor<4x10xf32>) -> tensor<4x10xf32>
  %s = tosa.reduce_sum %z {axis = 1 : i32} : (tensor<4x10xf32>) -> tensor<4x1xf32>
  %r = tosa.reciprocal %s : (tensor<4x1xf32>) -> tensor<4x1xf32>
  // expected-remark @+1 {{softmax not fused: the sum is not of the same exp}}
  %y = tosa.mul %e, %r, %shift : (tensor<4x10xf32>, tensor<4x1xf32>, tensor<1xi8>) -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}
