// RUN: tfc-opt %s --split-input-file --transformer-fuse-attention="explain-missed=1" -verify-diagnostics | FileCheck %s
// The fused graphs compute what the unfused ones do (numpy, float64):
// RUN: tfc-opt %s --split-input-file --mlir-print-op-generic -o %t.ref
// RUN: tfc-opt %s --split-input-file --transformer-fuse --mlir-print-op-generic -o %t.fused
// RUN: python3 -m tfc_testing.tosa_eval compare %t.ref %t.fused --tol 1e-5 | FileCheck %s --check-prefix=EVAL
// EVAL: functions=7 mismatches=0

// Attention as encoder-decoders exported to ONNX write it
// (tests/Importer/ONNX/exported.test has the whole models).

// Several additive masks, as T5 writes its attention: unscaled scores (a
// multiplication by 1), plus the per-head position bias [1, H, Sq, Skv],
// plus the padding mask [B, 1, 1, Skv]. The op's mask is their sum; Sq !=
// Skv as in a cross-attention.
// CHECK-LABEL: func.func @position_bias_and_padding
// CHECK-SAME: %[[BIAS:[a-z0-9]+]]: tensor<1x2x3x5xf32>, %[[PAD:[a-z0-9]+]]: tensor<2x1x1x5xf32>
// CHECK-NOT: tosa.matmul
// CHECK: %[[M:.*]] = tosa.add %[[PAD]], %[[BIAS]] : (tensor<2x1x1x5xf32>, tensor<1x2x3x5xf32>) -> tensor<2x2x3x5xf32>
// CHECK: transformer.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M]] {scale = 1.000000e+00 : f32} : tensor<2x2x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x3x5xf32> -> tensor<2x2x3x8xf32>
func.func @position_bias_and_padding(%q: tensor<2x2x3x8xf32>, %k: tensor<2x2x5x8xf32>, %v: tensor<2x2x5x8xf32>, %bias: tensor<1x2x3x5xf32>, %pad: tensor<2x1x1x5xf32>) -> tensor<2x2x3x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %one = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %qs = tosa.const_shape {values = dense<[4, 3, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %ks = tosa.const_shape {values = dense<[4, 5, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %ss = tosa.const_shape {values = dense<[2, 2, 3, 5]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %ps = tosa.const_shape {values = dense<[4, 3, 5]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %os = tosa.const_shape {values = dense<[2, 2, 3, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %q3 = tosa.reshape %q, %qs : (tensor<2x2x3x8xf32>, !tosa.shape<3>) -> tensor<4x3x8xf32>
  %k3 = tosa.reshape %k, %ks : (tensor<2x2x5x8xf32>, !tosa.shape<3>) -> tensor<4x5x8xf32>
  %v3 = tosa.reshape %v, %ks : (tensor<2x2x5x8xf32>, !tosa.shape<3>) -> tensor<4x5x8xf32>
  %kt = tosa.transpose %k3 {perms = array<i32: 0, 2, 1>} : (tensor<4x5x8xf32>) -> tensor<4x8x5xf32>
  %s3 = tosa.matmul %q3, %kt, %zp, %zp : (tensor<4x3x8xf32>, tensor<4x8x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x5xf32>
  %s = tosa.reshape %s3, %ss : (tensor<4x3x5xf32>, !tosa.shape<4>) -> tensor<2x2x3x5xf32>
  %s1 = tosa.mul %s, %one, %shift : (tensor<2x2x3x5xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<2x2x3x5xf32>
  %sb = tosa.add %s1, %bias : (tensor<2x2x3x5xf32>, tensor<1x2x3x5xf32>) -> tensor<2x2x3x5xf32>
  %sm = tosa.add %sb, %pad : (tensor<2x2x3x5xf32>, tensor<2x1x1x5xf32>) -> tensor<2x2x3x5xf32>
  %p = transformer.softmax %sm {dimension = 3 : i64} : tensor<2x2x3x5xf32> -> tensor<2x2x3x5xf32>
  %p3 = tosa.reshape %p, %ps : (tensor<2x2x3x5xf32>, !tosa.shape<3>) -> tensor<4x3x5xf32>
  %o = tosa.matmul %p3, %v3, %zp, %zp : (tensor<4x3x5xf32>, tensor<4x5x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x8xf32>
  %o4 = tosa.reshape %o, %os : (tensor<4x3x8xf32>, !tosa.shape<4>) -> tensor<2x2x3x8xf32>
  return %o4 : tensor<2x2x3x8xf32>
}

// -----

// One mask added to the merged [B*H, Sq, Skv] scores, one after the split
// into [B, H, Sq, Skv]: each is taken to rank 4 before they are summed.
// CHECK-LABEL: func.func @masks_at_two_ranks
// CHECK-SAME: %[[INNER:[a-z0-9]+]]: tensor<4x3x5xf32>, %[[OUTER:[a-z0-9]+]]: tensor<2x1x3x5xf32>
// CHECK-NOT: tosa.matmul
// CHECK: %[[I4:.*]] = tosa.reshape %[[INNER]], %{{.*}} : (tensor<4x3x5xf32>, !tosa.shape<4>) -> tensor<2x2x3x5xf32>
// CHECK: %[[M:.*]] = tosa.add %[[OUTER]], %[[I4]] : (tensor<2x1x3x5xf32>, tensor<2x2x3x5xf32>) -> tensor<2x2x3x5xf32>
// CHECK: transformer.attention {{.*}} mask %[[M]] {scale = 0.353553385 : f32}
func.func @masks_at_two_ranks(%q: tensor<4x3x8xf32>, %k: tensor<4x5x8xf32>, %v: tensor<4x5x8xf32>, %inner: tensor<4x3x5xf32>, %outer: tensor<2x1x3x5xf32>) -> tensor<2x2x3x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %c = "tosa.const"() <{values = dense<0.353553385> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %ss = tosa.const_shape {values = dense<[2, 2, 3, 5]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %ps = tosa.const_shape {values = dense<[4, 3, 5]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %os = tosa.const_shape {values = dense<[2, 2, 3, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x5x8xf32>) -> tensor<4x8x5xf32>
  %s3 = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x3x8xf32>, tensor<4x8x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x5xf32>
  %sc = tosa.mul %s3, %c, %shift : (tensor<4x3x5xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<4x3x5xf32>
  %si = tosa.add %sc, %inner : (tensor<4x3x5xf32>, tensor<4x3x5xf32>) -> tensor<4x3x5xf32>
  %s = tosa.reshape %si, %ss : (tensor<4x3x5xf32>, !tosa.shape<4>) -> tensor<2x2x3x5xf32>
  %sm = tosa.add %s, %outer : (tensor<2x2x3x5xf32>, tensor<2x1x3x5xf32>) -> tensor<2x2x3x5xf32>
  %p = transformer.softmax %sm {dimension = 3 : i64} : tensor<2x2x3x5xf32> -> tensor<2x2x3x5xf32>
  %p3 = tosa.reshape %p, %ps : (tensor<2x2x3x5xf32>, !tosa.shape<3>) -> tensor<4x3x5xf32>
  %o = tosa.matmul %p3, %v, %zp, %zp : (tensor<4x3x5xf32>, tensor<4x5x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x8xf32>
  %o4 = tosa.reshape %o, %os : (tensor<4x3x8xf32>, !tosa.shape<4>) -> tensor<2x2x3x8xf32>
  return %o4 : tensor<2x2x3x8xf32>
}

// -----

// Near miss: the bias is added before the scale, the mask after it. The op
// scales the scores alone ((s + b) * c is not s * c + b): not fused.
// CHECK-LABEL: func.func @negative_bias_before_scale
// CHECK-COUNT-2: tosa.matmul
// CHECK-NOT: transformer.attention
func.func @negative_bias_before_scale(%q: tensor<4x3x8xf32>, %k: tensor<4x5x8xf32>, %v: tensor<4x5x8xf32>, %bias: tensor<1x3x5xf32>, %pad: tensor<4x1x5xf32>) -> tensor<4x3x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %c = "tosa.const"() <{values = dense<0.5> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x5x8xf32>) -> tensor<4x8x5xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x3x8xf32>, tensor<4x8x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x5xf32>
  %sb = tosa.add %s, %bias : (tensor<4x3x5xf32>, tensor<1x3x5xf32>) -> tensor<4x3x5xf32>
  %sc = tosa.mul %sb, %c, %shift : (tensor<4x3x5xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<4x3x5xf32>
  %sm = tosa.add %sc, %pad : (tensor<4x3x5xf32>, tensor<4x1x5xf32>) -> tensor<4x3x5xf32>
  %p = transformer.softmax %sm {dimension = 2 : i64} : tensor<4x3x5xf32> -> tensor<4x3x5xf32>
  // expected-remark @+1 {{attention not fused: mask is added before the scale}}
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<4x3x5xf32>, tensor<4x5x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x8xf32>
  return %o : tensor<4x3x8xf32>
}

// -----

// Near miss: a bias added to scores that masked_fill then selects from. A
// boolean mask is not summed with additive ones: not fused.
// CHECK-LABEL: func.func @negative_bias_and_boolean_mask
// CHECK-COUNT-2: tosa.matmul
// CHECK-NOT: transformer.attention
func.func @negative_bias_and_boolean_mask(%q: tensor<4x3x8xf32>, %k: tensor<4x5x8xf32>, %v: tensor<4x5x8xf32>, %bias: tensor<1x3x5xf32>, %keep: tensor<4x1x5xi1>) -> tensor<4x3x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %neg = "tosa.const"() <{values = dense<-1.0e9> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x5x8xf32>) -> tensor<4x8x5xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x3x8xf32>, tensor<4x8x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x5xf32>
  %sb = tosa.add %s, %bias : (tensor<4x3x5xf32>, tensor<1x3x5xf32>) -> tensor<4x3x5xf32>
  %sm = tosa.select %keep, %sb, %neg : (tensor<4x1x5xi1>, tensor<4x3x5xf32>, tensor<1x1x1xf32>) -> tensor<4x3x5xf32>
  %p = transformer.softmax %sm {dimension = 2 : i64} : tensor<4x3x5xf32> -> tensor<4x3x5xf32>
  // expected-remark @+1 {{attention not fused: scores have two masks}}
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<4x3x5xf32>, tensor<4x5x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x8xf32>
  return %o : tensor<4x3x8xf32>
}

// -----

// masked_fill(tril == 0, -1e9) of a decoder's self-attention: the exporters
// write the constant condition [Sq, Skv] reshaped to [1, 1, Sq, Skv]. It is
// the causal pattern: is_causal, no mask.
// CHECK-LABEL: func.func @reshaped_tril
// CHECK-NOT: tosa.matmul
// CHECK-NOT: tosa.select
// CHECK: transformer.attention %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} {is_causal, scale = 1.000000e+00 : f32} :
func.func @reshaped_tril(%q: tensor<4x3x8xf32>, %k: tensor<4x3x8xf32>, %v: tensor<4x3x8xf32>) -> tensor<4x3x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %neg = "tosa.const"() <{values = dense<-1.0e9> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %above = "tosa.const"() <{values = dense<[[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>}> : () -> tensor<3x3xi1>
  %cs = tosa.const_shape {values = dense<[1, 3, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %hide = tosa.reshape %above, %cs : (tensor<3x3xi1>, !tosa.shape<3>) -> tensor<1x3x3xi1>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x3x8xf32>) -> tensor<4x8x3xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x3x8xf32>, tensor<4x8x3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x3xf32>
  %sm = tosa.select %hide, %neg, %s : (tensor<1x3x3xi1>, tensor<1x1x1xf32>, tensor<4x3x3xf32>) -> tensor<4x3x3xf32>
  %p = transformer.softmax %sm {dimension = 2 : i64} : tensor<4x3x3xf32> -> tensor<4x3x3xf32>
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<4x3x3xf32>, tensor<4x3x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x8xf32>
  return %o : tensor<4x3x8xf32>
}

// -----

// Near miss: a reshaped triu (keys from the query's own position on
// visible) is not causal; it stays a mask, made additive.
// CHECK-LABEL: func.func @reshaped_triu
// CHECK-NOT: tosa.matmul
// CHECK: %[[M:.*]] = "tosa.const"() <{values = dense<{{\[\[\[\[}}0.000000e+00, 0.000000e+00, 0.000000e+00], [-1.000000e+09, 0.000000e+00, 0.000000e+00], [-1.000000e+09, -1.000000e+09, 0.000000e+00]]]]> : tensor<1x1x3x3xf32>}>
// CHECK-NOT: is_causal
// CHECK: transformer.attention {{.*}} mask %[[M]] {scale = 1.000000e+00 : f32}
func.func @reshaped_triu(%q: tensor<4x3x8xf32>, %k: tensor<4x3x8xf32>, %v: tensor<4x3x8xf32>) -> tensor<4x3x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %neg = "tosa.const"() <{values = dense<-1.0e9> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %below = "tosa.const"() <{values = dense<[[false, false, false], [true, false, false], [true, true, false]]> : tensor<3x3xi1>}> : () -> tensor<3x3xi1>
  %cs = tosa.const_shape {values = dense<[1, 3, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %hide = tosa.reshape %below, %cs : (tensor<3x3xi1>, !tosa.shape<3>) -> tensor<1x3x3xi1>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x3x8xf32>) -> tensor<4x8x3xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x3x8xf32>, tensor<4x8x3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x3xf32>
  %sm = tosa.select %hide, %neg, %s : (tensor<1x3x3xi1>, tensor<1x1x1xf32>, tensor<4x3x3xf32>) -> tensor<4x3x3xf32>
  %p = transformer.softmax %sm {dimension = 2 : i64} : tensor<4x3x3xf32> -> tensor<4x3x3xf32>
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<4x3x3xf32>, tensor<4x3x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x8xf32>
  return %o : tensor<4x3x8xf32>
}

// -----

// Near miss: one row [1, 1, Skv] of visible keys broadcast to every query
// is the causal pattern of a single query only; with 4 queries it is no
// mask at all, not is_causal.
// CHECK-LABEL: func.func @broadcast_visible_row
// CHECK-NOT: tosa.matmul
// CHECK-NOT: is_causal
// CHECK: transformer.attention {{.*}} mask %{{.*}} {scale = 1.000000e+00 : f32}
func.func @broadcast_visible_row(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %neg = "tosa.const"() <{values = dense<-1.0e9> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %keep = "tosa.const"() <{values = dense<true> : tensor<1x1x4xi1>}> : () -> tensor<1x1x4xi1>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %sm = tosa.select %keep, %s, %neg : (tensor<1x1x4xi1>, tensor<2x4x4xf32>, tensor<1x1x1xf32>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %sm {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}
