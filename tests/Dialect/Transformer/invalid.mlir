// RUN: tfc-opt %s -split-input-file -verify-diagnostics

func.func @negative_query_rank(%q: tensor<4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{query must have rank 4 [B, Hq, Sq, D], got 'tensor<4x8x16xf32>'}}
  %o = transformer.attention %q, %k, %v : tensor<4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_key_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{key must have rank 4 [B, Hkv, Skv, D]}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_value_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16x1xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{value must have rank 4 [B, Hkv, Skv, Dv]}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16x1xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_key_value_element_types(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf16>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{value element type 'f32' differs from key element type 'f16'}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf16>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_value_element_type(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xbf16>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{value element type 'bf16' differs from key element type 'f32'}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xbf16> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

// 16-bit keys and values are only allowed under an f32 query.
func.func @negative_key_element_type(%q: tensor<1x4x8x16xf16>, %k: tensor<1x2x10x16xbf16>, %v: tensor<1x2x10x16xbf16>) -> tensor<1x4x8x16xf16> {
  // expected-error @+1 {{key element type 'bf16' differs from query element type 'f16' (only an f32 query may take f16 or bf16 keys)}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf16>, tensor<1x2x10x16xbf16>, tensor<1x2x10x16xbf16> -> tensor<1x4x8x16xf16>
  return %o : tensor<1x4x8x16xf16>
}

// -----

func.func @negative_f32_keys_under_f16_query(%q: tensor<1x4x8x16xf16>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf16> {
  // expected-error @+1 {{key element type 'f32' differs from query element type 'f16'}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf16>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf16>
  return %o : tensor<1x4x8x16xf16>
}

// -----

func.func @negative_key_batch(%q: tensor<1x4x8x16xf32>, %k: tensor<3x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{key must have shape [B, Hkv, Skv, D] = [1, 2, 10, 16] (batch and head dim from query), got [3, 2, 10, 16]}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<3x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_key_head_dim(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x15xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{key must have shape [B, Hkv, Skv, D] = [1, 2, 10, 16]}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x10x15xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_value_keys(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x11x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{value must have shape [B, Hkv, Skv, Dv] = [1, 2, 10, 16] (batch, heads and keys from key), got [1, 2, 11, 16]}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x11x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_value_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x4x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{value must have shape [B, Hkv, Skv, Dv] = [1, 2, 10, 16]}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x4x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_heads_not_dividing(%q: tensor<1x4x8x16xf32>, %k: tensor<1x3x10x16xf32>, %v: tensor<1x3x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{key/value heads (3) must divide query heads (4)}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x3x10x16xf32>, tensor<1x3x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_mask_element_type(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>, %m: tensor<1x1x8x10xf16>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{mask element type 'f16' differs from query element type 'f32' (only f32 may mask a query of another type)}}
  %o = transformer.attention %q, %k, %v mask %m : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32>, tensor<1x1x8x10xf16> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_mask_shape(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>, %m: tensor<1x1x8x9xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{mask of shape [1, 1, 8, 9] is not broadcastable to [B, Hq, Sq, Skv] = [1, 4, 8, 10]}}
  %o = transformer.attention %q, %k, %v mask %m : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32>, tensor<1x1x8x9xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_mask_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>, %m: tensor<1x2x8x10xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{mask of shape [1, 2, 8, 10] is not broadcastable to [B, Hq, Sq, Skv] = [1, 4, 8, 10]}}
  %o = transformer.attention %q, %k, %v mask %m : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x8x10xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_mask_rank(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>, %m: tensor<1x1x1x8x10xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{mask of shape [1, 1, 1, 8, 10] is not broadcastable}}
  %o = transformer.attention %q, %k, %v mask %m : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32>, tensor<1x1x1x8x10xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_scale_zero(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{scale must be finite and non-zero, got 0}}
  %o = transformer.attention %q, %k, %v {scale = 0.0 : f32} : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_scale_inf(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{scale must be finite and non-zero, got INF}}
  %o = transformer.attention %q, %k, %v {scale = 0x7F800000 : f32} : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_softcap_zero(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{softcap must be finite and positive, got 0}}
  %o = transformer.attention %q, %k, %v {softcap = 0.0 : f32} : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_softcap_negative(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{softcap must be finite and positive, got -3}}
  %o = transformer.attention %q, %k, %v {softcap = -3.0 : f32} : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_window_zero(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{window must be positive, got 0}}
  %o = transformer.attention %q, %k, %v {window = 0 : i64} : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_result_shape(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x15xf32> {
  // expected-error @+1 {{result must have shape [B, Hq, Sq, Dv] = [1, 4, 8, 16] of 'f32', got 'tensor<1x4x8x15xf32>'}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x15xf32>
  return %o : tensor<1x4x8x15xf32>
}

// -----

func.func @negative_result_element_type(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf16> {
  // expected-error @+1 {{result must have shape [B, Hq, Sq, Dv] = [1, 4, 8, 16] of 'f32'}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xf32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf16>
  return %o : tensor<1x4x8x16xf16>
}

// -----

func.func @negative_integer_query(%q: tensor<1x4x8x16xi32>, %k: tensor<1x2x10x16xf32>, %v: tensor<1x2x10x16xf32>) -> tensor<1x4x8x16xf32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values}}
  %o = transformer.attention %q, %k, %v : tensor<1x4x8x16xi32>, tensor<1x2x10x16xf32>, tensor<1x2x10x16xf32> -> tensor<1x4x8x16xf32>
  return %o : tensor<1x4x8x16xf32>
}

// -----

func.func @negative_softmax_dimension(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{dimension 2 is out of range [0, 2) for input 'tensor<4x10xf32>'}}
  %y = transformer.softmax %x {dimension = 2 : i64} : tensor<4x10xf32> -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

func.func @negative_softmax_negative_dimension(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{dimension -1 is out of range [0, 2)}}
  %y = transformer.softmax %x {dimension = -1 : i64} : tensor<4x10xf32> -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

func.func @negative_softmax_rank0(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{input must have rank at least 1}}
  %y = transformer.softmax %x {dimension = 0 : i64} : tensor<f32> -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @negative_softmax_result_type(%x: tensor<4x10xf32>) -> tensor<4x11xf32> {
  // expected-error @+1 {{result type 'tensor<4x11xf32>' must equal input type 'tensor<4x10xf32>'}}
  %y = transformer.softmax %x {dimension = 1 : i64} : tensor<4x10xf32> -> tensor<4x11xf32>
  return %y : tensor<4x11xf32>
}

// -----

func.func @negative_layer_norm_gamma_rank(%x: tensor<2x8xf32>, %g: tensor<1x8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{gamma must have shape [N] = [8] (the last dimension of input), got [1, 8]}}
  %y = transformer.layer_norm %x, %g, %b : tensor<2x8xf32>, tensor<1x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @negative_layer_norm_gamma_size(%x: tensor<2x8xf32>, %g: tensor<7xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{gamma must have shape [N] = [8] (the last dimension of input), got [7]}}
  %y = transformer.layer_norm %x, %g, %b : tensor<2x8xf32>, tensor<7xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @negative_layer_norm_beta_size(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<9xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{beta must have shape [N] = [8] (the last dimension of input), got [9]}}
  %y = transformer.layer_norm %x, %g, %b : tensor<2x8xf32>, tensor<8xf32>, tensor<9xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @negative_layer_norm_gamma_type(%x: tensor<2x8xf32>, %g: tensor<8xf16>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{gamma element type 'f16' differs from input element type 'f32'}}
  %y = transformer.layer_norm %x, %g, %b : tensor<2x8xf32>, tensor<8xf16>, tensor<8xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @negative_layer_norm_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{epsilon must be finite and non-negative, got -1}}
  %y = transformer.layer_norm %x, %g, %b {epsilon = -1.0 : f32} : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @negative_layer_norm_rank0(%x: tensor<f32>, %g: tensor<1xf32>, %b: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+1 {{input must have rank at least 1}}
  %y = transformer.layer_norm %x, %g, %b : tensor<f32>, tensor<1xf32>, tensor<1xf32> -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @negative_layer_norm_result_type(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf16> {
  // expected-error @+1 {{result type 'tensor<2x8xf16>' must equal input type 'tensor<2x8xf32>'}}
  %y = transformer.layer_norm %x, %g, %b : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x8xf16>
  return %y : tensor<2x8xf16>
}

// -----

func.func @negative_rms_norm_gamma_size(%x: tensor<2x8xf32>, %g: tensor<7xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{gamma must have shape [N] = [8] (the last dimension of input), got [7]}}
  %y = transformer.rms_norm %x, %g : tensor<2x8xf32>, tensor<7xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @negative_rms_norm_gamma_type(%x: tensor<2x8xf16>, %g: tensor<8xf32>) -> tensor<2x8xf16> {
  // expected-error @+1 {{gamma element type 'f32' differs from input element type 'f16'}}
  %y = transformer.rms_norm %x, %g : tensor<2x8xf16>, tensor<8xf32> -> tensor<2x8xf16>
  return %y : tensor<2x8xf16>
}

// -----

func.func @negative_rms_norm_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{epsilon must be finite and non-negative, got -1}}
  %y = transformer.rms_norm %x, %g {epsilon = -1.0 : f32} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @negative_rms_norm_rank0(%x: tensor<f32>, %g: tensor<1xf32>) -> tensor<f32> {
  // expected-error @+1 {{input must have rank at least 1}}
  %y = transformer.rms_norm %x, %g : tensor<f32>, tensor<1xf32> -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @negative_rms_norm_result_type(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xbf16> {
  // expected-error @+1 {{result type 'tensor<2x8xbf16>' must equal input type 'tensor<2x8xf32>'}}
  %y = transformer.rms_norm %x, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xbf16>
  return %y : tensor<2x8xbf16>
}


// -----

func.func @attention_zero_head_dim(%q: tensor<1x2x3x0xf32>, %k: tensor<1x2x5x0xf32>, %v: tensor<1x2x5x16xf32>) -> tensor<1x2x3x16xf32> {
  // expected-error @+1 {{head dimension (query and key dim 3) must be positive, got 0}}
  %o = transformer.attention %q, %k, %v : tensor<1x2x3x0xf32>, tensor<1x2x5x0xf32>, tensor<1x2x5x16xf32> -> tensor<1x2x3x16xf32>
  return %o : tensor<1x2x3x16xf32>
}

// -----

func.func @all_gather_not_a_multiple(%x: tensor<2x3xf32>) -> tensor<2x7xf32> {
  // expected-error @+1 {{result type 'tensor<2x7xf32>' must be the input type 'tensor<2x3xf32>' with its last axis a multiple of the input's}}
  %y = transformer.all_gather %x : tensor<2x3xf32> -> tensor<2x7xf32>
  return %y : tensor<2x7xf32>
}

// -----

func.func @all_gather_other_rows(%x: tensor<2x3xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{with its last axis a multiple of the input's}}
  %y = transformer.all_gather %x : tensor<2x3xf32> -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

func.func @all_gather_other_type(%x: tensor<2x3xf32>) -> tensor<2x6xf16> {
  // expected-error @+1 {{with its last axis a multiple of the input's}}
  %y = transformer.all_gather %x : tensor<2x3xf32> -> tensor<2x6xf16>
  return %y : tensor<2x6xf16>
}

// -----

func.func @parallel_rank_two() -> tensor<2xi32> {
  // expected-error @+1 {{result must be tensor<1xi32>, got 'tensor<2xi32>'}}
  %r = transformer.parallel_rank : tensor<2xi32>
  return %r : tensor<2xi32>
}
