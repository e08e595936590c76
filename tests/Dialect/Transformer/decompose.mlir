// RUN: tfc-opt %s --split-input-file --transformer-decompose | FileCheck %s

// CHECK-LABEL: func @softmax
// CHECK-SAME: (%[[X:.*]]: tensor<4x10xf32>)
// CHECK:      %[[MAX:.*]] = tosa.reduce_max %[[X]] {axis = 1 : i32} : (tensor<4x10xf32>) -> tensor<4x1xf32>
// CHECK:      %[[SUB:.*]] = tosa.sub %[[X]], %[[MAX]]
// CHECK:      %[[EXP:.*]] = tosa.exp %[[SUB]]
// CHECK:      %[[SUM:.*]] = tosa.reduce_sum %[[EXP]] {axis = 1 : i32}
// CHECK:      %[[REC:.*]] = tosa.reciprocal %[[SUM]]
// CHECK:      %[[Y:.*]] = tosa.mul %[[EXP]], %[[REC]], %{{.*}} : (tensor<4x10xf32>, tensor<4x1xf32>, tensor<1xi8>) -> tensor<4x10xf32>
// CHECK:      return %[[Y]]
// CHECK-NOT:  transformer.
func.func @softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %y = transformer.softmax %x {dimension = 1 : i64} : tensor<4x10xf32> -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

// CHECK-LABEL: func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8xf32>, %[[G:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK:      %[[INVN:.*]] = "tosa.const"() <{values = dense<1.250000e-01> : tensor<1x1x1xf32>}>
// CHECK:      %[[S:.*]] = tosa.reduce_sum %[[X]] {axis = 2 : i32}
// CHECK:      %[[MEAN:.*]] = tosa.mul %[[S]], %[[INVN]]
// CHECK:      %[[C:.*]] = tosa.sub %[[X]], %[[MEAN]]
// CHECK:      %[[SQ:.*]] = tosa.mul %[[C]], %[[C]]
// CHECK:      %[[VS:.*]] = tosa.reduce_sum %[[SQ]] {axis = 2 : i32}
// CHECK:      %[[VAR:.*]] = tosa.mul %[[VS]], %[[INVN]]
// CHECK:      %[[EPS:.*]] = "tosa.const"() <{values = dense<9.99999974E-6> : tensor<1x1x1xf32>}>
// CHECK:      %[[VE:.*]] = tosa.add %[[VAR]], %[[EPS]]
// CHECK:      %[[R:.*]] = tosa.rsqrt %[[VE]]
// CHECK:      %[[G3:.*]] = tosa.reshape %[[G]], %{{.*}} : (tensor<8xf32>, !tosa.shape<3>) -> tensor<1x1x8xf32>
// CHECK:      %[[B3:.*]] = tosa.reshape %[[B]], %{{.*}} : (tensor<8xf32>, !tosa.shape<3>) -> tensor<1x1x8xf32>
// CHECK:      %[[N:.*]] = tosa.mul %[[C]], %[[R]]
// CHECK:      %[[NG:.*]] = tosa.mul %[[N]], %[[G3]]
// CHECK:      %[[Y:.*]] = tosa.add %[[NG]], %[[B3]]
// CHECK:      return %[[Y]]
func.func @layer_norm(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x3x8xf32> {
  %y = transformer.layer_norm %x, %g, %b : tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// f32 statistics; the normalised value is rounded to f16 before gamma.
// CHECK-LABEL: func @rms_norm_f16
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x8xf16>, %[[G:.*]]: tensor<8xf16>)
// CHECK:      %[[X32:.*]] = tosa.cast %[[X]] : (tensor<2x3x8xf16>) -> tensor<2x3x8xf32>
// CHECK:      %[[INVN:.*]] = "tosa.const"() <{values = dense<1.250000e-01> : tensor<1x1x1xf32>}>
// CHECK:      %[[SQ:.*]] = tosa.mul %[[X32]], %[[X32]]
// CHECK:      %[[S:.*]] = tosa.reduce_sum %[[SQ]] {axis = 2 : i32}
// CHECK:      %[[MS:.*]] = tosa.mul %[[S]], %[[INVN]]
// CHECK:      %[[EPS:.*]] = "tosa.const"() <{values = dense<9.99999997E-7> : tensor<1x1x1xf32>}>
// CHECK:      %[[E:.*]] = tosa.add %[[MS]], %[[EPS]]
// CHECK:      %[[R:.*]] = tosa.rsqrt %[[E]]
// CHECK:      %[[N:.*]] = tosa.mul %[[X32]], %[[R]]
// CHECK:      %[[N16:.*]] = tosa.cast %[[N]] : (tensor<2x3x8xf32>) -> tensor<2x3x8xf16>
// CHECK:      %[[G3:.*]] = tosa.reshape %[[G]], %{{.*}} : (tensor<8xf16>, !tosa.shape<3>) -> tensor<1x1x8xf16>
// CHECK:      %[[Y:.*]] = tosa.mul %[[N16]], %[[G3]], %{{.*}} -> tensor<2x3x8xf16>
// CHECK:      return %[[Y]]
func.func @rms_norm_f16(%x: tensor<2x3x8xf16>, %g: tensor<8xf16>) -> tensor<2x3x8xf16> {
  %y = transformer.rms_norm %x, %g : tensor<2x3x8xf16>, tensor<8xf16> -> tensor<2x3x8xf16>
  return %y : tensor<2x3x8xf16>
}

// -----

// Plain attention: no guards for empty rows, no causal select.
// CHECK-LABEL: func @attention
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x16x32xf32>, %[[K:.*]]: tensor<2x4x24x32xf32>, %[[V:.*]]: tensor<2x4x24x8xf32>)
// CHECK:      %[[Q3:.*]] = tosa.reshape %[[Q]], %{{.*}} -> tensor<8x16x32xf32>
// CHECK:      %[[K3:.*]] = tosa.reshape %[[K]], %{{.*}} -> tensor<8x24x32xf32>
// CHECK:      %[[V3:.*]] = tosa.reshape %[[V]], %{{.*}} -> tensor<8x24x8xf32>
// CHECK:      %[[KT:.*]] = tosa.transpose %[[K3]] {perms = array<i32: 0, 2, 1>}
// CHECK:      %[[S:.*]] = tosa.matmul %[[Q3]], %[[KT]], {{.*}} -> tensor<8x16x24xf32>
// CHECK:      %[[S4:.*]] = tosa.reshape %[[S]], %{{.*}} -> tensor<2x4x16x24xf32>
// CHECK:      %[[SC:.*]] = "tosa.const"() <{values = dense<0.176776692> : tensor<1x1x1x1xf32>}>
// CHECK:      tosa.mul %[[S4]], %[[SC]]
// CHECK-NOT:  tosa.select
// CHECK-NOT:  linalg.generic
// CHECK:      tosa.reduce_max {{.*}} {axis = 3 : i32}
// CHECK:      tosa.exp
// CHECK:      tosa.reduce_sum {{.*}} {axis = 3 : i32}
// CHECK:      tosa.reciprocal
// CHECK:      %[[P3:.*]] = tosa.reshape {{.*}} -> tensor<8x16x24xf32>
// CHECK:      %[[O:.*]] = tosa.matmul %[[P3]], %[[V3]], {{.*}} -> tensor<8x16x8xf32>
// CHECK:      %[[O4:.*]] = tosa.reshape %[[O]], {{.*}} -> tensor<2x4x16x8xf32>
// CHECK:      return %[[O4]]
func.func @attention(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x24x32xf32>, %v: tensor<2x4x24x8xf32>) -> tensor<2x4x16x8xf32> {
  %o = transformer.attention %q, %k, %v : tensor<2x4x16x32xf32>, tensor<2x4x24x32xf32>, tensor<2x4x24x8xf32> -> tensor<2x4x16x8xf32>
  return %o : tensor<2x4x16x8xf32>
}

// -----

// A soft cap: the scaled scores go through softcap * tanh(s / softcap)
// before the mask is added.
// CHECK-LABEL: func @attention_softcap
// CHECK:      %[[SC:.*]] = "tosa.const"() <{values = dense<2.500000e-01> : tensor<1x1x1x1xf32>}>
// CHECK:      %[[SS:.*]] = tosa.mul %{{.*}}, %[[SC]]
// CHECK:      %[[INV:.*]] = "tosa.const"() <{values = dense<2.000000e-02> : tensor<1x1x1x1xf32>}>
// CHECK:      %[[U:.*]] = tosa.mul %[[SS]], %[[INV]]
// CHECK:      %[[T:.*]] = tosa.tanh %[[U]]
// CHECK:      %[[CAP:.*]] = "tosa.const"() <{values = dense<5.000000e+01> : tensor<1x1x1x1xf32>}>
// CHECK:      %[[C:.*]] = tosa.mul %[[T]], %[[CAP]]
// CHECK:      tosa.add %[[C]], %{{.*}}
// CHECK:      tosa.reduce_max
func.func @attention_softcap(%q: tensor<1x2x3x16xf32>, %k: tensor<1x2x5x16xf32>, %v: tensor<1x2x5x16xf32>, %m: tensor<1x1x1x5xf32>) -> tensor<1x2x3x16xf32> {
  %o = transformer.attention %q, %k, %v mask %m {softcap = 50.0 : f32} : tensor<1x2x3x16xf32>, tensor<1x2x5x16xf32>, tensor<1x2x5x16xf32>, tensor<1x1x1x5xf32> -> tensor<1x2x3x16xf32>
  return %o : tensor<1x2x3x16xf32>
}

// -----

// A sliding window without a causal limit: key j is visible to query i iff
// j > i + (Skv - Sq) - 2, the others -inf.
// CHECK-LABEL: func @attention_window
// CHECK:      linalg.generic
// CHECK:        %[[I:.*]] = linalg.index 2
// CHECK:        %[[J:.*]] = linalg.index 3
// CHECK:        %[[OFF:.*]] = arith.constant 2 : index
// CHECK:        %[[POS:.*]] = arith.addi %[[I]], %[[OFF]]
// CHECK:        %[[W:.*]] = arith.constant 2 : index
// CHECK:        %[[FIRST:.*]] = arith.subi %[[POS]], %[[W]]
// CHECK:        %[[IN:.*]] = arith.cmpi sgt, %[[J]], %[[FIRST]]
// CHECK:        arith.select %[[IN]], %{{.*}}, %{{.*}}
// CHECK:      tosa.reduce_max
func.func @attention_window(%q: tensor<1x2x3x16xf32>, %k: tensor<1x2x5x16xf32>, %v: tensor<1x2x5x16xf32>) -> tensor<1x2x3x16xf32> {
  %o = transformer.attention %q, %k, %v {window = 2 : i64} : tensor<1x2x3x16xf32>, tensor<1x2x5x16xf32>, tensor<1x2x5x16xf32> -> tensor<1x2x3x16xf32>
  return %o : tensor<1x2x3x16xf32>
}

// -----

// A window of Skv keys or more hides none: only the causal limit is left
// (no j + window to overflow), and without it no limit at all.
// CHECK-LABEL: func @attention_window_huge
// CHECK:      linalg.generic
// CHECK:        %[[J:.*]] = linalg.index 3
// CHECK-NOT:    arith.subi
// CHECK:        %[[IN:.*]] = arith.cmpi sle, %[[J]], %{{.*}}
// CHECK-NEXT:   arith.constant
// CHECK-NEXT:   arith.select %[[IN]]
// CHECK:      tosa.reduce_max
// CHECK-LABEL: func @attention_window_all_keys
// CHECK-NOT:  linalg.generic
// CHECK:      tosa.reduce_max
func.func @attention_window_huge(%q: tensor<1x2x3x16xf32>, %k: tensor<1x2x5x16xf32>, %v: tensor<1x2x5x16xf32>) -> tensor<1x2x3x16xf32> {
  %o = transformer.attention %q, %k, %v {window = 9223372036854775807 : i64, is_causal} : tensor<1x2x3x16xf32>, tensor<1x2x5x16xf32>, tensor<1x2x5x16xf32> -> tensor<1x2x3x16xf32>
  return %o : tensor<1x2x3x16xf32>
}
func.func @attention_window_all_keys(%q: tensor<1x2x3x16xf32>, %k: tensor<1x2x5x16xf32>, %v: tensor<1x2x5x16xf32>) -> tensor<1x2x3x16xf32> {
  %o = transformer.attention %q, %k, %v {window = 5 : i64} : tensor<1x2x3x16xf32>, tensor<1x2x5x16xf32>, tensor<1x2x5x16xf32> -> tensor<1x2x3x16xf32>
  return %o : tensor<1x2x3x16xf32>
}

// -----

// Grouped-query attention with a mask and causal masking where Sq > Skv: the
// query is viewed as [B*Hkv, G*Sq, D], keys visible iff j <= i + (Skv - Sq),
// and rows that see no key give zeros.
// CHECK-LABEL: func @attention_gqa_mask_causal
// CHECK-SAME: (%[[Q:.*]]: tensor<1x6x9x16xf32>, %[[K:.*]]: tensor<1x2x5x16xf32>, %[[V:.*]]: tensor<1x2x5x4xf32>, %[[M:.*]]: tensor<9x5xf32>)
// CHECK:      tosa.reshape %[[Q]], %{{.*}} -> tensor<2x27x16xf32>
// CHECK:      tosa.matmul {{.*}} -> tensor<2x27x5xf32>
// CHECK:      %[[SC:.*]] = "tosa.const"() <{values = dense<5.000000e-01> : tensor<1x1x1x1xf32>}>
// CHECK:      %[[SS:.*]] = tosa.mul %{{.*}}, %[[SC]]
// CHECK:      %[[M4:.*]] = tosa.reshape %[[M]], %{{.*}} -> tensor<1x1x9x5xf32>
// CHECK:      %[[SM:.*]] = tosa.add %[[SS]], %[[M4]]
// CHECK:      linalg.generic {{.*}} ins(%[[SM]] : tensor<1x6x9x5xf32>)
// CHECK:        %[[I:.*]] = linalg.index 2
// CHECK:        %[[J:.*]] = linalg.index 3
// CHECK:        %[[OFF:.*]] = arith.constant -4 : index
// CHECK:        %[[LIM:.*]] = arith.addi %[[I]], %[[OFF]]
// CHECK:        arith.cmpi sle, %[[J]], %[[LIM]]
// CHECK:        arith.constant 0xFF800000 : f32
// CHECK:      %[[MAX:.*]] = tosa.reduce_max
// CHECK:      tosa.equal %[[MAX]]
// CHECK:      tosa.select
// CHECK:      tosa.exp
// CHECK:      %[[SUM:.*]] = tosa.reduce_sum
// CHECK:      %[[REC:.*]] = tosa.reciprocal %[[SUM]]
// CHECK:      tosa.equal %[[SUM]]
// CHECK:      tosa.select {{.*}}, %{{.*}}, %[[REC]]
// CHECK:      tosa.matmul {{.*}} -> tensor<2x27x4xf32>
// CHECK:      tosa.reshape {{.*}} -> tensor<1x6x9x4xf32>
func.func @attention_gqa_mask_causal(%q: tensor<1x6x9x16xf32>, %k: tensor<1x2x5x16xf32>, %v: tensor<1x2x5x4xf32>, %m: tensor<9x5xf32>) -> tensor<1x6x9x4xf32> {
  %o = transformer.attention %q, %k, %v mask %m {is_causal, scale = 0.5 : f32} : tensor<1x6x9x16xf32>, tensor<1x2x5x16xf32>, tensor<1x2x5x4xf32>, tensor<9x5xf32> -> tensor<1x6x9x4xf32>
  return %o : tensor<1x6x9x4xf32>
}

// -----

// f16 is computed in f32, as frameworks do, and rounded back at the end.
// CHECK-LABEL: func @softmax_f16
// CHECK: tosa.cast %{{.*}} : (tensor<3x5xf16>) -> tensor<3x5xf32>
// CHECK: tosa.reduce_max {{.*}} {axis = 0 : i32} : (tensor<3x5xf32>) -> tensor<1x5xf32>
// CHECK: tosa.mul {{.*}} -> tensor<3x5xf32>
// CHECK: tosa.cast %{{.*}} : (tensor<3x5xf32>) -> tensor<3x5xf16>
func.func @softmax_f16(%x: tensor<3x5xf16>) -> tensor<3x5xf16> {
  %y = transformer.softmax %x {dimension = 0 : i64} : tensor<3x5xf16> -> tensor<3x5xf16>
  return %y : tensor<3x5xf16>
}

// -----

// f16 attention: both matmuls accumulate in f32, the softmax runs in f32,
// probabilities and the result are rounded to f16 (as frameworks do).
// CHECK-LABEL: func @attention_f16
// CHECK: tosa.matmul {{.*}} -> tensor<2x8x8xf32>
// CHECK: tosa.reduce_max {{.*}} -> tensor<1x2x8x1xf32>
// CHECK: tosa.cast %{{.*}} : (tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf16>
// CHECK: tosa.matmul {{.*}} -> tensor<2x8x16xf32>
// CHECK: tosa.cast %{{.*}} : (tensor<2x8x16xf32>) -> tensor<2x8x16xf16>
func.func @attention_f16(%q: tensor<1x2x8x16xf16>, %k: tensor<1x2x8x16xf16>, %v: tensor<1x2x8x16xf16>) -> tensor<1x2x8x16xf16> {
  %o = transformer.attention %q, %k, %v : tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16>, tensor<1x2x8x16xf16> -> tensor<1x2x8x16xf16>
  return %o : tensor<1x2x8x16xf16>
}

// -----

// bf16 keys and values under an f32 query (the CPU kernels' form): widened
// to f32 (exactly) before the products.
// CHECK-LABEL: func @attention_bf16_keys
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x3x16xf32>, %[[K:.*]]: tensor<1x2x5x16xbf16>, %[[V:.*]]: tensor<1x2x5x8xbf16>)
// CHECK-DAG:  tosa.cast %[[K]] : (tensor<1x2x5x16xbf16>) -> tensor<1x2x5x16xf32>
// CHECK-DAG:  tosa.cast %[[V]] : (tensor<1x2x5x8xbf16>) -> tensor<1x2x5x8xf32>
// CHECK:      tosa.matmul {{.*}} -> tensor<2x3x5xf32>
// CHECK-NOT:  transformer.
func.func @attention_bf16_keys(%q: tensor<1x2x3x16xf32>, %k: tensor<1x2x5x16xbf16>, %v: tensor<1x2x5x8xbf16>) -> tensor<1x2x3x8xf32> {
  %o = transformer.attention %q, %k, %v : tensor<1x2x3x16xf32>, tensor<1x2x5x16xbf16>, tensor<1x2x5x8xbf16> -> tensor<1x2x3x8xf32>
  return %o : tensor<1x2x3x8xf32>
}
