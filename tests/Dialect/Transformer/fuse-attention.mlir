// RUN: tfc-opt %s --split-input-file --transformer-fuse-attention | FileCheck %s

// 3-D matmuls, K transposed by [0, 2, 1], scores scaled by a splat constant,
// raw softmax.
// CHECK-LABEL: func.func @attention_3d_transpose_scale_mul
// CHECK-SAME: (%[[Q:.*]]: tensor<2x5x8xf32>, %[[K:.*]]: tensor<2x5x8xf32>, %[[V:.*]]: tensor<2x5x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V2:.*]] = tosa.reshape %[[Q]], %{{.*}} : (tensor<2x5x8xf32>, !tosa.shape<4>) -> tensor<2x1x5x8xf32>
// CHECK: %[[V3:.*]] = tosa.reshape %[[K]], %{{.*}} : (tensor<2x5x8xf32>, !tosa.shape<4>) -> tensor<2x1x5x8xf32>
// CHECK: %[[V4:.*]] = tosa.reshape %[[V]], %{{.*}} : (tensor<2x5x8xf32>, !tosa.shape<4>) -> tensor<2x1x5x8xf32>
// CHECK: %[[V5:.*]] = transformer.attention %[[V2]], %[[V3]], %[[V4]] {scale = 0.353553385 : f32} : tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32>, tensor<2x1x5x8xf32> -> tensor<2x1x5x8xf32>
// CHECK: %[[V6:.*]] = tosa.reshape %[[V5]], %{{.*}} : (tensor<2x1x5x8xf32>, !tosa.shape<3>) -> tensor<2x5x8xf32>
// CHECK: return %[[V6]] : tensor<2x5x8xf32>
func.func @attention_3d_transpose_scale_mul(%v1: tensor<2x5x8xf32>, %v2: tensor<2x5x8xf32>, %v3: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %v4 = tosa.transpose %v2 {perms = array<i32: 0, 2, 1>} : (tensor<2x5x8xf32>) -> tensor<2x8x5xf32>
  %v5 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v6 = tosa.matmul %v1, %v4, %v5, %v5 : (tensor<2x5x8xf32>, tensor<2x8x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x5x5xf32>
  %v7 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v8 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v9 = tosa.mul %v6, %v7, %v8 : (tensor<2x5x5xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x5x5xf32>
  %v10 = tosa.reduce_max %v9 {axis = 2 : i32} : (tensor<2x5x5xf32>) -> tensor<2x5x1xf32>
  %v11 = tosa.sub %v9, %v10 : (tensor<2x5x5xf32>, tensor<2x5x1xf32>) -> tensor<2x5x5xf32>
  %v12 = tosa.exp %v11 : (tensor<2x5x5xf32>) -> tensor<2x5x5xf32>
  %v13 = tosa.reduce_sum %v12 {axis = 2 : i32} : (tensor<2x5x5xf32>) -> tensor<2x5x1xf32>
  %v14 = tosa.reciprocal %v13 : (tensor<2x5x1xf32>) -> tensor<2x5x1xf32>
  %v15 = tosa.mul %v12, %v14, %v8 : (tensor<2x5x5xf32>, tensor<2x5x1xf32>, tensor<1xi8>) -> tensor<2x5x5xf32>
  %v16 = tosa.matmul %v15, %v3, %v5, %v5 : (tensor<2x5x5xf32>, tensor<2x5x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x5x8xf32>
  return %v16 : tensor<2x5x8xf32>
}

// -----

// BERT-style: 4-D Q/K/V squeezed to 3-D matmuls by reshapes, K transposed at
// 4-D by [0, 1, 3, 2], scale on the 4-D scores, additive [B, 1, 1, Skv] mask
// broadcast over heads and queries, fused softmax. The op reads the 4-D
// tensors and the mask directly and replaces the output reshape.
// CHECK-LABEL: func.func @attention_4d_reshapes_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x16x16xf32>, %[[K:.*]]: tensor<2x4x16x16xf32>, %[[V:.*]]: tensor<2x4x16x16xf32>, %[[MASK:.*]]: tensor<2x1x1x16xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] mask %[[MASK]] {scale = 2.500000e-01 : f32} : tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x4x16x16xf32>, tensor<2x1x1x16xf32> -> tensor<2x4x16x16xf32>
// CHECK: return %[[V0]] : tensor<2x4x16x16xf32>
func.func @attention_4d_reshapes_mask(%v1: tensor<2x4x16x16xf32>, %v2: tensor<2x4x16x16xf32>, %v3: tensor<2x4x16x16xf32>, %v4: tensor<2x1x1x16xf32>) -> tensor<2x4x16x16xf32> {
  %s5 = tosa.const_shape {values = dense<[8, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v6 = tosa.reshape %v1, %s5 : (tensor<2x4x16x16xf32>, !tosa.shape<3>) -> tensor<8x16x16xf32>
  %v7 = tosa.transpose %v2 {perms = array<i32: 0, 1, 3, 2>} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %s8 = tosa.const_shape {values = dense<[8, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v9 = tosa.reshape %v7, %s8 : (tensor<2x4x16x16xf32>, !tosa.shape<3>) -> tensor<8x16x16xf32>
  %s10 = tosa.const_shape {values = dense<[8, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v11 = tosa.reshape %v3, %s10 : (tensor<2x4x16x16xf32>, !tosa.shape<3>) -> tensor<8x16x16xf32>
  %v12 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v13 = tosa.matmul %v6, %v9, %v12, %v12 : (tensor<8x16x16xf32>, tensor<8x16x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8x16x16xf32>
  %s14 = tosa.const_shape {values = dense<[2, 4, 16, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v15 = tosa.reshape %v13, %s14 : (tensor<8x16x16xf32>, !tosa.shape<4>) -> tensor<2x4x16x16xf32>
  %v16 = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v17 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v18 = tosa.mul %v15, %v16, %v17 : (tensor<2x4x16x16xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x16x16xf32>
  %v19 = tosa.add %v18, %v4 : (tensor<2x4x16x16xf32>, tensor<2x1x1x16xf32>) -> tensor<2x4x16x16xf32>
  %v20 = transformer.softmax %v19 {dimension = 3 : i64} : tensor<2x4x16x16xf32> -> tensor<2x4x16x16xf32>
  %s21 = tosa.const_shape {values = dense<[8, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v22 = tosa.reshape %v20, %s21 : (tensor<2x4x16x16xf32>, !tosa.shape<3>) -> tensor<8x16x16xf32>
  %v23 = tosa.matmul %v22, %v11, %v12, %v12 : (tensor<8x16x16xf32>, tensor<8x16x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8x16x16xf32>
  %s24 = tosa.const_shape {values = dense<[2, 4, 16, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v25 = tosa.reshape %v23, %s24 : (tensor<8x16x16xf32>, !tosa.shape<4>) -> tensor<2x4x16x16xf32>
  return %v25 : tensor<2x4x16x16xf32>
}

// -----

// Scale as mul by reciprocal(sqrt(D)); K reshaped to 3-D then transposed by
// [0, 2, 1]; mask added on the left; softmax without the max.
// CHECK-LABEL: func.func @attention_scale_reciprocal
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x16xf32>, %[[K:.*]]: tensor<1x2x6x16xf32>, %[[V:.*]]: tensor<1x2x6x8xf32>, %[[MASK:.*]]: tensor<1x1x4x6xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] mask %[[MASK]] {scale = 2.500000e-01 : f32} : tensor<1x2x4x16xf32>, tensor<1x2x6x16xf32>, tensor<1x2x6x8xf32>, tensor<1x1x4x6xf32> -> tensor<1x2x4x8xf32>
// CHECK: return %[[V0]] : tensor<1x2x4x8xf32>
func.func @attention_scale_reciprocal(%v1: tensor<1x2x4x16xf32>, %v2: tensor<1x2x6x16xf32>, %v3: tensor<1x2x6x8xf32>, %v4: tensor<1x1x4x6xf32>) -> tensor<1x2x4x8xf32> {
  %s5 = tosa.const_shape {values = dense<[2, 4, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v6 = tosa.reshape %v1, %s5 : (tensor<1x2x4x16xf32>, !tosa.shape<3>) -> tensor<2x4x16xf32>
  %s7 = tosa.const_shape {values = dense<[2, 6, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v8 = tosa.reshape %v2, %s7 : (tensor<1x2x6x16xf32>, !tosa.shape<3>) -> tensor<2x6x16xf32>
  %v9 = tosa.transpose %v8 {perms = array<i32: 0, 2, 1>} : (tensor<2x6x16xf32>) -> tensor<2x16x6xf32>
  %s10 = tosa.const_shape {values = dense<[2, 6, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v11 = tosa.reshape %v3, %s10 : (tensor<1x2x6x8xf32>, !tosa.shape<3>) -> tensor<2x6x8xf32>
  %v12 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v13 = tosa.matmul %v6, %v9, %v12, %v12 : (tensor<2x4x16xf32>, tensor<2x16x6xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x6xf32>
  %s14 = tosa.const_shape {values = dense<[1, 2, 4, 6]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v15 = tosa.reshape %v13, %s14 : (tensor<2x4x6xf32>, !tosa.shape<4>) -> tensor<1x2x4x6xf32>
  %v16 = "tosa.const"() <{values = dense<4.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v17 = tosa.reciprocal %v16 : (tensor<1x1x1x1xf32>) -> tensor<1x1x1x1xf32>
  %v18 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v19 = tosa.mul %v15, %v17, %v18 : (tensor<1x2x4x6xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x2x4x6xf32>
  %v20 = tosa.add %v4, %v19 : (tensor<1x1x4x6xf32>, tensor<1x2x4x6xf32>) -> tensor<1x2x4x6xf32>
  %v21 = tosa.exp %v20 : (tensor<1x2x4x6xf32>) -> tensor<1x2x4x6xf32>
  %v22 = tosa.reduce_sum %v21 {axis = 3 : i32} : (tensor<1x2x4x6xf32>) -> tensor<1x2x4x1xf32>
  %v23 = tosa.reciprocal %v22 : (tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xf32>
  %v24 = tosa.mul %v21, %v23, %v18 : (tensor<1x2x4x6xf32>, tensor<1x2x4x1xf32>, tensor<1xi8>) -> tensor<1x2x4x6xf32>
  %s25 = tosa.const_shape {values = dense<[2, 4, 6]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v26 = tosa.reshape %v24, %s25 : (tensor<1x2x4x6xf32>, !tosa.shape<3>) -> tensor<2x4x6xf32>
  %v27 = tosa.matmul %v26, %v11, %v12, %v12 : (tensor<2x4x6xf32>, tensor<2x6x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  %s28 = tosa.const_shape {values = dense<[1, 2, 4, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v29 = tosa.reshape %v27, %s28 : (tensor<2x4x8xf32>, !tosa.shape<4>) -> tensor<1x2x4x8xf32>
  return %v29 : tensor<1x2x4x8xf32>
}

// -----

// Scale folded into Q before the matmul.
// CHECK-LABEL: func.func @attention_scale_on_q
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x16xf32>, %[[K:.*]]: tensor<1x2x4x16xf32>, %[[V:.*]]: tensor<1x2x4x16xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f32} : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
// CHECK: return %[[V0]] : tensor<1x2x4x16xf32>
func.func @attention_scale_on_q(%v1: tensor<1x2x4x16xf32>, %v2: tensor<1x2x4x16xf32>, %v3: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %v4 = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v5 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v6 = tosa.mul %v1, %v4, %v5 : (tensor<1x2x4x16xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x2x4x16xf32>
  %s7 = tosa.const_shape {values = dense<[2, 4, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v8 = tosa.reshape %v6, %s7 : (tensor<1x2x4x16xf32>, !tosa.shape<3>) -> tensor<2x4x16xf32>
  %v9 = tosa.transpose %v2 {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x2x4x16xf32>) -> tensor<1x2x16x4xf32>
  %s10 = tosa.const_shape {values = dense<[2, 16, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v11 = tosa.reshape %v9, %s10 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<2x16x4xf32>
  %s12 = tosa.const_shape {values = dense<[2, 4, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v13 = tosa.reshape %v3, %s12 : (tensor<1x2x4x16xf32>, !tosa.shape<3>) -> tensor<2x4x16xf32>
  %v14 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v15 = tosa.matmul %v8, %v11, %v14, %v14 : (tensor<2x4x16xf32>, tensor<2x16x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %s16 = tosa.const_shape {values = dense<[1, 2, 4, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v17 = tosa.reshape %v15, %s16 : (tensor<2x4x4xf32>, !tosa.shape<4>) -> tensor<1x2x4x4xf32>
  %v18 = transformer.softmax %v17 {dimension = 3 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %s19 = tosa.const_shape {values = dense<[2, 4, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v20 = tosa.reshape %v18, %s19 : (tensor<1x2x4x4xf32>, !tosa.shape<3>) -> tensor<2x4x4xf32>
  %v21 = tosa.matmul %v20, %v13, %v14, %v14 : (tensor<2x4x4xf32>, tensor<2x4x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x16xf32>
  %s22 = tosa.const_shape {values = dense<[1, 2, 4, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v23 = tosa.reshape %v21, %s22 : (tensor<2x4x16xf32>, !tosa.shape<4>) -> tensor<1x2x4x16xf32>
  return %v23 : tensor<1x2x4x16xf32>
}

// -----

// sqrt(scale) applied to both Q and K: the op's scale is the product.
// CHECK-LABEL: func.func @attention_scale_sqrt_on_q_and_k
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x16xf32>, %[[K:.*]]: tensor<1x2x4x16xf32>, %[[V:.*]]: tensor<1x2x4x16xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f32} : tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32> -> tensor<1x2x4x16xf32>
// CHECK: return %[[V0]] : tensor<1x2x4x16xf32>
func.func @attention_scale_sqrt_on_q_and_k(%v1: tensor<1x2x4x16xf32>, %v2: tensor<1x2x4x16xf32>, %v3: tensor<1x2x4x16xf32>) -> tensor<1x2x4x16xf32> {
  %v4 = "tosa.const"() <{values = dense<0.5> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v5 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v6 = tosa.mul %v1, %v4, %v5 : (tensor<1x2x4x16xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x2x4x16xf32>
  %v7 = tosa.mul %v2, %v4, %v5 : (tensor<1x2x4x16xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x2x4x16xf32>
  %s8 = tosa.const_shape {values = dense<[2, 4, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v9 = tosa.reshape %v6, %s8 : (tensor<1x2x4x16xf32>, !tosa.shape<3>) -> tensor<2x4x16xf32>
  %v10 = tosa.transpose %v7 {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x2x4x16xf32>) -> tensor<1x2x16x4xf32>
  %s11 = tosa.const_shape {values = dense<[2, 16, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v12 = tosa.reshape %v10, %s11 : (tensor<1x2x16x4xf32>, !tosa.shape<3>) -> tensor<2x16x4xf32>
  %s13 = tosa.const_shape {values = dense<[2, 4, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v14 = tosa.reshape %v3, %s13 : (tensor<1x2x4x16xf32>, !tosa.shape<3>) -> tensor<2x4x16xf32>
  %v15 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v16 = tosa.matmul %v9, %v12, %v15, %v15 : (tensor<2x4x16xf32>, tensor<2x16x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %s17 = tosa.const_shape {values = dense<[1, 2, 4, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v18 = tosa.reshape %v16, %s17 : (tensor<2x4x4xf32>, !tosa.shape<4>) -> tensor<1x2x4x4xf32>
  %v19 = tosa.reduce_max %v18 {axis = 3 : i32} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x1xf32>
  %v20 = tosa.sub %v18, %v19 : (tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x4x4xf32>
  %v21 = tosa.exp %v20 : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %v22 = tosa.reduce_sum %v21 {axis = 3 : i32} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x1xf32>
  %v23 = tosa.reciprocal %v22 : (tensor<1x2x4x1xf32>) -> tensor<1x2x4x1xf32>
  %v24 = tosa.mul %v21, %v23, %v5 : (tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32>, tensor<1xi8>) -> tensor<1x2x4x4xf32>
  %s25 = tosa.const_shape {values = dense<[2, 4, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v26 = tosa.reshape %v24, %s25 : (tensor<1x2x4x4xf32>, !tosa.shape<3>) -> tensor<2x4x4xf32>
  %v27 = tosa.matmul %v26, %v14, %v15, %v15 : (tensor<2x4x4xf32>, tensor<2x4x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x16xf32>
  %s28 = tosa.const_shape {values = dense<[1, 2, 4, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v29 = tosa.reshape %v27, %s28 : (tensor<2x4x16xf32>, !tosa.shape<4>) -> tensor<1x2x4x16xf32>
  return %v29 : tensor<1x2x4x16xf32>
}

// -----

// No scale at all: the op gets an explicit scale of 1.
// CHECK-LABEL: func.func @attention_no_scale
// CHECK-SAME: (%[[Q:.*]]: tensor<3x4x8xf32>, %[[K:.*]]: tensor<3x7x8xf32>, %[[V:.*]]: tensor<3x7x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V3:.*]] = tosa.reshape %[[Q]], %{{.*}} : (tensor<3x4x8xf32>, !tosa.shape<4>) -> tensor<3x1x4x8xf32>
// CHECK: %[[V4:.*]] = tosa.reshape %[[K]], %{{.*}} : (tensor<3x7x8xf32>, !tosa.shape<4>) -> tensor<3x1x7x8xf32>
// CHECK: %[[V5:.*]] = tosa.reshape %[[V]], %{{.*}} : (tensor<3x7x8xf32>, !tosa.shape<4>) -> tensor<3x1x7x8xf32>
// CHECK: %[[V6:.*]] = transformer.attention %[[V3]], %[[V4]], %[[V5]] {scale = 1.000000e+00 : f32} : tensor<3x1x4x8xf32>, tensor<3x1x7x8xf32>, tensor<3x1x7x8xf32> -> tensor<3x1x4x8xf32>
// CHECK: %[[V7:.*]] = tosa.reshape %[[V6]], %{{.*}} : (tensor<3x1x4x8xf32>, !tosa.shape<3>) -> tensor<3x4x8xf32>
// CHECK: return %[[V7]] : tensor<3x4x8xf32>
func.func @attention_no_scale(%v1: tensor<3x4x8xf32>, %v2: tensor<3x7x8xf32>, %v3: tensor<3x7x8xf32>) -> tensor<3x4x8xf32> {
  %v4 = tosa.transpose %v2 {perms = array<i32: 0, 2, 1>} : (tensor<3x7x8xf32>) -> tensor<3x8x7xf32>
  %v5 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v6 = tosa.matmul %v1, %v4, %v5, %v5 : (tensor<3x4x8xf32>, tensor<3x8x7xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x4x7xf32>
  %v7 = tosa.reduce_max %v6 {axis = 2 : i32} : (tensor<3x4x7xf32>) -> tensor<3x4x1xf32>
  %v8 = tosa.sub %v6, %v7 : (tensor<3x4x7xf32>, tensor<3x4x1xf32>) -> tensor<3x4x7xf32>
  %v9 = tosa.exp %v8 : (tensor<3x4x7xf32>) -> tensor<3x4x7xf32>
  %v10 = tosa.reduce_sum %v9 {axis = 2 : i32} : (tensor<3x4x7xf32>) -> tensor<3x4x1xf32>
  %v11 = tosa.reciprocal %v10 : (tensor<3x4x1xf32>) -> tensor<3x4x1xf32>
  %v12 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v13 = tosa.mul %v9, %v11, %v12 : (tensor<3x4x7xf32>, tensor<3x4x1xf32>, tensor<1xi8>) -> tensor<3x4x7xf32>
  %v14 = tosa.matmul %v13, %v3, %v5, %v5 : (tensor<3x4x7xf32>, tensor<3x7x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x4x8xf32>
  return %v14 : tensor<3x4x8xf32>
}

// -----

// K stored transposed as a [B*H, D, Skv] argument: no transpose op, the
// rewrite inserts one.
// CHECK-LABEL: func.func @attention_k_stored_transposed
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x8x6xf32>, %[[V:.*]]: tensor<2x6x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V3:.*]] = tosa.reshape %[[Q]], %{{.*}} : (tensor<2x4x8xf32>, !tosa.shape<4>) -> tensor<2x1x4x8xf32>
// CHECK: %[[V4:.*]] = tosa.transpose %[[K]] {perms = array<i32: 0, 2, 1>} : (tensor<2x8x6xf32>) -> tensor<2x6x8xf32>
// CHECK: %[[V5:.*]] = tosa.reshape %[[V4]], %{{.*}} : (tensor<2x6x8xf32>, !tosa.shape<4>) -> tensor<2x1x6x8xf32>
// CHECK: %[[V6:.*]] = tosa.reshape %[[V]], %{{.*}} : (tensor<2x6x8xf32>, !tosa.shape<4>) -> tensor<2x1x6x8xf32>
// CHECK: %[[V7:.*]] = transformer.attention %[[V3]], %[[V5]], %[[V6]] {scale = 0.353553385 : f32} : tensor<2x1x4x8xf32>, tensor<2x1x6x8xf32>, tensor<2x1x6x8xf32> -> tensor<2x1x4x8xf32>
// CHECK: %[[V8:.*]] = tosa.reshape %[[V7]], %{{.*}} : (tensor<2x1x4x8xf32>, !tosa.shape<3>) -> tensor<2x4x8xf32>
// CHECK: return %[[V8]] : tensor<2x4x8xf32>
func.func @attention_k_stored_transposed(%v1: tensor<2x4x8xf32>, %v2: tensor<2x8x6xf32>, %v3: tensor<2x6x8xf32>) -> tensor<2x4x8xf32> {
  %v4 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v5 = tosa.matmul %v1, %v2, %v4, %v4 : (tensor<2x4x8xf32>, tensor<2x8x6xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x6xf32>
  %v6 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v7 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v8 = tosa.mul %v5, %v6, %v7 : (tensor<2x4x6xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x6xf32>
  %v9 = tosa.reduce_max %v8 {axis = 2 : i32} : (tensor<2x4x6xf32>) -> tensor<2x4x1xf32>
  %v10 = tosa.sub %v8, %v9 : (tensor<2x4x6xf32>, tensor<2x4x1xf32>) -> tensor<2x4x6xf32>
  %v11 = tosa.exp %v10 : (tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %v12 = tosa.reduce_sum %v11 {axis = 2 : i32} : (tensor<2x4x6xf32>) -> tensor<2x4x1xf32>
  %v13 = tosa.reciprocal %v12 : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %v14 = tosa.mul %v11, %v13, %v7 : (tensor<2x4x6xf32>, tensor<2x4x1xf32>, tensor<1xi8>) -> tensor<2x4x6xf32>
  %v15 = tosa.matmul %v14, %v3, %v4, %v4 : (tensor<2x4x6xf32>, tensor<2x6x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %v15 : tensor<2x4x8xf32>
}

// -----

// 4-D K stored transposed [B, H, D, Skv] and merged by a reshape.
// CHECK-LABEL: func.func @attention_k_stored_transposed_4d
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[K:.*]]: tensor<1x2x8x6xf32>, %[[V:.*]]: tensor<1x2x6x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = tosa.transpose %[[K]] {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x2x8x6xf32>) -> tensor<1x2x6x8xf32>
// CHECK: %[[V1:.*]] = transformer.attention %[[Q]], %[[V0]], %[[V]] {scale = 0.353553385 : f32} : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32> -> tensor<1x2x4x8xf32>
// CHECK: return %[[V1]] : tensor<1x2x4x8xf32>
func.func @attention_k_stored_transposed_4d(%v1: tensor<1x2x4x8xf32>, %v2: tensor<1x2x8x6xf32>, %v3: tensor<1x2x6x8xf32>) -> tensor<1x2x4x8xf32> {
  %s4 = tosa.const_shape {values = dense<[2, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v5 = tosa.reshape %v1, %s4 : (tensor<1x2x4x8xf32>, !tosa.shape<3>) -> tensor<2x4x8xf32>
  %s6 = tosa.const_shape {values = dense<[2, 8, 6]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v7 = tosa.reshape %v2, %s6 : (tensor<1x2x8x6xf32>, !tosa.shape<3>) -> tensor<2x8x6xf32>
  %s8 = tosa.const_shape {values = dense<[2, 6, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v9 = tosa.reshape %v3, %s8 : (tensor<1x2x6x8xf32>, !tosa.shape<3>) -> tensor<2x6x8xf32>
  %v10 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v11 = tosa.matmul %v5, %v7, %v10, %v10 : (tensor<2x4x8xf32>, tensor<2x8x6xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x6xf32>
  %s12 = tosa.const_shape {values = dense<[1, 2, 4, 6]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v13 = tosa.reshape %v11, %s12 : (tensor<2x4x6xf32>, !tosa.shape<4>) -> tensor<1x2x4x6xf32>
  %v14 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v15 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v16 = tosa.mul %v13, %v14, %v15 : (tensor<1x2x4x6xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x2x4x6xf32>
  %v17 = transformer.softmax %v16 {dimension = 3 : i64} : tensor<1x2x4x6xf32> -> tensor<1x2x4x6xf32>
  %s18 = tosa.const_shape {values = dense<[2, 4, 6]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v19 = tosa.reshape %v17, %s18 : (tensor<1x2x4x6xf32>, !tosa.shape<3>) -> tensor<2x4x6xf32>
  %v20 = tosa.matmul %v19, %v9, %v10, %v10 : (tensor<2x4x6xf32>, tensor<2x6x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  %s21 = tosa.const_shape {values = dense<[1, 2, 4, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v22 = tosa.reshape %v20, %s21 : (tensor<2x4x8xf32>, !tosa.shape<4>) -> tensor<1x2x4x8xf32>
  return %v22 : tensor<1x2x4x8xf32>
}

// -----

// Causal mask by select(lower-triangular constant, scores, -inf) with Skv >
// Sq: is_causal.
// CHECK-LABEL: func.func @attention_causal_select
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x3x8xf32>, %[[K:.*]]: tensor<1x2x5x8xf32>, %[[V:.*]]: tensor<1x2x5x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] {is_causal, scale = 0.353553385 : f32} : tensor<1x2x3x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32> -> tensor<1x2x3x8xf32>
// CHECK: return %[[V0]] : tensor<1x2x3x8xf32>
func.func @attention_causal_select(%v1: tensor<1x2x3x8xf32>, %v2: tensor<1x2x5x8xf32>, %v3: tensor<1x2x5x8xf32>) -> tensor<1x2x3x8xf32> {
  %s4 = tosa.const_shape {values = dense<[2, 3, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v5 = tosa.reshape %v1, %s4 : (tensor<1x2x3x8xf32>, !tosa.shape<3>) -> tensor<2x3x8xf32>
  %v6 = tosa.transpose %v2 {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x2x5x8xf32>) -> tensor<1x2x8x5xf32>
  %s7 = tosa.const_shape {values = dense<[2, 8, 5]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v8 = tosa.reshape %v6, %s7 : (tensor<1x2x8x5xf32>, !tosa.shape<3>) -> tensor<2x8x5xf32>
  %s9 = tosa.const_shape {values = dense<[2, 5, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v10 = tosa.reshape %v3, %s9 : (tensor<1x2x5x8xf32>, !tosa.shape<3>) -> tensor<2x5x8xf32>
  %v11 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v12 = tosa.matmul %v5, %v8, %v11, %v11 : (tensor<2x3x8xf32>, tensor<2x8x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x3x5xf32>
  %s13 = tosa.const_shape {values = dense<[1, 2, 3, 5]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v14 = tosa.reshape %v12, %s13 : (tensor<2x3x5xf32>, !tosa.shape<4>) -> tensor<1x2x3x5xf32>
  %v15 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v16 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v17 = tosa.mul %v14, %v15, %v16 : (tensor<1x2x3x5xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x2x3x5xf32>
  %v18 = "tosa.const"() <{values = dense<[[[[true, true, true, false, false], [true, true, true, true, false], [true, true, true, true, true]]]]> : tensor<1x1x3x5xi1>}> : () -> tensor<1x1x3x5xi1>
  %v19 = "tosa.const"() <{values = dense<0xFF800000> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v20 = tosa.select %v18, %v17, %v19 : (tensor<1x1x3x5xi1>, tensor<1x2x3x5xf32>, tensor<1x1x1x1xf32>) -> tensor<1x2x3x5xf32>
  %v21 = tosa.reduce_max %v20 {axis = 3 : i32} : (tensor<1x2x3x5xf32>) -> tensor<1x2x3x1xf32>
  %v22 = tosa.sub %v20, %v21 : (tensor<1x2x3x5xf32>, tensor<1x2x3x1xf32>) -> tensor<1x2x3x5xf32>
  %v23 = tosa.exp %v22 : (tensor<1x2x3x5xf32>) -> tensor<1x2x3x5xf32>
  %v24 = tosa.reduce_sum %v23 {axis = 3 : i32} : (tensor<1x2x3x5xf32>) -> tensor<1x2x3x1xf32>
  %v25 = tosa.reciprocal %v24 : (tensor<1x2x3x1xf32>) -> tensor<1x2x3x1xf32>
  %v26 = tosa.mul %v23, %v25, %v16 : (tensor<1x2x3x5xf32>, tensor<1x2x3x1xf32>, tensor<1xi8>) -> tensor<1x2x3x5xf32>
  %s27 = tosa.const_shape {values = dense<[2, 3, 5]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v28 = tosa.reshape %v26, %s27 : (tensor<1x2x3x5xf32>, !tosa.shape<3>) -> tensor<2x3x5xf32>
  %v29 = tosa.matmul %v28, %v10, %v11, %v11 : (tensor<2x3x5xf32>, tensor<2x5x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x3x8xf32>
  %s30 = tosa.const_shape {values = dense<[1, 2, 3, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v31 = tosa.reshape %v29, %s30 : (tensor<2x3x8xf32>, !tosa.shape<4>) -> tensor<1x2x3x8xf32>
  return %v31 : tensor<1x2x3x8xf32>
}

// -----

// 3-D causal select with a large finite fill (-1e9).
// CHECK-LABEL: func.func @attention_causal_select_3d_finite_fill
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x4x8xf32>, %[[V:.*]]: tensor<2x4x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V2:.*]] = tosa.reshape %[[Q]], %{{.*}} : (tensor<2x4x8xf32>, !tosa.shape<4>) -> tensor<2x1x4x8xf32>
// CHECK: %[[V3:.*]] = tosa.reshape %[[K]], %{{.*}} : (tensor<2x4x8xf32>, !tosa.shape<4>) -> tensor<2x1x4x8xf32>
// CHECK: %[[V4:.*]] = tosa.reshape %[[V]], %{{.*}} : (tensor<2x4x8xf32>, !tosa.shape<4>) -> tensor<2x1x4x8xf32>
// CHECK: %[[V5:.*]] = transformer.attention %[[V2]], %[[V3]], %[[V4]] {is_causal, scale = 0.353553385 : f32} : tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32> -> tensor<2x1x4x8xf32>
// CHECK: %[[V6:.*]] = tosa.reshape %[[V5]], %{{.*}} : (tensor<2x1x4x8xf32>, !tosa.shape<3>) -> tensor<2x4x8xf32>
// CHECK: return %[[V6]] : tensor<2x4x8xf32>
func.func @attention_causal_select_3d_finite_fill(%v1: tensor<2x4x8xf32>, %v2: tensor<2x4x8xf32>, %v3: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %v4 = tosa.transpose %v2 {perms = array<i32: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %v5 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v6 = tosa.matmul %v1, %v4, %v5, %v5 : (tensor<2x4x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x4xf32>
  %v7 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v8 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v9 = tosa.mul %v6, %v7, %v8 : (tensor<2x4x4xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4xf32>
  %v10 = "tosa.const"() <{values = dense<[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]> : tensor<1x4x4xi1>}> : () -> tensor<1x4x4xi1>
  %v11 = "tosa.const"() <{values = dense<-1000000000.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v12 = tosa.select %v10, %v9, %v11 : (tensor<1x4x4xi1>, tensor<2x4x4xf32>, tensor<1x1x1xf32>) -> tensor<2x4x4xf32>
  %v13 = transformer.softmax %v12 {dimension = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %v14 = tosa.matmul %v13, %v3, %v5, %v5 : (tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %v14 : tensor<2x4x8xf32>
}

// -----

// A constant boolean mask that is not causal becomes an additive 0 / fill
// constant mask.
// CHECK-LABEL: func.func @attention_boolean_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<1x1x3x8xf32>, %[[K:.*]]: tensor<1x1x4x8xf32>, %[[V:.*]]: tensor<1x1x4x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = "tosa.const"() <{values = dense<{{\[}}{{\[}}{{\[}}{{\[}}0.000000e+00, 0.000000e+00, 0.000000e+00, 0xFF800000], {{\[}}0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], {{\[}}0.000000e+00, 0.000000e+00, 0xFF800000, 0.000000e+00]]]]> : tensor<1x1x3x4xf32>}> : () -> tensor<1x1x3x4xf32>
// CHECK: %[[V1:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] mask %[[V0]] {scale = 1.000000e+00 : f32} : tensor<1x1x3x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x3x4xf32> -> tensor<1x1x3x8xf32>
// CHECK: return %[[V1]] : tensor<1x1x3x8xf32>
func.func @attention_boolean_mask(%v1: tensor<1x1x3x8xf32>, %v2: tensor<1x1x4x8xf32>, %v3: tensor<1x1x4x8xf32>) -> tensor<1x1x3x8xf32> {
  %s4 = tosa.const_shape {values = dense<[1, 3, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v5 = tosa.reshape %v1, %s4 : (tensor<1x1x3x8xf32>, !tosa.shape<3>) -> tensor<1x3x8xf32>
  %v6 = tosa.transpose %v2 {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x1x4x8xf32>) -> tensor<1x1x8x4xf32>
  %s7 = tosa.const_shape {values = dense<[1, 8, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v8 = tosa.reshape %v6, %s7 : (tensor<1x1x8x4xf32>, !tosa.shape<3>) -> tensor<1x8x4xf32>
  %s9 = tosa.const_shape {values = dense<[1, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v10 = tosa.reshape %v3, %s9 : (tensor<1x1x4x8xf32>, !tosa.shape<3>) -> tensor<1x4x8xf32>
  %v11 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v12 = tosa.matmul %v5, %v8, %v11, %v11 : (tensor<1x3x8xf32>, tensor<1x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x3x4xf32>
  %s13 = tosa.const_shape {values = dense<[1, 1, 3, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v14 = tosa.reshape %v12, %s13 : (tensor<1x3x4xf32>, !tosa.shape<4>) -> tensor<1x1x3x4xf32>
  %v15 = "tosa.const"() <{values = dense<[[[[true, true, true, false], [true, true, true, true], [true, true, false, true]]]]> : tensor<1x1x3x4xi1>}> : () -> tensor<1x1x3x4xi1>
  %v16 = "tosa.const"() <{values = dense<0xFF800000> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v17 = tosa.select %v15, %v14, %v16 : (tensor<1x1x3x4xi1>, tensor<1x1x3x4xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x3x4xf32>
  %v18 = tosa.reduce_max %v17 {axis = 3 : i32} : (tensor<1x1x3x4xf32>) -> tensor<1x1x3x1xf32>
  %v19 = tosa.sub %v17, %v18 : (tensor<1x1x3x4xf32>, tensor<1x1x3x1xf32>) -> tensor<1x1x3x4xf32>
  %v20 = tosa.exp %v19 : (tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  %v21 = tosa.reduce_sum %v20 {axis = 3 : i32} : (tensor<1x1x3x4xf32>) -> tensor<1x1x3x1xf32>
  %v22 = tosa.reciprocal %v21 : (tensor<1x1x3x1xf32>) -> tensor<1x1x3x1xf32>
  %v23 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v24 = tosa.mul %v20, %v22, %v23 : (tensor<1x1x3x4xf32>, tensor<1x1x3x1xf32>, tensor<1xi8>) -> tensor<1x1x3x4xf32>
  %s25 = tosa.const_shape {values = dense<[1, 3, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v26 = tosa.reshape %v24, %s25 : (tensor<1x1x3x4xf32>, !tosa.shape<3>) -> tensor<1x3x4xf32>
  %v27 = tosa.matmul %v26, %v10, %v11, %v11 : (tensor<1x3x4xf32>, tensor<1x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x3x8xf32>
  %s28 = tosa.const_shape {values = dense<[1, 1, 3, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v29 = tosa.reshape %v27, %s28 : (tensor<1x3x8xf32>, !tosa.shape<4>) -> tensor<1x1x3x8xf32>
  return %v29 : tensor<1x1x3x8xf32>
}

// -----

// 3-D attention with a [1, Sq, Skv] additive mask: reshaped to [1, 1, Sq,
// Skv].
// CHECK-LABEL: func.func @attention_3d_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8xf32>, %[[K:.*]]: tensor<2x6x8xf32>, %[[V:.*]]: tensor<2x6x8xf32>, %[[MASK:.*]]: tensor<1x4x6xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V4:.*]] = tosa.reshape %[[Q]], %{{.*}} : (tensor<2x4x8xf32>, !tosa.shape<4>) -> tensor<2x1x4x8xf32>
// CHECK: %[[V5:.*]] = tosa.reshape %[[K]], %{{.*}} : (tensor<2x6x8xf32>, !tosa.shape<4>) -> tensor<2x1x6x8xf32>
// CHECK: %[[V6:.*]] = tosa.reshape %[[V]], %{{.*}} : (tensor<2x6x8xf32>, !tosa.shape<4>) -> tensor<2x1x6x8xf32>
// CHECK: %[[V7:.*]] = tosa.reshape %[[MASK]], %{{.*}} : (tensor<1x4x6xf32>, !tosa.shape<4>) -> tensor<1x1x4x6xf32>
// CHECK: %[[V8:.*]] = transformer.attention %[[V4]], %[[V5]], %[[V6]] mask %[[V7]] {scale = 0.353553385 : f32} : tensor<2x1x4x8xf32>, tensor<2x1x6x8xf32>, tensor<2x1x6x8xf32>, tensor<1x1x4x6xf32> -> tensor<2x1x4x8xf32>
// CHECK: %[[V9:.*]] = tosa.reshape %[[V8]], %{{.*}} : (tensor<2x1x4x8xf32>, !tosa.shape<3>) -> tensor<2x4x8xf32>
// CHECK: return %[[V9]] : tensor<2x4x8xf32>
func.func @attention_3d_mask(%v1: tensor<2x4x8xf32>, %v2: tensor<2x6x8xf32>, %v3: tensor<2x6x8xf32>, %v4: tensor<1x4x6xf32>) -> tensor<2x4x8xf32> {
  %v5 = tosa.transpose %v2 {perms = array<i32: 0, 2, 1>} : (tensor<2x6x8xf32>) -> tensor<2x8x6xf32>
  %v6 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v7 = tosa.matmul %v1, %v5, %v6, %v6 : (tensor<2x4x8xf32>, tensor<2x8x6xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x6xf32>
  %v8 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v9 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v10 = tosa.mul %v7, %v8, %v9 : (tensor<2x4x6xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x6xf32>
  %v11 = tosa.add %v10, %v4 : (tensor<2x4x6xf32>, tensor<1x4x6xf32>) -> tensor<2x4x6xf32>
  %v12 = tosa.reduce_max %v11 {axis = 2 : i32} : (tensor<2x4x6xf32>) -> tensor<2x4x1xf32>
  %v13 = tosa.sub %v11, %v12 : (tensor<2x4x6xf32>, tensor<2x4x1xf32>) -> tensor<2x4x6xf32>
  %v14 = tosa.exp %v13 : (tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %v15 = tosa.reduce_sum %v14 {axis = 2 : i32} : (tensor<2x4x6xf32>) -> tensor<2x4x1xf32>
  %v16 = tosa.reciprocal %v15 : (tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %v17 = tosa.mul %v14, %v16, %v9 : (tensor<2x4x6xf32>, tensor<2x4x1xf32>, tensor<1xi8>) -> tensor<2x4x6xf32>
  %v18 = tosa.matmul %v17, %v3, %v6, %v6 : (tensor<2x4x6xf32>, tensor<2x6x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x8xf32>
  return %v18 : tensor<2x4x8xf32>
}

// -----

// GQA with K/V repeated by reshape [B, Hkv, 1, S, D] -> tile -> reshape [B,
// Hq, S, D]: query head h reads kv head h / G, as the op does; the op reads
// the un-repeated K/V.
// CHECK-LABEL: func.func @attention_gqa_expand
// CHECK-SAME: (%[[Q:.*]]: tensor<1x6x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] {scale = 0.353553385 : f32} : tensor<1x6x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x6x4x8xf32>
// CHECK: return %[[V0]] : tensor<1x6x4x8xf32>
func.func @attention_gqa_expand(%v1: tensor<1x6x4x8xf32>, %v2: tensor<1x2x4x8xf32>, %v3: tensor<1x2x4x8xf32>) -> tensor<1x6x4x8xf32> {
  %s4 = tosa.const_shape {values = dense<[1, 2, 1, 4, 8]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v5 = tosa.reshape %v2, %s4 : (tensor<1x2x4x8xf32>, !tosa.shape<5>) -> tensor<1x2x1x4x8xf32>
  %s6 = tosa.const_shape {values = dense<[1, 1, 3, 1, 1]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v7 = tosa.tile %v5, %s6 : (tensor<1x2x1x4x8xf32>, !tosa.shape<5>) -> tensor<1x2x3x4x8xf32>
  %s8 = tosa.const_shape {values = dense<[1, 6, 4, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v9 = tosa.reshape %v7, %s8 : (tensor<1x2x3x4x8xf32>, !tosa.shape<4>) -> tensor<1x6x4x8xf32>
  %s10 = tosa.const_shape {values = dense<[1, 2, 1, 4, 8]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v11 = tosa.reshape %v3, %s10 : (tensor<1x2x4x8xf32>, !tosa.shape<5>) -> tensor<1x2x1x4x8xf32>
  %s12 = tosa.const_shape {values = dense<[1, 1, 3, 1, 1]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v13 = tosa.tile %v11, %s12 : (tensor<1x2x1x4x8xf32>, !tosa.shape<5>) -> tensor<1x2x3x4x8xf32>
  %s14 = tosa.const_shape {values = dense<[1, 6, 4, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v15 = tosa.reshape %v13, %s14 : (tensor<1x2x3x4x8xf32>, !tosa.shape<4>) -> tensor<1x6x4x8xf32>
  %s16 = tosa.const_shape {values = dense<[6, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v17 = tosa.reshape %v1, %s16 : (tensor<1x6x4x8xf32>, !tosa.shape<3>) -> tensor<6x4x8xf32>
  %v18 = tosa.transpose %v9 {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x6x4x8xf32>) -> tensor<1x6x8x4xf32>
  %s19 = tosa.const_shape {values = dense<[6, 8, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v20 = tosa.reshape %v18, %s19 : (tensor<1x6x8x4xf32>, !tosa.shape<3>) -> tensor<6x8x4xf32>
  %s21 = tosa.const_shape {values = dense<[6, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v22 = tosa.reshape %v15, %s21 : (tensor<1x6x4x8xf32>, !tosa.shape<3>) -> tensor<6x4x8xf32>
  %v23 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v24 = tosa.matmul %v17, %v20, %v23, %v23 : (tensor<6x4x8xf32>, tensor<6x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<6x4x4xf32>
  %s25 = tosa.const_shape {values = dense<[1, 6, 4, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v26 = tosa.reshape %v24, %s25 : (tensor<6x4x4xf32>, !tosa.shape<4>) -> tensor<1x6x4x4xf32>
  %v27 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v28 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v29 = tosa.mul %v26, %v27, %v28 : (tensor<1x6x4x4xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x6x4x4xf32>
  %v30 = transformer.softmax %v29 {dimension = 3 : i64} : tensor<1x6x4x4xf32> -> tensor<1x6x4x4xf32>
  %s31 = tosa.const_shape {values = dense<[6, 4, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v32 = tosa.reshape %v30, %s31 : (tensor<1x6x4x4xf32>, !tosa.shape<3>) -> tensor<6x4x4xf32>
  %v33 = tosa.matmul %v32, %v22, %v23, %v23 : (tensor<6x4x4xf32>, tensor<6x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<6x4x8xf32>
  %s34 = tosa.const_shape {values = dense<[1, 6, 4, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v35 = tosa.reshape %v33, %s34 : (tensor<6x4x8xf32>, !tosa.shape<4>) -> tensor<1x6x4x8xf32>
  return %v35 : tensor<1x6x4x8xf32>
}

// -----

// GQA with K/V repeated by tile [1, G, 1, 1]: query head h reads kv head h %
// Hkv, so the rewrite reorders the query heads (and the output back) around
// the op.
// CHECK-LABEL: func.func @attention_gqa_tile
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V2:.*]] = tosa.reshape %[[Q]], %{{.*}} : (tensor<1x4x4x8xf32>, !tosa.shape<5>) -> tensor<1x2x2x4x8xf32>
// CHECK: %[[V3:.*]] = tosa.transpose %[[V2]] {perms = array<i32: 0, 2, 1, 3, 4>} : (tensor<1x2x2x4x8xf32>) -> tensor<1x2x2x4x8xf32>
// CHECK: %[[V4:.*]] = tosa.reshape %[[V3]], %{{.*}} : (tensor<1x2x2x4x8xf32>, !tosa.shape<4>) -> tensor<1x4x4x8xf32>
// CHECK: %[[V5:.*]] = transformer.attention %[[V4]], %[[K]], %[[V]] {scale = 0.353553385 : f32} : tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x4x4x8xf32>
// CHECK: %[[V6:.*]] = tosa.reshape %[[V5]], %{{.*}} : (tensor<1x4x4x8xf32>, !tosa.shape<5>) -> tensor<1x2x2x4x8xf32>
// CHECK: %[[V7:.*]] = tosa.transpose %[[V6]] {perms = array<i32: 0, 2, 1, 3, 4>} : (tensor<1x2x2x4x8xf32>) -> tensor<1x2x2x4x8xf32>
// CHECK: %[[V8:.*]] = tosa.reshape %[[V7]], %{{.*}} : (tensor<1x2x2x4x8xf32>, !tosa.shape<4>) -> tensor<1x4x4x8xf32>
// CHECK: return %[[V8]] : tensor<1x4x4x8xf32>
func.func @attention_gqa_tile(%v1: tensor<1x4x4x8xf32>, %v2: tensor<1x2x4x8xf32>, %v3: tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %s4 = tosa.const_shape {values = dense<[1, 2, 1, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v5 = tosa.tile %v2, %s4 : (tensor<1x2x4x8xf32>, !tosa.shape<4>) -> tensor<1x4x4x8xf32>
  %s6 = tosa.const_shape {values = dense<[1, 2, 1, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v7 = tosa.tile %v3, %s6 : (tensor<1x2x4x8xf32>, !tosa.shape<4>) -> tensor<1x4x4x8xf32>
  %s8 = tosa.const_shape {values = dense<[4, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v9 = tosa.reshape %v1, %s8 : (tensor<1x4x4x8xf32>, !tosa.shape<3>) -> tensor<4x4x8xf32>
  %s10 = tosa.const_shape {values = dense<[4, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v11 = tosa.reshape %v5, %s10 : (tensor<1x4x4x8xf32>, !tosa.shape<3>) -> tensor<4x4x8xf32>
  %v12 = tosa.transpose %v11 {perms = array<i32: 0, 2, 1>} : (tensor<4x4x8xf32>) -> tensor<4x8x4xf32>
  %s13 = tosa.const_shape {values = dense<[4, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v14 = tosa.reshape %v7, %s13 : (tensor<1x4x4x8xf32>, !tosa.shape<3>) -> tensor<4x4x8xf32>
  %v15 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v16 = tosa.matmul %v9, %v12, %v15, %v15 : (tensor<4x4x8xf32>, tensor<4x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x4x4xf32>
  %s17 = tosa.const_shape {values = dense<[1, 4, 4, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v18 = tosa.reshape %v16, %s17 : (tensor<4x4x4xf32>, !tosa.shape<4>) -> tensor<1x4x4x4xf32>
  %v19 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v20 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v21 = tosa.mul %v18, %v19, %v20 : (tensor<1x4x4x4xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x4x4x4xf32>
  %v22 = tosa.reduce_max %v21 {axis = 3 : i32} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x1xf32>
  %v23 = tosa.sub %v21, %v22 : (tensor<1x4x4x4xf32>, tensor<1x4x4x1xf32>) -> tensor<1x4x4x4xf32>
  %v24 = tosa.exp %v23 : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %v25 = tosa.reduce_sum %v24 {axis = 3 : i32} : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x1xf32>
  %v26 = tosa.reciprocal %v25 : (tensor<1x4x4x1xf32>) -> tensor<1x4x4x1xf32>
  %v27 = tosa.mul %v24, %v26, %v20 : (tensor<1x4x4x4xf32>, tensor<1x4x4x1xf32>, tensor<1xi8>) -> tensor<1x4x4x4xf32>
  %s28 = tosa.const_shape {values = dense<[4, 4, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v29 = tosa.reshape %v27, %s28 : (tensor<1x4x4x4xf32>, !tosa.shape<3>) -> tensor<4x4x4xf32>
  %v30 = tosa.matmul %v29, %v14, %v15, %v15 : (tensor<4x4x4xf32>, tensor<4x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x4x8xf32>
  %s31 = tosa.const_shape {values = dense<[1, 4, 4, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v32 = tosa.reshape %v30, %s31 : (tensor<4x4x8xf32>, !tosa.shape<4>) -> tensor<1x4x4x8xf32>
  return %v32 : tensor<1x4x4x8xf32>
}

// -----

// Multi-query attention (one kv head) repeated by tile: no reordering needed.
// CHECK-LABEL: func.func @attention_mqa_tile
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x4x8xf32>, %[[K:.*]]: tensor<2x1x4x8xf32>, %[[V:.*]]: tensor<2x1x4x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] {scale = 0.353553385 : f32} : tensor<2x4x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32> -> tensor<2x4x4x8xf32>
// CHECK: return %[[V0]] : tensor<2x4x4x8xf32>
func.func @attention_mqa_tile(%v1: tensor<2x4x4x8xf32>, %v2: tensor<2x1x4x8xf32>, %v3: tensor<2x1x4x8xf32>) -> tensor<2x4x4x8xf32> {
  %s4 = tosa.const_shape {values = dense<[1, 4, 1, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v5 = tosa.tile %v2, %s4 : (tensor<2x1x4x8xf32>, !tosa.shape<4>) -> tensor<2x4x4x8xf32>
  %s6 = tosa.const_shape {values = dense<[1, 4, 1, 1]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v7 = tosa.tile %v3, %s6 : (tensor<2x1x4x8xf32>, !tosa.shape<4>) -> tensor<2x4x4x8xf32>
  %s8 = tosa.const_shape {values = dense<[8, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v9 = tosa.reshape %v1, %s8 : (tensor<2x4x4x8xf32>, !tosa.shape<3>) -> tensor<8x4x8xf32>
  %v10 = tosa.transpose %v5 {perms = array<i32: 0, 1, 3, 2>} : (tensor<2x4x4x8xf32>) -> tensor<2x4x8x4xf32>
  %s11 = tosa.const_shape {values = dense<[8, 8, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v12 = tosa.reshape %v10, %s11 : (tensor<2x4x8x4xf32>, !tosa.shape<3>) -> tensor<8x8x4xf32>
  %s13 = tosa.const_shape {values = dense<[8, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v14 = tosa.reshape %v7, %s13 : (tensor<2x4x4x8xf32>, !tosa.shape<3>) -> tensor<8x4x8xf32>
  %v15 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v16 = tosa.matmul %v9, %v12, %v15, %v15 : (tensor<8x4x8xf32>, tensor<8x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8x4x4xf32>
  %s17 = tosa.const_shape {values = dense<[2, 4, 4, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v18 = tosa.reshape %v16, %s17 : (tensor<8x4x4xf32>, !tosa.shape<4>) -> tensor<2x4x4x4xf32>
  %v19 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v20 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v21 = tosa.mul %v18, %v19, %v20 : (tensor<2x4x4x4xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x4x4xf32>
  %v22 = tosa.reduce_max %v21 {axis = 3 : i32} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x1xf32>
  %v23 = tosa.sub %v21, %v22 : (tensor<2x4x4x4xf32>, tensor<2x4x4x1xf32>) -> tensor<2x4x4x4xf32>
  %v24 = tosa.exp %v23 : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %v25 = tosa.reduce_sum %v24 {axis = 3 : i32} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x1xf32>
  %v26 = tosa.reciprocal %v25 : (tensor<2x4x4x1xf32>) -> tensor<2x4x4x1xf32>
  %v27 = tosa.mul %v24, %v26, %v20 : (tensor<2x4x4x4xf32>, tensor<2x4x4x1xf32>, tensor<1xi8>) -> tensor<2x4x4x4xf32>
  %s28 = tosa.const_shape {values = dense<[8, 4, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v29 = tosa.reshape %v27, %s28 : (tensor<2x4x4x4xf32>, !tosa.shape<3>) -> tensor<8x4x4xf32>
  %v30 = tosa.matmul %v29, %v14, %v15, %v15 : (tensor<8x4x4xf32>, tensor<8x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8x4x8xf32>
  %s31 = tosa.const_shape {values = dense<[2, 4, 4, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v32 = tosa.reshape %v30, %s31 : (tensor<8x4x8xf32>, !tosa.shape<4>) -> tensor<2x4x4x8xf32>
  return %v32 : tensor<2x4x4x8xf32>
}

// -----

// Odd sizes: Sq = 77, Skv = 200, D = 80, Dv = 40, with a [1, 1, 1, Skv] mask.
// CHECK-LABEL: func.func @attention_odd_sizes
// CHECK-SAME: (%[[Q:.*]]: tensor<1x3x77x80xf32>, %[[K:.*]]: tensor<1x3x200x80xf32>, %[[V:.*]]: tensor<1x3x200x40xf32>, %[[MASK:.*]]: tensor<1x1x1x200xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] mask %[[MASK]] {scale = 0.111803398 : f32} : tensor<1x3x77x80xf32>, tensor<1x3x200x80xf32>, tensor<1x3x200x40xf32>, tensor<1x1x1x200xf32> -> tensor<1x3x77x40xf32>
// CHECK: return %[[V0]] : tensor<1x3x77x40xf32>
func.func @attention_odd_sizes(%v1: tensor<1x3x77x80xf32>, %v2: tensor<1x3x200x80xf32>, %v3: tensor<1x3x200x40xf32>, %v4: tensor<1x1x1x200xf32>) -> tensor<1x3x77x40xf32> {
  %s5 = tosa.const_shape {values = dense<[3, 77, 80]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v6 = tosa.reshape %v1, %s5 : (tensor<1x3x77x80xf32>, !tosa.shape<3>) -> tensor<3x77x80xf32>
  %v7 = tosa.transpose %v2 {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x3x200x80xf32>) -> tensor<1x3x80x200xf32>
  %s8 = tosa.const_shape {values = dense<[3, 80, 200]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v9 = tosa.reshape %v7, %s8 : (tensor<1x3x80x200xf32>, !tosa.shape<3>) -> tensor<3x80x200xf32>
  %s10 = tosa.const_shape {values = dense<[3, 200, 40]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v11 = tosa.reshape %v3, %s10 : (tensor<1x3x200x40xf32>, !tosa.shape<3>) -> tensor<3x200x40xf32>
  %v12 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v13 = tosa.matmul %v6, %v9, %v12, %v12 : (tensor<3x77x80xf32>, tensor<3x80x200xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x77x200xf32>
  %s14 = tosa.const_shape {values = dense<[1, 3, 77, 200]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v15 = tosa.reshape %v13, %s14 : (tensor<3x77x200xf32>, !tosa.shape<4>) -> tensor<1x3x77x200xf32>
  %v16 = "tosa.const"() <{values = dense<0.11180339887498948> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v17 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v18 = tosa.mul %v15, %v16, %v17 : (tensor<1x3x77x200xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x3x77x200xf32>
  %v19 = tosa.add %v18, %v4 : (tensor<1x3x77x200xf32>, tensor<1x1x1x200xf32>) -> tensor<1x3x77x200xf32>
  %v20 = tosa.reduce_max %v19 {axis = 3 : i32} : (tensor<1x3x77x200xf32>) -> tensor<1x3x77x1xf32>
  %v21 = tosa.sub %v19, %v20 : (tensor<1x3x77x200xf32>, tensor<1x3x77x1xf32>) -> tensor<1x3x77x200xf32>
  %v22 = tosa.exp %v21 : (tensor<1x3x77x200xf32>) -> tensor<1x3x77x200xf32>
  %v23 = tosa.reduce_sum %v22 {axis = 3 : i32} : (tensor<1x3x77x200xf32>) -> tensor<1x3x77x1xf32>
  %v24 = tosa.reciprocal %v23 : (tensor<1x3x77x1xf32>) -> tensor<1x3x77x1xf32>
  %v25 = tosa.mul %v22, %v24, %v17 : (tensor<1x3x77x200xf32>, tensor<1x3x77x1xf32>, tensor<1xi8>) -> tensor<1x3x77x200xf32>
  %s26 = tosa.const_shape {values = dense<[3, 77, 200]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v27 = tosa.reshape %v25, %s26 : (tensor<1x3x77x200xf32>, !tosa.shape<3>) -> tensor<3x77x200xf32>
  %v28 = tosa.matmul %v27, %v11, %v12, %v12 : (tensor<3x77x200xf32>, tensor<3x200x40xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x77x40xf32>
  %s29 = tosa.const_shape {values = dense<[1, 3, 77, 40]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v30 = tosa.reshape %v28, %s29 : (tensor<3x77x40xf32>, !tosa.shape<4>) -> tensor<1x3x77x40xf32>
  return %v30 : tensor<1x3x77x40xf32>
}

// -----

// Decode step: one query row (Sq = 1) against 200 keys.
// CHECK-LABEL: func.func @attention_one_row
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x1x64xf32>, %[[K:.*]]: tensor<1x4x200x64xf32>, %[[V:.*]]: tensor<1x4x200x64xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f32} : tensor<1x4x1x64xf32>, tensor<1x4x200x64xf32>, tensor<1x4x200x64xf32> -> tensor<1x4x1x64xf32>
// CHECK: return %[[V0]] : tensor<1x4x1x64xf32>
func.func @attention_one_row(%v1: tensor<1x4x1x64xf32>, %v2: tensor<1x4x200x64xf32>, %v3: tensor<1x4x200x64xf32>) -> tensor<1x4x1x64xf32> {
  %s4 = tosa.const_shape {values = dense<[4, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v5 = tosa.reshape %v1, %s4 : (tensor<1x4x1x64xf32>, !tosa.shape<3>) -> tensor<4x1x64xf32>
  %v6 = tosa.transpose %v2 {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x4x200x64xf32>) -> tensor<1x4x64x200xf32>
  %s7 = tosa.const_shape {values = dense<[4, 64, 200]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v8 = tosa.reshape %v6, %s7 : (tensor<1x4x64x200xf32>, !tosa.shape<3>) -> tensor<4x64x200xf32>
  %s9 = tosa.const_shape {values = dense<[4, 200, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v10 = tosa.reshape %v3, %s9 : (tensor<1x4x200x64xf32>, !tosa.shape<3>) -> tensor<4x200x64xf32>
  %v11 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v12 = tosa.matmul %v5, %v8, %v11, %v11 : (tensor<4x1x64xf32>, tensor<4x64x200xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x1x200xf32>
  %s13 = tosa.const_shape {values = dense<[1, 4, 1, 200]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v14 = tosa.reshape %v12, %s13 : (tensor<4x1x200xf32>, !tosa.shape<4>) -> tensor<1x4x1x200xf32>
  %v15 = "tosa.const"() <{values = dense<0.125> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v16 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v17 = tosa.mul %v14, %v15, %v16 : (tensor<1x4x1x200xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x4x1x200xf32>
  %v18 = tosa.reduce_max %v17 {axis = 3 : i32} : (tensor<1x4x1x200xf32>) -> tensor<1x4x1x1xf32>
  %v19 = tosa.sub %v17, %v18 : (tensor<1x4x1x200xf32>, tensor<1x4x1x1xf32>) -> tensor<1x4x1x200xf32>
  %v20 = tosa.exp %v19 : (tensor<1x4x1x200xf32>) -> tensor<1x4x1x200xf32>
  %v21 = tosa.reduce_sum %v20 {axis = 3 : i32} : (tensor<1x4x1x200xf32>) -> tensor<1x4x1x1xf32>
  %v22 = tosa.reciprocal %v21 : (tensor<1x4x1x1xf32>) -> tensor<1x4x1x1xf32>
  %v23 = tosa.mul %v20, %v22, %v16 : (tensor<1x4x1x200xf32>, tensor<1x4x1x1xf32>, tensor<1xi8>) -> tensor<1x4x1x200xf32>
  %s24 = tosa.const_shape {values = dense<[4, 1, 200]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v25 = tosa.reshape %v23, %s24 : (tensor<1x4x1x200xf32>, !tosa.shape<3>) -> tensor<4x1x200xf32>
  %v26 = tosa.matmul %v25, %v10, %v11, %v11 : (tensor<4x1x200xf32>, tensor<4x200x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x1x64xf32>
  %s27 = tosa.const_shape {values = dense<[1, 4, 1, 64]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v28 = tosa.reshape %v26, %s27 : (tensor<4x1x64xf32>, !tosa.shape<4>) -> tensor<1x4x1x64xf32>
  return %v28 : tensor<1x4x1x64xf32>
}

// -----

// One head (H = 1) in the 4-D form, f16.
// CHECK-LABEL: func.func @attention_one_head
// CHECK-SAME: (%[[Q:.*]]: tensor<2x1x5x8xf16>, %[[K:.*]]: tensor<2x1x5x8xf16>, %[[V:.*]]: tensor<2x1x5x8xf16>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] {scale = 0.353515625 : f32} : tensor<2x1x5x8xf16>, tensor<2x1x5x8xf16>, tensor<2x1x5x8xf16> -> tensor<2x1x5x8xf16>
// CHECK: return %[[V0]] : tensor<2x1x5x8xf16>
func.func @attention_one_head(%v1: tensor<2x1x5x8xf16>, %v2: tensor<2x1x5x8xf16>, %v3: tensor<2x1x5x8xf16>) -> tensor<2x1x5x8xf16> {
  %s4 = tosa.const_shape {values = dense<[2, 5, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v5 = tosa.reshape %v1, %s4 : (tensor<2x1x5x8xf16>, !tosa.shape<3>) -> tensor<2x5x8xf16>
  %v6 = tosa.transpose %v2 {perms = array<i32: 0, 1, 3, 2>} : (tensor<2x1x5x8xf16>) -> tensor<2x1x8x5xf16>
  %s7 = tosa.const_shape {values = dense<[2, 8, 5]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v8 = tosa.reshape %v6, %s7 : (tensor<2x1x8x5xf16>, !tosa.shape<3>) -> tensor<2x8x5xf16>
  %s9 = tosa.const_shape {values = dense<[2, 5, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v10 = tosa.reshape %v3, %s9 : (tensor<2x1x5x8xf16>, !tosa.shape<3>) -> tensor<2x5x8xf16>
  %v11 = "tosa.const"() <{values = dense<0.0> : tensor<1xf16>}> : () -> tensor<1xf16>
  %v12 = tosa.matmul %v5, %v8, %v11, %v11 : (tensor<2x5x8xf16>, tensor<2x8x5xf16>, tensor<1xf16>, tensor<1xf16>) -> tensor<2x5x5xf16>
  %s13 = tosa.const_shape {values = dense<[2, 1, 5, 5]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v14 = tosa.reshape %v12, %s13 : (tensor<2x5x5xf16>, !tosa.shape<4>) -> tensor<2x1x5x5xf16>
  %v15 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1x1xf16>}> : () -> tensor<1x1x1x1xf16>
  %v16 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v17 = tosa.mul %v14, %v15, %v16 : (tensor<2x1x5x5xf16>, tensor<1x1x1x1xf16>, tensor<1xi8>) -> tensor<2x1x5x5xf16>
  %v18 = tosa.reduce_max %v17 {axis = 3 : i32} : (tensor<2x1x5x5xf16>) -> tensor<2x1x5x1xf16>
  %v19 = tosa.sub %v17, %v18 : (tensor<2x1x5x5xf16>, tensor<2x1x5x1xf16>) -> tensor<2x1x5x5xf16>
  %v20 = tosa.exp %v19 : (tensor<2x1x5x5xf16>) -> tensor<2x1x5x5xf16>
  %v21 = tosa.reduce_sum %v20 {axis = 3 : i32} : (tensor<2x1x5x5xf16>) -> tensor<2x1x5x1xf16>
  %v22 = tosa.reciprocal %v21 : (tensor<2x1x5x1xf16>) -> tensor<2x1x5x1xf16>
  %v23 = tosa.mul %v20, %v22, %v16 : (tensor<2x1x5x5xf16>, tensor<2x1x5x1xf16>, tensor<1xi8>) -> tensor<2x1x5x5xf16>
  %s24 = tosa.const_shape {values = dense<[2, 5, 5]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v25 = tosa.reshape %v23, %s24 : (tensor<2x1x5x5xf16>, !tosa.shape<3>) -> tensor<2x5x5xf16>
  %v26 = tosa.matmul %v25, %v10, %v11, %v11 : (tensor<2x5x5xf16>, tensor<2x5x8xf16>, tensor<1xf16>, tensor<1xf16>) -> tensor<2x5x8xf16>
  %s27 = tosa.const_shape {values = dense<[2, 1, 5, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v28 = tosa.reshape %v26, %s27 : (tensor<2x5x8xf16>, !tosa.shape<4>) -> tensor<2x1x5x8xf16>
  return %v28 : tensor<2x1x5x8xf16>
}

// -----

// masked_fill form: select(upper-triangular constant, -inf, scores) is the
// causal mask too.
// CHECK-LABEL: func.func @attention_masked_fill_causal
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x3x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] {is_causal, scale = 0.353553385 : f32} : tensor<1x2x3x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x3x8xf32>
// CHECK: return %[[V0]] : tensor<1x2x3x8xf32>
func.func @attention_masked_fill_causal(%v1: tensor<1x2x3x8xf32>, %v2: tensor<1x2x4x8xf32>, %v3: tensor<1x2x4x8xf32>) -> tensor<1x2x3x8xf32> {
  %s4 = tosa.const_shape {values = dense<[2, 3, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v5 = tosa.reshape %v1, %s4 : (tensor<1x2x3x8xf32>, !tosa.shape<3>) -> tensor<2x3x8xf32>
  %v6 = tosa.transpose %v2 {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s7 = tosa.const_shape {values = dense<[2, 8, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v8 = tosa.reshape %v6, %s7 : (tensor<1x2x8x4xf32>, !tosa.shape<3>) -> tensor<2x8x4xf32>
  %s9 = tosa.const_shape {values = dense<[2, 4, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v10 = tosa.reshape %v3, %s9 : (tensor<1x2x4x8xf32>, !tosa.shape<3>) -> tensor<2x4x8xf32>
  %v11 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v12 = tosa.matmul %v5, %v8, %v11, %v11 : (tensor<2x3x8xf32>, tensor<2x8x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x3x4xf32>
  %s13 = tosa.const_shape {values = dense<[1, 2, 3, 4]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v14 = tosa.reshape %v12, %s13 : (tensor<2x3x4xf32>, !tosa.shape<4>) -> tensor<1x2x3x4xf32>
  %v15 = "tosa.const"() <{values = dense<0.35355339059327373> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v16 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v17 = tosa.mul %v14, %v15, %v16 : (tensor<1x2x3x4xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x2x3x4xf32>
  %v18 = "tosa.const"() <{values = dense<[[[[false, false, true, true], [false, false, false, true], [false, false, false, false]]]]> : tensor<1x1x3x4xi1>}> : () -> tensor<1x1x3x4xi1>
  %v19 = "tosa.const"() <{values = dense<0xFF800000> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v20 = tosa.select %v18, %v19, %v17 : (tensor<1x1x3x4xi1>, tensor<1x1x1x1xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  %v21 = tosa.reduce_max %v20 {axis = 3 : i32} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x1xf32>
  %v22 = tosa.sub %v20, %v21 : (tensor<1x2x3x4xf32>, tensor<1x2x3x1xf32>) -> tensor<1x2x3x4xf32>
  %v23 = tosa.exp %v22 : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  %v24 = tosa.reduce_sum %v23 {axis = 3 : i32} : (tensor<1x2x3x4xf32>) -> tensor<1x2x3x1xf32>
  %v25 = tosa.reciprocal %v24 : (tensor<1x2x3x1xf32>) -> tensor<1x2x3x1xf32>
  %v26 = tosa.mul %v23, %v25, %v16 : (tensor<1x2x3x4xf32>, tensor<1x2x3x1xf32>, tensor<1xi8>) -> tensor<1x2x3x4xf32>
  %s27 = tosa.const_shape {values = dense<[2, 3, 4]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v28 = tosa.reshape %v26, %s27 : (tensor<1x2x3x4xf32>, !tosa.shape<3>) -> tensor<2x3x4xf32>
  %v29 = tosa.matmul %v28, %v10, %v11, %v11 : (tensor<2x3x4xf32>, tensor<2x4x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x3x8xf32>
  %s30 = tosa.const_shape {values = dense<[1, 2, 3, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v31 = tosa.reshape %v29, %s30 : (tensor<2x3x8xf32>, !tosa.shape<4>) -> tensor<1x2x3x8xf32>
  return %v31 : tensor<1x2x3x8xf32>
}

// -----

// Every form at once: GQA by reshape-tile-reshape, sqrt(scale) on Q and K, K
// stored transposed, causal select and an additive [B, 1, 1, Skv] mask.
// CHECK-LABEL: func.func @attention_combined
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x3x8xf32>, %[[K:.*]]: tensor<2x2x8x5xf32>, %[[V:.*]]: tensor<2x2x5x8xf32>, %[[MASK:.*]]: tensor<2x1x1x5xf32>)
// CHECK-NOT: tosa.matmul
// CHECK: %[[V0:.*]] = tosa.transpose %[[K]] {perms = array<i32: 0, 1, 3, 2>} : (tensor<2x2x8x5xf32>) -> tensor<2x2x5x8xf32>
// CHECK: %[[V1:.*]] = transformer.attention %[[Q]], %[[V0]], %[[V]] mask %[[MASK]] {is_causal, scale = 0.353553355 : f32} : tensor<2x4x3x8xf32>, tensor<2x2x5x8xf32>, tensor<2x2x5x8xf32>, tensor<2x1x1x5xf32> -> tensor<2x4x3x8xf32>
// CHECK: return %[[V1]] : tensor<2x4x3x8xf32>
func.func @attention_combined(%v1: tensor<2x4x3x8xf32>, %v2: tensor<2x2x8x5xf32>, %v3: tensor<2x2x5x8xf32>, %v4: tensor<2x1x1x5xf32>) -> tensor<2x4x3x8xf32> {
  %v5 = "tosa.const"() <{values = dense<0.5946035575013605> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v6 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %v7 = tosa.mul %v1, %v5, %v6 : (tensor<2x4x3x8xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<2x4x3x8xf32>
  %v8 = tosa.mul %v2, %v5, %v6 : (tensor<2x2x8x5xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<2x2x8x5xf32>
  %s9 = tosa.const_shape {values = dense<[2, 2, 1, 8, 5]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v10 = tosa.reshape %v8, %s9 : (tensor<2x2x8x5xf32>, !tosa.shape<5>) -> tensor<2x2x1x8x5xf32>
  %s11 = tosa.const_shape {values = dense<[1, 1, 2, 1, 1]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v12 = tosa.tile %v10, %s11 : (tensor<2x2x1x8x5xf32>, !tosa.shape<5>) -> tensor<2x2x2x8x5xf32>
  %s13 = tosa.const_shape {values = dense<[2, 4, 8, 5]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v14 = tosa.reshape %v12, %s13 : (tensor<2x2x2x8x5xf32>, !tosa.shape<4>) -> tensor<2x4x8x5xf32>
  %s15 = tosa.const_shape {values = dense<[2, 2, 1, 5, 8]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v16 = tosa.reshape %v3, %s15 : (tensor<2x2x5x8xf32>, !tosa.shape<5>) -> tensor<2x2x1x5x8xf32>
  %s17 = tosa.const_shape {values = dense<[1, 1, 2, 1, 1]> : tensor<5xindex>} : () -> !tosa.shape<5>
  %v18 = tosa.tile %v16, %s17 : (tensor<2x2x1x5x8xf32>, !tosa.shape<5>) -> tensor<2x2x2x5x8xf32>
  %s19 = tosa.const_shape {values = dense<[2, 4, 5, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v20 = tosa.reshape %v18, %s19 : (tensor<2x2x2x5x8xf32>, !tosa.shape<4>) -> tensor<2x4x5x8xf32>
  %s21 = tosa.const_shape {values = dense<[8, 3, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v22 = tosa.reshape %v7, %s21 : (tensor<2x4x3x8xf32>, !tosa.shape<3>) -> tensor<8x3x8xf32>
  %s23 = tosa.const_shape {values = dense<[8, 8, 5]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v24 = tosa.reshape %v14, %s23 : (tensor<2x4x8x5xf32>, !tosa.shape<3>) -> tensor<8x8x5xf32>
  %s25 = tosa.const_shape {values = dense<[8, 5, 8]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v26 = tosa.reshape %v20, %s25 : (tensor<2x4x5x8xf32>, !tosa.shape<3>) -> tensor<8x5x8xf32>
  %v27 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %v28 = tosa.matmul %v22, %v24, %v27, %v27 : (tensor<8x3x8xf32>, tensor<8x8x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8x3x5xf32>
  %s29 = tosa.const_shape {values = dense<[2, 4, 3, 5]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v30 = tosa.reshape %v28, %s29 : (tensor<8x3x5xf32>, !tosa.shape<4>) -> tensor<2x4x3x5xf32>
  %v31 = "tosa.const"() <{values = dense<[[[[true, true, true, false, false], [true, true, true, true, false], [true, true, true, true, true]]]]> : tensor<1x1x3x5xi1>}> : () -> tensor<1x1x3x5xi1>
  %v32 = "tosa.const"() <{values = dense<0xFF800000> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v33 = tosa.select %v31, %v30, %v32 : (tensor<1x1x3x5xi1>, tensor<2x4x3x5xf32>, tensor<1x1x1x1xf32>) -> tensor<2x4x3x5xf32>
  %v34 = tosa.add %v4, %v33 : (tensor<2x1x1x5xf32>, tensor<2x4x3x5xf32>) -> tensor<2x4x3x5xf32>
  %v35 = tosa.exp %v34 : (tensor<2x4x3x5xf32>) -> tensor<2x4x3x5xf32>
  %v36 = tosa.reduce_sum %v35 {axis = 3 : i32} : (tensor<2x4x3x5xf32>) -> tensor<2x4x3x1xf32>
  %v37 = tosa.reciprocal %v36 : (tensor<2x4x3x1xf32>) -> tensor<2x4x3x1xf32>
  %v38 = tosa.mul %v35, %v37, %v6 : (tensor<2x4x3x5xf32>, tensor<2x4x3x1xf32>, tensor<1xi8>) -> tensor<2x4x3x5xf32>
  %s39 = tosa.const_shape {values = dense<[8, 3, 5]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v40 = tosa.reshape %v38, %s39 : (tensor<2x4x3x5xf32>, !tosa.shape<3>) -> tensor<8x3x5xf32>
  %v41 = tosa.matmul %v40, %v26, %v27, %v27 : (tensor<8x3x5xf32>, tensor<8x5x8xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<8x3x8xf32>
  %s42 = tosa.const_shape {values = dense<[2, 4, 3, 8]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v43 = tosa.reshape %v41, %s42 : (tensor<8x3x8xf32>, !tosa.shape<4>) -> tensor<2x4x3x8xf32>
  return %v43 : tensor<2x4x3x8xf32>
}

// -----

// Gemma 2: the scaled scores soft-capped, tanh(s * (1/50)) * 50, before the
// additive mask; the cap becomes the op's softcap.
// CHECK-LABEL: func.func @attention_softcap_mask
// CHECK-NOT: tosa.tanh
// CHECK: transformer.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 2.500000e-01 : f32, softcap = 5.000000e+01 : f32} : tensor<2x3x5x16xf32>, tensor<2x3x7x16xf32>, tensor<2x3x7x16xf32>, tensor<2x1x1x7xf32> -> tensor<2x3x5x16xf32>
// CHECK-NOT: tosa.tanh
func.func @attention_softcap_mask(%q: tensor<6x5x16xf32>, %k: tensor<6x7x16xf32>, %v: tensor<6x7x16xf32>, %m: tensor<2x1x1x7xf32>) -> tensor<6x5x16xf32> {
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %kt = tosa.transpose %k {perms = array<i32: 0, 2, 1>} : (tensor<6x7x16xf32>) -> tensor<6x16x7xf32>
  %s = tosa.matmul %q, %kt, %zp, %zp : (tensor<6x5x16xf32>, tensor<6x16x7xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<6x5x7xf32>
  %s4shape = tosa.const_shape {values = dense<[2, 3, 5, 7]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %s4 = tosa.reshape %s, %s4shape : (tensor<6x5x7xf32>, !tosa.shape<4>) -> tensor<2x3x5x7xf32>
  %scale = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %scaled = tosa.mul %s4, %scale, %shift : (tensor<2x3x5x7xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<2x3x5x7xf32>
  %inv = "tosa.const"() <{values = dense<0.02> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %cap = "tosa.const"() <{values = dense<50.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %u = tosa.mul %scaled, %inv, %shift : (tensor<2x3x5x7xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<2x3x5x7xf32>
  %t = tosa.tanh %u : (tensor<2x3x5x7xf32>) -> tensor<2x3x5x7xf32>
  %c = tosa.mul %cap, %t, %shift : (tensor<1x1x1x1xf32>, tensor<2x3x5x7xf32>, tensor<1xi8>) -> tensor<2x3x5x7xf32>
  %masked = tosa.add %c, %m : (tensor<2x3x5x7xf32>, tensor<2x1x1x7xf32>) -> tensor<2x3x5x7xf32>
  %p = transformer.softmax %masked {dimension = 3 : i64} : tensor<2x3x5x7xf32> -> tensor<2x3x5x7xf32>
  %p3shape = tosa.const_shape {values = dense<[6, 5, 7]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %p3 = tosa.reshape %p, %p3shape : (tensor<2x3x5x7xf32>, !tosa.shape<3>) -> tensor<6x5x7xf32>
  %o = tosa.matmul %p3, %v, %zp, %zp : (tensor<6x5x7xf32>, tensor<6x7x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<6x5x16xf32>
  return %o : tensor<6x5x16xf32>
}
