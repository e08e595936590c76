// A GPT-2 style decoder layer (pre-LN) at toy size: hidden 64, 4 heads of
// 16, sequence 16, MLP 256, batch 1. Causal attention written as
// where(tril, scores / sqrt(D), finfo.min) with tosa.select, softmax and
// LayerNorm spelled out in primitives, tanh GELU. Weights are function
// arguments.
func.func @gpt_layer(
    %hidden: tensor<1x16x64xf32>,
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
  // pre-LN: LayerNorm before attention, eps 1e-5
  %v1 = "tosa.const"() <{values = dense<0.015625> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v2 = tosa.reduce_sum %hidden {axis = 2 : i32} : (tensor<1x16x64xf32>) -> tensor<1x16x1xf32>
  %v3 = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %ln1_mean = tosa.mul %v2, %v1, %v3 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x1xf32>
  %ln1_centred = tosa.sub %hidden, %ln1_mean : (tensor<1x16x64xf32>, tensor<1x16x1xf32>) -> tensor<1x16x64xf32>
  %v6 = tosa.mul %ln1_centred, %ln1_centred, %v3 : (tensor<1x16x64xf32>, tensor<1x16x64xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %v7 = tosa.reduce_sum %v6 {axis = 2 : i32} : (tensor<1x16x64xf32>) -> tensor<1x16x1xf32>
  %ln1_var = tosa.mul %v7, %v1, %v3 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x1xf32>
  %v9 = "tosa.const"() <{values = dense<1.0e-05> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v10 = tosa.add %ln1_var, %v9 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>) -> tensor<1x16x1xf32>
  %ln1_rstd = tosa.rsqrt %v10 : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %v12 = tosa.mul %ln1_centred, %ln1_rstd, %v3 : (tensor<1x16x64xf32>, tensor<1x16x1xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %s13 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v14 = tosa.reshape %ln1_gamma, %s13 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %v15 = tosa.mul %v12, %v14, %v3 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %s16 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v17 = tosa.reshape %ln1_beta, %s16 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %ln1 = tosa.add %v15, %v17 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  // Q, K, V projections, split into heads: [1, S, H] -> [1, NH, S, D]
  %s19 = tosa.const_shape {values = dense<[1, 64, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v20 = tosa.reshape %wq, %s19 : (tensor<64x64xf32>, !tosa.shape<3>) -> tensor<1x64x64xf32>
  %v21 = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %q_proj_mm = tosa.matmul %ln1, %v20, %v21, %v21 : (tensor<1x16x64xf32>, tensor<1x64x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s23 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v24 = tosa.reshape %bq, %s23 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %q_proj = tosa.add %q_proj_mm, %v24 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  %s26 = tosa.const_shape {values = dense<[1, 16, 4, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v27 = tosa.reshape %q_proj, %s26 : (tensor<1x16x64xf32>, !tosa.shape<4>) -> tensor<1x16x4x16xf32>
  %q = tosa.transpose %v27 {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x16x4x16xf32>) -> tensor<1x4x16x16xf32>
  %s29 = tosa.const_shape {values = dense<[1, 64, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v30 = tosa.reshape %wk, %s29 : (tensor<64x64xf32>, !tosa.shape<3>) -> tensor<1x64x64xf32>
  %k_proj_mm = tosa.matmul %ln1, %v30, %v21, %v21 : (tensor<1x16x64xf32>, tensor<1x64x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s32 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v33 = tosa.reshape %bk, %s32 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %k_proj = tosa.add %k_proj_mm, %v33 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  %s35 = tosa.const_shape {values = dense<[1, 16, 4, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v36 = tosa.reshape %k_proj, %s35 : (tensor<1x16x64xf32>, !tosa.shape<4>) -> tensor<1x16x4x16xf32>
  %k = tosa.transpose %v36 {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x16x4x16xf32>) -> tensor<1x4x16x16xf32>
  %s38 = tosa.const_shape {values = dense<[1, 64, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v39 = tosa.reshape %wv, %s38 : (tensor<64x64xf32>, !tosa.shape<3>) -> tensor<1x64x64xf32>
  %v_proj_mm = tosa.matmul %ln1, %v39, %v21, %v21 : (tensor<1x16x64xf32>, tensor<1x64x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s41 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v42 = tosa.reshape %bv, %s41 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %v_proj = tosa.add %v_proj_mm, %v42 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  %s44 = tosa.const_shape {values = dense<[1, 16, 4, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v45 = tosa.reshape %v_proj, %s44 : (tensor<1x16x64xf32>, !tosa.shape<4>) -> tensor<1x16x4x16xf32>
  %v = tosa.transpose %v45 {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x16x4x16xf32>) -> tensor<1x4x16x16xf32>
  // scores = Q . K^T through 3-D matmuls over [NH, S, D]
  %s47 = tosa.const_shape {values = dense<[4, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v48 = tosa.reshape %q, %s47 : (tensor<1x4x16x16xf32>, !tosa.shape<3>) -> tensor<4x16x16xf32>
  %k_t = tosa.transpose %k {perms = array<i32: 0, 1, 3, 2>} : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %s50 = tosa.const_shape {values = dense<[4, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v51 = tosa.reshape %k_t, %s50 : (tensor<1x4x16x16xf32>, !tosa.shape<3>) -> tensor<4x16x16xf32>
  %v52 = tosa.matmul %v48, %v51, %v21, %v21 : (tensor<4x16x16xf32>, tensor<4x16x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x16x16xf32>
  %s53 = tosa.const_shape {values = dense<[1, 4, 16, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %scores = tosa.reshape %v52, %s53 : (tensor<4x16x16xf32>, !tosa.shape<4>) -> tensor<1x4x16x16xf32>
  // GPT-2: divide by sqrt(D), then where(causal, w, finfo.min)
  %v55 = "tosa.const"() <{values = dense<4.0> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %v56 = tosa.reciprocal %v55 : (tensor<1x1x1x1xf32>) -> tensor<1x1x1x1xf32>
  %scaled = tosa.mul %scores, %v56, %v3 : (tensor<1x4x16x16xf32>, tensor<1x1x1x1xf32>, tensor<1xi8>) -> tensor<1x4x16x16xf32>
  %causal = "tosa.const"() <{values = dense<[[[[true, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false, false, false, false, false, false, false, false, false], [true, true, true, false, false, false, false, false, false, false, false, false, false, false, false, false], [true, true, true, true, false, false, false, false, false, false, false, false, false, false, false, false], [true, true, true, true, true, false, false, false, false, false, false, false, false, false, false, false], [true, true, true, true, true, true, false, false, false, false, false, false, false, false, false, false], [true, true, true, true, true, true, true, false, false, false, false, false, false, false, false, false], [true, true, true, true, true, true, true, true, false, false, false, false, false, false, false, false], [true, true, true, true, true, true, true, true, true, false, false, false, false, false, false, false], [true, true, true, true, true, true, true, true, true, true, false, false, false, false, false, false], [true, true, true, true, true, true, true, true, true, true, true, false, false, false, false, false], [true, true, true, true, true, true, true, true, true, true, true, true, false, false, false, false], [true, true, true, true, true, true, true, true, true, true, true, true, true, false, false, false], [true, true, true, true, true, true, true, true, true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true]]]]> : tensor<1x1x16x16xi1>}> : () -> tensor<1x1x16x16xi1>
  %v59 = "tosa.const"() <{values = dense<-3.4028234663852886e+38> : tensor<1x1x1x1xf32>}> : () -> tensor<1x1x1x1xf32>
  %masked = tosa.select %causal, %scaled, %v59 : (tensor<1x1x16x16xi1>, tensor<1x4x16x16xf32>, tensor<1x1x1x1xf32>) -> tensor<1x4x16x16xf32>
  %v61 = tosa.reduce_max %masked {axis = 3 : i32} : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x1xf32>
  %v62 = tosa.sub %masked, %v61 : (tensor<1x4x16x16xf32>, tensor<1x4x16x1xf32>) -> tensor<1x4x16x16xf32>
  %v63 = tosa.exp %v62 : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
  %v64 = tosa.reduce_sum %v63 {axis = 3 : i32} : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x1xf32>
  %v65 = tosa.reciprocal %v64 : (tensor<1x4x16x1xf32>) -> tensor<1x4x16x1xf32>
  %probs = tosa.mul %v63, %v65, %v3 : (tensor<1x4x16x16xf32>, tensor<1x4x16x1xf32>, tensor<1xi8>) -> tensor<1x4x16x16xf32>
  // context = probs . V, heads merged back: [1, S, H]
  %s67 = tosa.const_shape {values = dense<[4, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v68 = tosa.reshape %probs, %s67 : (tensor<1x4x16x16xf32>, !tosa.shape<3>) -> tensor<4x16x16xf32>
  %s69 = tosa.const_shape {values = dense<[4, 16, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v70 = tosa.reshape %v, %s69 : (tensor<1x4x16x16xf32>, !tosa.shape<3>) -> tensor<4x16x16xf32>
  %v71 = tosa.matmul %v68, %v70, %v21, %v21 : (tensor<4x16x16xf32>, tensor<4x16x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x16x16xf32>
  %s72 = tosa.const_shape {values = dense<[1, 4, 16, 16]> : tensor<4xindex>} : () -> !tosa.shape<4>
  %v73 = tosa.reshape %v71, %s72 : (tensor<4x16x16xf32>, !tosa.shape<4>) -> tensor<1x4x16x16xf32>
  %context = tosa.transpose %v73 {perms = array<i32: 0, 2, 1, 3>} : (tensor<1x4x16x16xf32>) -> tensor<1x16x4x16xf32>
  %s75 = tosa.const_shape {values = dense<[1, 16, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v76 = tosa.reshape %context, %s75 : (tensor<1x16x4x16xf32>, !tosa.shape<3>) -> tensor<1x16x64xf32>
  %s77 = tosa.const_shape {values = dense<[1, 64, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v78 = tosa.reshape %wo, %s77 : (tensor<64x64xf32>, !tosa.shape<3>) -> tensor<1x64x64xf32>
  %attn_out_mm = tosa.matmul %v76, %v78, %v21, %v21 : (tensor<1x16x64xf32>, tensor<1x64x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s80 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v81 = tosa.reshape %bo, %s80 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %attn_out = tosa.add %attn_out_mm, %v81 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  %res1 = tosa.add %hidden, %attn_out : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  // pre-LN MLP with tanh GELU (gelu_new)
  %v84 = "tosa.const"() <{values = dense<0.015625> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v85 = tosa.reduce_sum %res1 {axis = 2 : i32} : (tensor<1x16x64xf32>) -> tensor<1x16x1xf32>
  %ln2_mean = tosa.mul %v85, %v84, %v3 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x1xf32>
  %ln2_centred = tosa.sub %res1, %ln2_mean : (tensor<1x16x64xf32>, tensor<1x16x1xf32>) -> tensor<1x16x64xf32>
  %v88 = tosa.mul %ln2_centred, %ln2_centred, %v3 : (tensor<1x16x64xf32>, tensor<1x16x64xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %v89 = tosa.reduce_sum %v88 {axis = 2 : i32} : (tensor<1x16x64xf32>) -> tensor<1x16x1xf32>
  %ln2_var = tosa.mul %v89, %v84, %v3 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x1xf32>
  %v91 = "tosa.const"() <{values = dense<1.0e-05> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v92 = tosa.add %ln2_var, %v91 : (tensor<1x16x1xf32>, tensor<1x1x1xf32>) -> tensor<1x16x1xf32>
  %ln2_rstd = tosa.rsqrt %v92 : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %v94 = tosa.mul %ln2_centred, %ln2_rstd, %v3 : (tensor<1x16x64xf32>, tensor<1x16x1xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %s95 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v96 = tosa.reshape %ln2_gamma, %s95 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %v97 = tosa.mul %v94, %v96, %v3 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>, tensor<1xi8>) -> tensor<1x16x64xf32>
  %s98 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v99 = tosa.reshape %ln2_beta, %s98 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %ln2 = tosa.add %v97, %v99 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  %s101 = tosa.const_shape {values = dense<[1, 64, 256]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v102 = tosa.reshape %w1, %s101 : (tensor<64x256xf32>, !tosa.shape<3>) -> tensor<1x64x256xf32>
  %mlp_in_mm = tosa.matmul %ln2, %v102, %v21, %v21 : (tensor<1x16x64xf32>, tensor<1x64x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x256xf32>
  %s104 = tosa.const_shape {values = dense<[1, 1, 256]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v105 = tosa.reshape %b1, %s104 : (tensor<256xf32>, !tosa.shape<3>) -> tensor<1x1x256xf32>
  %mlp_in = tosa.add %mlp_in_mm, %v105 : (tensor<1x16x256xf32>, tensor<1x1x256xf32>) -> tensor<1x16x256xf32>
  %v107 = "tosa.const"() <{values = dense<3.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v108 = tosa.pow %mlp_in, %v107 : (tensor<1x16x256xf32>, tensor<1x1x1xf32>) -> tensor<1x16x256xf32>
  %v109 = "tosa.const"() <{values = dense<0.044715> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v110 = tosa.mul %v108, %v109, %v3 : (tensor<1x16x256xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x256xf32>
  %v111 = tosa.add %mlp_in, %v110 : (tensor<1x16x256xf32>, tensor<1x16x256xf32>) -> tensor<1x16x256xf32>
  %v112 = "tosa.const"() <{values = dense<0.7978845608028654> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v113 = tosa.mul %v111, %v112, %v3 : (tensor<1x16x256xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x256xf32>
  %v114 = tosa.tanh %v113 : (tensor<1x16x256xf32>) -> tensor<1x16x256xf32>
  %v115 = "tosa.const"() <{values = dense<0.5> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v116 = tosa.mul %mlp_in, %v115, %v3 : (tensor<1x16x256xf32>, tensor<1x1x1xf32>, tensor<1xi8>) -> tensor<1x16x256xf32>
  %v117 = "tosa.const"() <{values = dense<1.0> : tensor<1x1x1xf32>}> : () -> tensor<1x1x1xf32>
  %v118 = tosa.add %v114, %v117 : (tensor<1x16x256xf32>, tensor<1x1x1xf32>) -> tensor<1x16x256xf32>
  %gelu = tosa.mul %v116, %v118, %v3 : (tensor<1x16x256xf32>, tensor<1x16x256xf32>, tensor<1xi8>) -> tensor<1x16x256xf32>
  %s120 = tosa.const_shape {values = dense<[1, 256, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v121 = tosa.reshape %w2, %s120 : (tensor<256x64xf32>, !tosa.shape<3>) -> tensor<1x256x64xf32>
  %mlp_out_mm = tosa.matmul %gelu, %v121, %v21, %v21 : (tensor<1x16x256xf32>, tensor<1x256x64xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16x64xf32>
  %s123 = tosa.const_shape {values = dense<[1, 1, 64]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %v124 = tosa.reshape %b2, %s123 : (tensor<64xf32>, !tosa.shape<3>) -> tensor<1x1x64xf32>
  %mlp_out = tosa.add %mlp_out_mm, %v124 : (tensor<1x16x64xf32>, tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
  %res2 = tosa.add %res1, %mlp_out : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
  return %res2 : tensor<1x16x64xf32>
}
