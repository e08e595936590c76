// RUN: tfc-opt %s --split-input-file --transformer-fuse-attention="explain-missed=1" -verify-diagnostics | FileCheck %s
// RUN: tfc-opt %s --split-input-file --transformer-fuse | FileCheck %s --check-prefix=NONE

// Look-alikes of attention that must be left alone. Each names, as a remark
// at the candidate (the matmul with V), the first condition that failed.
// Both matmuls stay in every function, and nowhere is there an attention op
// (also with the full --transformer-fuse):
// NONE-NOT: transformer.attention

// A reshape [N, S, D] -> [N, D, S] is not a transpose of K.
// CHECK-LABEL: func.func @negative_reshape_not_transpose
// CHECK-COUNT-2: tosa.matmul
func.func @negative_reshape_not_transpose(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %kshape = tosa.const_shape {values = dense<[2, 8, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %kt = tosa.reshape %k, %kshape : (tensor<2x4x8xf32>, !tosa.shape<3>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %s {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  // expected-remark @+1 {{attention not fused: K operand is a reshape, not a transpose}}
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Softmax over the query axis, not the key axis.
// CHECK-LABEL: func.func @negative_softmax_wrong_axis
// CHECK-COUNT-2: tosa.matmul
func.func @negative_softmax_wrong_axis(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %s {dimension = 1 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  // expected-remark @+1 {{attention not fused: softmax axis 1 is not the key axis}}
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// A raw softmax chain whose max runs over the query axis.
// CHECK-LABEL: func.func @negative_max_wrong_axis
// CHECK-COUNT-2: tosa.matmul
func.func @negative_max_wrong_axis(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %m = tosa.reduce_max %s {axis = 1 : i32} : (tensor<2x4x4xf32>) -> tensor<2x1x4xf32>
  %d = tosa.sub %s, %m : (tensor<2x4x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32>
  %e = tosa.exp %d : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %sum = tosa.reduce_sum %e {axis = 2 : i32} : (tensor<2x4x4xf32>) -> tensor<2x4x1xf32>
  %r = tosa.reciprocal %sum : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %p = tosa.mul %e, %r, %shift : (tensor<2x4x4xf32>, tensor<2x4x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  // expected-remark @+1 {{attention not fused: probabilities are not a softmax: reduce_max axis 1 differs from reduce_sum axis 2}}
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// The attention weights are returned as well.
// CHECK-LABEL: func.func @negative_probabilities_used
// CHECK-COUNT-2: tosa.matmul
func.func @negative_probabilities_used(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %s {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  // expected-remark @+1 {{attention not fused: probabilities have another use}}
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o, %p : tensor<2x4x8xf32>, tensor<2x4x4xf32>
}

// -----

// The scaled scores are returned as well.
// CHECK-LABEL: func.func @negative_scores_used
// CHECK-COUNT-2: tosa.matmul
func.func @negative_scores_used(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %c = "tosa.const"() <{values = dense<0.353553385> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %ss = tosa.mul %s, %c, %shift : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %ss {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  // expected-remark @+1 {{attention not fused: scores have another use}}
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o, %ss : tensor<2x4x8xf32>, tensor<2x4x4xf32>
}

// -----

// A scale that is a function argument is not known at compile time.
// CHECK-LABEL: func.func @negative_scale_not_constant
// CHECK-COUNT-2: tosa.matmul
func.func @negative_scale_not_constant(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %c: tensor<1x1x1xf32>) -> tensor<2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %ss = tosa.mul %s, %c, %shift : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %ss {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  // expected-remark @+1 {{attention not fused: scale is not a constant}}
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// A causal select that fills with 0 is not a mask: hidden keys still count.
// CHECK-LABEL: func.func @negative_select_fill_zero
// CHECK-COUNT-2: tosa.matmul
func.func @negative_select_fill_zero(%q: tensor<1x2x8xf32>, %k: tensor<1x2x8xf32>, %v: tensor<1x2x8xf32>) -> tensor<1x2x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %tril = "tosa.const"() <{values = dense<[[[true, false], [true, true]]]> : tensor<1x2x2xi1>}> : () -> tensor<1x2x2xi1>
  %zero = "tosa.const"() <{values = dense<0.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<1x2x8xf32>) -> tensor<1x8x2xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<1x2x8xf32>, tensor<1x8x2xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x2x2xf32>
  %sm = tosa.select %tril, %s, %zero : (tensor<1x2x2xi1>, tensor<1x2x2xf32>, tensor<1x1x1xf32>) -> tensor<1x2x2xf32>
  %p = transformer.softmax %sm {dimension = 2 : i64} : tensor<1x2x2xf32> -> tensor<1x2x2xf32>
  // expected-remark @+1 {{attention not fused: select fill value 0.000000 is not a large negative constant}}
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<1x2x2xf32>, tensor<1x2x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x2x8xf32>
  return %o : tensor<1x2x8xf32>
}

// -----

// K is repeated to all heads but V is not: not grouped-query attention.
// CHECK-LABEL: func.func @negative_kv_repeated_differently
// CHECK-COUNT-2: tosa.matmul
func.func @negative_kv_repeated_differently(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x4x3x8xf32>) -> tensor<1x4x3x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %mult = tosa.const_shape {values = dense<[1, 2, 1, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %s3 = tosa.const_shape {values = dense<[4, 3, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %s4 = tosa.const_shape {values = dense<[1, 4, 3, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %kr = tosa.tile %k, %mult : (tensor<1x2x3x8xf32>, !tosa.shape<4>) -> tensor<1x4x3x8xf32>
  %kt4 = tosa.transpose %kr {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x4x3x8xf32>) -> tensor<1x4x8x3xf32>
  %kts = tosa.const_shape {values = dense<[4, 8, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %kt = tosa.reshape %kt4, %kts : (tensor<1x4x8x3xf32>, !tosa.shape<3>) -> tensor<4x8x3xf32>
  %q3 = tosa.reshape %q, %s3 : (tensor<1x4x3x8xf32>, !tosa.shape<3>) -> tensor<4x3x8xf32>
  %v3 = tosa.reshape %v, %s3 : (tensor<1x4x3x8xf32>, !tosa.shape<3>) -> tensor<4x3x8xf32>
  %s = tosa.matmul %q3, %kt, %zp, %zp : (tensor<4x3x8xf32>, tensor<4x8x3xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x3xf32>
  %p = transformer.softmax %s {dimension = 2 : i64} : tensor<4x3x3xf32> -> tensor<4x3x3xf32>
  // expected-remark @+1 {{attention not fused: K and V are repeated differently}}
  %o = tosa.matmul %p, %v3, %zp, %zp : (tensor<4x3x3xf32>, tensor<4x3x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x8xf32>
  %o4 = tosa.reshape %o, %s4 : (tensor<4x3x8xf32>, !tosa.shape<4>) -> tensor<1x4x3x8xf32>
  return %o4 : tensor<1x4x3x8xf32>
}

// -----

// (scores + mask) * scale scales the mask too; the op adds it after scaling.
// CHECK-LABEL: func.func @negative_mask_before_scale
// CHECK-COUNT-2: tosa.matmul
func.func @negative_mask_before_scale(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %mask: tensor<1x4x4xf32>) -> tensor<2x4x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %c = "tosa.const"() <{values = dense<0.353553385> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %sm = tosa.add %s, %mask : (tensor<2x4x4xf32>, tensor<1x4x4xf32>) -> tensor<2x4x4xf32>
  %ss = tosa.mul %sm, %c, %shift : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %p = transformer.softmax %ss {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  // expected-remark @+1 {{attention not fused: mask is added before the scale}}
  %o = tosa.matmul %p, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o : tensor<2x4x8xf32>
}

// -----

// Scores [4, 3, 5] reshaped to [1, 4, 5, 3] mix query and key positions.
// CHECK-LABEL: func.func @negative_scores_reshape_not_head_split
// CHECK-COUNT-2: tosa.matmul
func.func @negative_scores_reshape_not_head_split(%q: tensor<4x3x8xf32>, %k: tensor<4x5x8xf32>, %v: tensor<4x3x8xf32>) -> tensor<4x5x8xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s4 = tosa.const_shape {values = dense<[1, 4, 5, 3]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %s3 = tosa.const_shape {values = dense<[4, 5, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<4x5x8xf32>) -> tensor<4x8x5xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<4x3x8xf32>, tensor<4x8x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x3x5xf32>
  %s4d = tosa.reshape %s, %s4 : (tensor<4x3x5xf32>, !tosa.shape<4>) -> tensor<1x4x5x3xf32>
  %p = transformer.softmax %s4d {dimension = 3 : i64} : tensor<1x4x5x3xf32> -> tensor<1x4x5x3xf32>
  %p3 = tosa.reshape %p, %s3 : (tensor<1x4x5x3xf32>, !tosa.shape<3>) -> tensor<4x5x3xf32>
  // expected-remark @+1 {{attention not fused: scores reshape is not a merge of leading dims}}
  %o = tosa.matmul %p3, %v, %zp, %zp : (tensor<4x5x3xf32>, tensor<4x3x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x5x8xf32>
  return %o : tensor<4x5x8xf32>
}

// -----

// Soft caps the op cannot take: scores scaled after the cap (the op scales
// first), a mask added before it (the op adds it after), and a cap whose
// inner factor is not its reciprocal (tanh(s / 10) * 50: the walk then
// meets the tanh).
// CHECK-LABEL: func.func @negative_softcaps
// CHECK-COUNT-6: tosa.matmul
func.func @negative_softcaps(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %mask: tensor<1x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %scale = "tosa.const"() <{values = dense<0.353553385> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %inv = "tosa.const"() <{values = dense<0.02> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %tenth = "tosa.const"() <{values = dense<0.1> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %cap = "tosa.const"() <{values = dense<50.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>

  %s1 = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %u1 = tosa.mul %s1, %inv, %shift : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %t1 = tosa.tanh %u1 : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %c1 = tosa.mul %t1, %cap, %shift : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %x1 = tosa.mul %c1, %scale, %shift : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %p1 = transformer.softmax %x1 {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  // expected-remark @+1 {{attention not fused: scores are scaled after the soft cap}}
  %o1 = tosa.matmul %p1, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>

  %s2 = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %m2 = tosa.add %s2, %mask : (tensor<2x4x4xf32>, tensor<1x4x4xf32>) -> tensor<2x4x4xf32>
  %u2 = tosa.mul %m2, %inv, %shift : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %t2 = tosa.tanh %u2 : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %c2 = tosa.mul %t2, %cap, %shift : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %p2 = transformer.softmax %c2 {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  // expected-remark @+1 {{attention not fused: mask is added before the soft cap}}
  %o2 = tosa.matmul %p2, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>

  %s3 = tosa.matmul %q, %kt, %zp, %zp : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %u3 = tosa.mul %s3, %tenth, %shift : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %t3 = tosa.tanh %u3 : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %c3 = tosa.mul %t3, %cap, %shift : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %p3 = transformer.softmax %c3 {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  // expected-remark @+1 {{attention not fused: scores are not computed by a tosa.matmul (found 'tosa.tanh')}}
  %o3 = tosa.matmul %p3, %v, %zp, %zp : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %o1, %o2, %o3 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}
