// RUN: tfc-opt %s --split-input-file --transformer-fuse-attention="explain-missed=1" -verify-diagnostics | FileCheck %s

// Attention as PyTorch's ONNX exporters write it (tests/Importer/ONNX has
// the whole models): each form is fused.

// K in [B, S, H, D] made Kᵀ by one transpose [0, 2, 3, 1] (TorchScript's
// k.transpose(1, 2).transpose(-2, -1)): the op reads K as transpose [0, 2,
// 1, 3] of it.
// CHECK-LABEL: func.func @key_sequence_major
// CHECK-SAME: %[[K:[a-z0-9]+]]: tensor<1x4x2x8xf32>
// CHECK-NOT: tosa.matmul
// CHECK: %[[KH:.*]] = tosa.transpose %[[K]] {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK: transformer.attention %{{.*}}, %[[KH]], %{{.*}} {scale = 1.000000e+00 : f32}
func.func @key_sequence_major(%q: tensor<1x2x4x8xf32>, %k: tensor<1x4x2x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s3 = tosa.const_shape {values = dense<[2, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %kts = tosa.const_shape {values = dense<[2, 8, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s4 = tosa.const_shape {values = dense<[1, 2, 4, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %q3 = tosa.reshape %q, %s3 : (tensor<1x2x4x8xf32>, !tosa.shape<3>) -> tensor<2x4x8xf32>
  %kt4 = tosa.transpose %k {perms = array<i32: 0, 2, 3, 1>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x8x4xf32>
  %kt = tosa.reshape %kt4, %kts : (tensor<1x2x8x4xf32>, !tosa.shape<3>) -> tensor<2x8x4xf32>
  %v3 = tosa.reshape %v, %s3 : (tensor<1x2x4x8xf32>, !tosa.shape<3>) -> tensor<2x4x8xf32>
  %s = tosa.matmul %q3, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %s {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = tosa.matmul %p, %v3, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  %o4 = tosa.reshape %o, %s4 : (tensor<2x4x8xf32>, !tosa.shape<4>) -> tensor<1x2x4x8xf32>
  return %o4 : tensor<1x2x4x8xf32>
}

// -----

// masked_fill(mask == 0, -1e9) of a padding mask computed at run time: the
// additive mask is select(keep, 0, -1e9) of the same condition.
// CHECK-LABEL: func.func @computed_boolean_mask
// CHECK-SAME: %[[KEEP:[a-z0-9]+]]: tensor<2x1x4xi1>
// CHECK-NOT: tosa.matmul
// CHECK-DAG: %[[ZERO:.*]] = "tosa.const"() <{values = dense<0.000000e+00> : tensor<1x1x1xf32>}>
// CHECK-DAG: %[[FILL:.*]] = "tosa.const"() <{values = dense<-1.000000e+09> : tensor<1x1x1xf32>}>
// CHECK: %[[M:.*]] = tosa.select %[[KEEP]], %[[ZERO]], %[[FILL]] : (tensor<2x1x4xi1>, tensor<1x1x1xf32>, tensor<1x1x1xf32>) -> tensor<2x1x4xf32>
// CHECK: transformer.attention {{.*}} mask
func.func @computed_boolean_mask(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %keep: tensor<2x1x4xi1>) -> tensor<2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %neg = "tosa.const"() <{values = dense<-1.0e9> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %sm = tosa.select %keep, %s, %neg : (tensor<2x1x4xi1>, tensor<2x4x4xf32>, tensor<1x1x1xf32>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %sm {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// The NaN guard after the softmax, select(not(p == p), 0, p): the rows it
// zeroes (every key hidden by -inf) are zeros in the op too.
// CHECK-LABEL: func.func @nan_guard
// CHECK-NOT: tosa.matmul
// CHECK-NOT: tosa.logical_not
// CHECK: transformer.attention
func.func @nan_guard(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %s {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %same = tosa.equal %p, %p : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xi1>
  %nan = tosa.logical_not %same : (tensor<2x4x4xi1>) -> tensor<2x4x4xi1>
  %g = tosa.select %nan, %zero, %p : (tensor<2x4x4xi1>, tensor<1x1x1xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o = tosa.matmul %g, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// A guard that writes 1 where the softmax is NaN is not the op's zeros
// (nor a softmax: no candidate, no remark).
// CHECK-LABEL: func.func @nan_guard_fills_one
// CHECK-COUNT-2: tosa.matmul
func.func @nan_guard_fills_one(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %s {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %same = tosa.equal %p, %p : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xi1>
  %nan = tosa.logical_not %same : (tensor<2x4x4xi1>) -> tensor<2x4x4xi1>
  %g = tosa.select %nan, %one, %p : (tensor<2x4x4xi1>, tensor<1x1x1xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %o = tosa.matmul %g, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// The dynamo exporter's Kᵀ: [B, H, S, D] merged to [N, S, D], transposed
// [0, 2, 1], split back to [B, H, D, S], scaled, merged again.
// CHECK-LABEL: func.func @key_transposed_between_reshapes
// CHECK-NOT: tosa.matmul
// CHECK: transformer.attention {{.*}} {scale = 2.500000e-01 : f32}
func.func @key_transposed_between_reshapes(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %half = "tosa.const"() <{values = dense<0.5> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %s3 = tosa.const_shape {values = dense<[2, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s3t = tosa.const_shape {values = dense<[2, 8, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s4t = tosa.const_shape {values = dense<[1, 2, 8, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %s4 = tosa.const_shape {values = dense<[1, 2, 4, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %k3 = tosa.reshape %k, %s3 : (tensor<1x2x4x8xf32>, !tosa.shape<3>) -> tensor<2x4x8xf32>
  %kt3 = tosa.transpose %k3 {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %kt4 = tosa.reshape %kt3, %s4t : (tensor<2x8x4xf32>, !tosa.shape<4>) -> tensor<1x2x8x4xf32>
  %qs = tosa.mul %q, %half, %shift : (tensor<1x2x4x8xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x2x4x8xf32>
  %kts = tosa.mul %kt4, %half, %shift : (tensor<1x2x8x4xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x2x8x4xf32>
  %q3 = tosa.reshape %qs, %s3 : (tensor<1x2x4x8xf32>, !tosa.shape<3>) -> tensor<2x4x8xf32>
  %kt = tosa.reshape %kts, %s3t : (tensor<1x2x8x4xf32>, !tosa.shape<3>) -> tensor<2x8x4xf32>
  %v3 = tosa.reshape %v, %s3 : (tensor<1x2x4x8xf32>, !tosa.shape<3>) -> tensor<2x4x8xf32>
  %s = tosa.matmul %q3, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %s {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = tosa.matmul %p, %v3, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  %o4 = tosa.reshape %o, %s4 : (tensor<2x4x8xf32>, !tosa.shape<4>) -> tensor<1x2x4x8xf32>
  return %o4 : tensor<1x2x4x8xf32>
}

// -----

// Grouped-query attention whose repeated V goes from [B, Hkv, G, S, D]
// straight to the matmul's [B*Hq, S, D].
// CHECK-LABEL: func.func @repeated_value_merged_to_rank_3
// CHECK-NOT: tosa.matmul
// CHECK: transformer.attention {{.*}} : tensor<1x4x3x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32> -> tensor<1x4x3x8xf32>
func.func @repeated_value_merged_to_rank_3(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>) -> tensor<1x4x3x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s5 = tosa.const_shape {values = dense<[1, 2, 1, 3, 8]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %rep = tosa.const_shape {values = dense<[1, 1, 2, 1, 1]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %s4 = tosa.const_shape {values = dense<[1, 4, 3, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %s3 = tosa.const_shape {values = dense<[4, 3, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %k5 = tosa.reshape %k, %s5 : (tensor<1x2x3x8xf32>, !tosa.shape<5>) -> tensor<1x2x1x3x8xf32>
  %kr = tosa.tile %k5, %rep : (tensor<1x2x1x3x8xf32>, !tosa.shape<5>) -> tensor<1x2x2x3x8xf32>
  %k4 = tosa.reshape %kr, %s4 : (tensor<1x2x2x3x8xf32>, !tosa.shape<4>) -> tensor<1x4x3x8xf32>
  %kt4 = tosa.transpose %k4 {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x4x3x8xf32>) -> tensor<1x4x8x3xf32>
  %s3t = tosa.const_shape {values = dense<[4, 8, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %kt = tosa.reshape %kt4, %s3t : (tensor<1x4x8x3xf32>, !tosa.shape<3>) -> tensor<4x8x3xf32>
  %v5 = tosa.reshape %v, %s5 : (tensor<1x2x3x8xf32>, !tosa.shape<5>) -> tensor<1x2x1x3x8xf32>
  %vr = tosa.tile %v5, %rep : (tensor<1x2x1x3x8xf32>, !tosa.shape<5>) -> tensor<1x2x2x3x8xf32>
  %v3 = tosa.reshape %vr, %s3 : (tensor<1x2x2x3x8xf32>, !tosa.shape<3>) -> tensor<4x3x8xf32>
  %q3 = tosa.reshape %q, %s3 : (tensor<1x4x3x8xf32>, !tosa.shape<3>) -> tensor<4x3x8xf32>
  %s = tosa.matmul %q3, %kt, %zp, %zp : (tensor<4x3x8xf32>, tensor<4x8x3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x3xf32>
  %p = transformer.softmax %s {dimension = 2 : i64} : tensor<4x3x3xf32> -> tensor<4x3x3xf32>
  %o = tosa.matmul %p, %v3, %zp, %zp : (tensor<4x3x3xf32>, tensor<4x3x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x8xf32>
  %o4 = tosa.reshape %o, %s4 : (tensor<4x3x8xf32>, !tosa.shape<4>) -> tensor<1x4x3x8xf32>
  return %o4 : tensor<1x4x3x8xf32>
}
