// A BERT-base style encoder layer (post-LN) at toy size: hidden 64, 4 heads
// of 16, sequence 16, FFN 256, batch 1. Written the way a TOSA exporter
// writes it: 3-D matmuls, heads split and merged by reshape + transpose,
// scale as a mul, additive extended mask, softmax and LayerNorm spelled out
// in primitives. Weights are function arguments (bound by name at load).
func.func @bert_layer(
    %hidden: tensor<1x16x64xf32>,
    %attention_mask: tensor<1x16xf32>,
    %wq: tensor<64x64xf32>,
    %bq: tensor<64xf32>,
    %wk: tensor<64x64xf32>,
    %bk: tensor<64xf32>,
    %wv: tensor<64x64xf32>,
    %bv: tensor<64xf32>,
    %wo: tensor<64x64xf32>,
    %bo: tensor<64xf32>,
    %ln1_gamma: tensor<64xf32>,
    %ln1_beta: tensor<64xf32>,
    %w1: tensor<64x256xf32>,
    %b1: tensor<256xf32>,
    %w2: tensor<256x64xf32>,
    %b2: tensor<64xf32>,
    %ln2_gamma: tensor<64xf32>,
    %ln2_beta: tensor<64xf32>) -> tensor<1x16x64xf32> {
  // extended attention mask: (1 - mask) * -10000, [1, S] -> [1, 1, 1, S]
  %s1 = tosa.const_shape {values = dense<[1, 1, 1, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v2 = tosa.reshape %attention_mask, %s1 : (tensor<1x16xf32>, !tosa.shape<4>) -> tensor<1x1x1x16xf32>
  %v3 = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v4 = tosa.sub %v3, %v2 : (tensor<1x1x1x1xf32>, tensor<1x1x1x16xf32>) -> tensor<1x1x1x16xf32>
  %v5 = "tosa.const"() <{values = dense<-10000.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v6 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %ext_mask = tosa.mul %v4, %v5, %v6 : (tensor<1x1x1x16xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x1x1x16xf32>
  // Q, K, V projections, split into heads: [1, S, H] -> [1, NH, S, D]
  %s8 = tosa.const_shape {values = dense<[1, 64, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v9 = tosa.reshape %wq, %s8 : (tensor<64x64xf32>, !tosa.shape<3>) -> tensor<1x64x64xf32>
  %v10 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %q_proj_mm = tosa.matmul %hidden, %v9, %v10, %v10 : (tensor<1x16x64xf32>, tensor<1x64x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s12 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v13 = tosa.reshape %bq, %s12 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %q_proj = tosa.add %q_proj_mm, %v13 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  %s15 = tosa.const_shape {values = dense<[1, 16, 4, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v16 = tosa.reshape %q_proj, %s15 : (tensor<1x16x64xf32>, !tosa.shape<4>) -> tensor<1x16x4x16xf32>
  %q = tosa.transpose %v16 {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x16x4x16xf32>) -> tensor<1x4x16x16xf32>
  %s18 = tosa.const_shape {values = dense<[1, 64, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v19 = tosa.reshape %wk, %s18 : (tensor<64x64xf32>, !tosa.shape<3>) -> tensor<1x64x64xf32>
  %k_proj_mm = tosa.matmul %hidden, %v19, %v10, %v10 : (tensor<1x16x64xf32>, tensor<1x64x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s21 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v22 = tosa.reshape %bk, %s21 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %k_proj = tosa.add %k_proj_mm, %v22 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  %s24 = tosa.const_shape {values = dense<[1, 16, 4, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v25 = tosa.reshape %k_proj, %s24 : (tensor<1x16x64xf32>, !tosa.shape<4>) -> tensor<1x16x4x16xf32>
  %k = tosa.transpose %v25 {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x16x4x16xf32>) -> tensor<1x4x16x16xf32>
  %s27 = tosa.const_shape {values = dense<[1, 64, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v28 = tosa.reshape %wv, %s27 : (tensor<64x64xf32>, !tosa.shape<3>) -> tensor<1x64x64xf32>
  %v_proj_mm = tosa.matmul %hidden, %v28, %v10, %v10 : (tensor<1x16x64xf32>, tensor<1x64x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s30 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v31 = tosa.reshape %bv, %s30 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %v_proj = tosa.add %v_proj_mm, %v31 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  %s33 = tosa.const_shape {values = dense<[1, 16, 4, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v34 = tosa.reshape %v_proj, %s33 : (tensor<1x16x64xf32>, !tosa.shape<4>) -> tensor<1x16x4x16xf32>
  %v = tosa.transpose %v34 {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x16x4x16xf32>) -> tensor<1x4x16x16xf32>
  // scores = Q . K^T through 3-D matmuls over [NH, S, D]
  %s36 = tosa.const_shape {values = dense<[4, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v37 = tosa.reshape %q, %s36 : (tensor<1x4x16x16xf32>, !tosa.shape<3>) -> tensor<4x16x16xf32>
  %k_t = tosa.transpose %k {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %s39 = tosa.const_shape {values = dense<[4, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v40 = tosa.reshape %k_t, %s39 : (tensor<1x4x16x16xf32>, !tosa.shape<3>) -> tensor<4x16x16xf32>
  %v41 = tosa.matmul %v37, %v40, %v10, %v10 : (tensor<4x16x16xf32>, tensor<4x16x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x16x16xf32>
  %s42 = tosa.const_shape {values = dense<[1, 4, 16, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %scores = tosa.reshape %v41, %s42 : (tensor<4x16x16xf32>, !tosa.shape<4>) -> tensor<1x4x16x16xf32>
  // BERT: scale by 1/sqrt(D), add the extended attention mask
  %v44 = "tosa.const"() <{values = dense<0.25> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %scaled = tosa.mul %scores, %v44, %v6 : (tensor<1x4x16x16xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x4x16x16xf32>
  %masked = tosa.add %scaled, %ext_mask : (tensor<1x4x16x16xf32>, tensor<1x1x1x16xf32>) -> tensor<1x4x16x16xf32>
  %v47 = tosa.reduce_max %masked {axis = 3 : i32} : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x1xf32>
  %v48 = tosa.sub %masked, %v47 : (tensor<1x4x16x16xf32>, tensor<1x4x16x1xf32>) -> tensor<1x4x16x16xf32>
  %v49 = tosa.exp %v48 : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %v50 = tosa.reduce_sum %v49 {axis = 3 : i32} : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x1xf32>
  %v51 = tosa.reciprocal %v50 : (tensor<1x4x16x1xf32>) -> tensor<1x4x16x1xf32>
  %probs = tosa.mul %v49, %v51, %v6 : (tensor<1x4x16x16xf32>, tensor<1x4x16x1xf32>, tensor<1xi8>) -> tensor<1x4x16x16xf32>
  // context = probs . V, heads merged back: [1, S, H]
  %s53 = tosa.const_shape {values = dense<[4, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v54 = tosa.reshape %probs, %s53 : (tensor<1x4x16x16xf32>, !tosa.shape<3>) -> tensor<4x16x16xf32>
  %s55 = tosa.const_shape {values = dense<[4, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v56 = tosa.reshape %v, %s55 : (tensor<1x4x16x16xf32>, !tosa.shape<3>) -> tensor<4x16x16xf32>
  %v57 = tosa.matmul %v54, %v56, %v10, %v10 : (tensor<4x16x16xf32>, tensor<4x16x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x16x16xf32>
  %s58 = tosa.const_shape {values = dense<[1, 4, 16, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v59 = tosa.reshape %v57, %s58 : (tensor<4x16x16xf32>, !tosa.shape<4>) -> tensor<1x4x16x16xf32>
  %context = tosa.transpose %v59 {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x4x16x16xf32>) -> tensor<1x16x4x16xf32>
  %s61 = tosa.const_shape {values = dense<[1, 16, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v62 = tosa.reshape %context, %s61 : (tensor<1x16x4x16xf32>, !tosa.shape<3>) -> tensor<1x16x64xf32>
  %s63 = tosa.const_shape {values = dense<[1, 64, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v64 = tosa.reshape %wo, %s63 : (tensor<64x64xf32>, !tosa.shape<3>) -> tensor<1x64x64xf32>
  %attn_out_mm = tosa.matmul %v62, %v64, %v10, %v10 : (tensor<1x16x64xf32>, tensor<1x64x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s66 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v67 = tosa.reshape %bo, %s66 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %attn_out = tosa.add %attn_out_mm, %v67 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  // residual + LayerNorm (post-LN), eps 1e-12
  %res1 = tosa.add %attn_out, %hidden : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  %v70 = "tosa.const"() <{values = dense<0.015625> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v71 = tosa.reduce_sum %res1 {axis = 2 : i32} : (tensor<1x16x64xf32>) -> tensor<1x16x1xf32>
  %ln1_mean = tosa.mul %v71, %v70, %v6 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x1xf32>
  %ln1_centred = tosa.sub %res1, %ln1_mean : (tensor<1x16x64xf32>, tensor<1x16x1xf32>) -> tensor<1x16x64xf32>
  %v74 = tosa.mul %ln1_centred, %ln1_centred, %v6 : (tensor<1x16x64xf32>, tensor<1x16x64xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %v75 = tosa.reduce_sum %v74 {axis = 2 : i32} : (tensor<1x16x64xf32>) -> tensor<1x16x1xf32>
  %ln1_var = tosa.mul %v75, %v70, %v6 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x1xf32>
  %v77 = "tosa.const"() <{values = dense<1.0e-12> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v78 = tosa.add %ln1_var, %v77 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>) -> tensor<1x16x1xf32>
  %ln1_rstd = tosa.rsqrt %v78 : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %v80 = tosa.mul %ln1_centred, %ln1_rstd, %v6 : (tensor<1x16x64xf32>, tensor<1x16x1xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %s81 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v82 = tosa.reshape %ln1_gamma, %s81 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %v83 = tosa.mul %v80, %v82, %v6 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %s84 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v85 = tosa.reshape %ln1_beta, %s84 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %ln1 = tosa.add %v83, %v85 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  // feed-forward with exact GELU (erf)
  %s87 = tosa.const_shape {values = dense<[1, 64, 256]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v88 = tosa.reshape %w1, %s87 : (tensor<64x256xf32>, !tosa.shape<3>) -> tensor<1x64x256xf32>
  %ffn_in_mm = tosa.matmul %ln1, %v88, %v10, %v10 : (tensor<1x16x64xf32>, tensor<1x64x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x256xf32>
  %s90 = tosa.const_shape {values = dense<[1, 1, 256]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v91 = tosa.reshape %b1, %s90 : (tensor<256xf32>, !tosa.shape<3>) -> tensor<1x1x256xf32>
  %ffn_in = tosa.add %ffn_in_mm, %v91 : (tensor<1x16x256xf32>, tensor<1x1x256xf32>) -> tensor<1x16x256xf32>
  %v93 = "tosa.const"() <{values = dense<0.7071067811865475> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v94 = tosa.mul %ffn_in, %v93, %v6 : (tensor<1x16x256xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x256xf32>
  %v95 = tosa.erf %v94 : (tensor<1x16x256xf32>) -> tensor<1x16x256xf32>
  %v96 = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v97 = tosa.add %v95, %v96 : (tensor<1x16x256xf32>, tensor<1x1x1xf32>) -> tensor<1x16x256xf32>
  %v98 = "tosa.const"() <{values = dense<0.5> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v99 = tosa.mul %ffn_in, %v98, %v6 : (tensor<1x16x256xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x256xf32>
  %gelu = tosa.mul %v99, %v97, %v6 : (tensor<1x16x256xf32>, tensor<1x16x256xf32>, tensor<1xi8>) -> tensor<1x16x256xf32>
  %s101 = tosa.const_shape {values = dense<[1, 256, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v102 = tosa.reshape %w2, %s101 : (tensor<256x64xf32>, !tosa.shape<3>) -> tensor<1x256x64xf32>
  %ffn_out_mm = tosa.matmul %gelu, %v102, %v10, %v10 : (tensor<1x16x256xf32>, tensor<1x256x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s104 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v105 = tosa.reshape %b2, %s104 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %ffn_out = tosa.add %ffn_out_mm, %v105 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  // residual + LayerNorm
  %res2 = tosa.add %ffn_out, %ln1 : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  %v108 = "tosa.const"() <{values = dense<0.015625> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v109 = tosa.reduce_sum %res2 {axis = 2 : i32} : (tensor<1x16x64xf32>) -> tensor<1x16x1xf32>
  %ln2_mean = tosa.mul %v109, %v108, %v6 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x1xf32>
  %ln2_centred = tosa.sub %res2, %ln2_mean : (tensor<1x16x64xf32>, tensor<1x16x1xf32>) -> tensor<1x16x64xf32>
  %v112 = tosa.mul %ln2_centred, %ln2_centred, %v6 : (tensor<1x16x64xf32>, tensor<1x16x64xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %v113 = tosa.reduce_sum %v112 {axis = 2 : i32} : (tensor<1x16x64xf32>) -> tensor<1x16x1xf32>
  %ln2_var = tosa.mul %v113, %v108, %v6 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x1xf32>
  %v115 = "tosa.const"() <{values = dense<1.0e-12> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v116 = tosa.add %ln2_var, %v115 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>) -> tensor<1x16x1xf32>
  %ln2_rstd = tosa.rsqrt %v116 : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %v118 = tosa.mul %ln2_centred, %ln2_rstd, %v6 : (tensor<1x16x64xf32>, tensor<1x16x1xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %s119 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v120 = tosa.reshape %ln2_gamma, %s119 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %v121 = tosa.mul %v118, %v120, %v6 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %s122 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v123 = tosa.reshape %ln2_beta, %s122 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %ln2 = tosa.add %v121, %v123 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  return %ln2 : tensor<1x16x64xf32>
}
