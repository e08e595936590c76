// RUN: tfc-opt %s --split-input-file --transformer-fuse-layer-norm | FileCheck %s
//
// A half-precision model's LayerNorm computes in f32 between casts (as
// tfc-import --dtype writes it); a layer_norm of f16/bf16 is defined the
// same way (f32 statistics, one rounding at the end), so the casts fold
// into it. Numerics: tests/Integration/CPU/gpt2.py (f16, bf16; CPU and PTX
// interpreter).

// CHECK-LABEL: func.func @layer_norm_f16_between_casts
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf16>, %[[G:.*]]: tensor<8xf16>, %[[B:.*]]: tensor<8xf16>)
// CHECK-NEXT: %[[Y:.*]] = transformer.layer_norm %[[X]], %[[G]], %[[B]] : tensor<2x8xf16>, tensor<8xf16>, tensor<8xf16> -> tensor<2x8xf16>
// CHECK-NEXT: return %[[Y]]
// (epsilon 1e-5, the default, is not printed)
func.func @layer_norm_f16_between_casts(%x: tensor<2x8xf16>, %g: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<2x8xf16> {
  %x32 = tosa.cast %x : (tensor<2x8xf16>) -> tensor<2x8xf32>
  %g32 = tosa.cast %g : (tensor<8xf16>) -> tensor<8xf32>
  %b32 = tosa.cast %b : (tensor<8xf16>) -> tensor<8xf32>
  %y = transformer.layer_norm %x32, %g32, %b32 {epsilon = 1.0e-5 : f32} : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %o = tosa.cast %y : (tensor<2x8xf32>) -> tensor<2x8xf16>
  return %o : tensor<2x8xf16>
}

// -----

// bf16 the same.
// CHECK-LABEL: func.func @layer_norm_bf16_between_casts
// CHECK: transformer.layer_norm {{.*}} -> tensor<3x4xbf16>
// CHECK-NOT: tosa.cast
func.func @layer_norm_bf16_between_casts(%x: tensor<3x4xbf16>, %g: tensor<4xbf16>, %b: tensor<4xbf16>) -> tensor<3x4xbf16> {
  %x32 = tosa.cast %x : (tensor<3x4xbf16>) -> tensor<3x4xf32>
  %g32 = tosa.cast %g : (tensor<4xbf16>) -> tensor<4xf32>
  %b32 = tosa.cast %b : (tensor<4xbf16>) -> tensor<4xf32>
  %y = transformer.layer_norm %x32, %g32, %b32 : tensor<3x4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %o = tosa.cast %y : (tensor<3x4xf32>) -> tensor<3x4xbf16>
  return %o : tensor<3x4xbf16>
}

// -----

// gamma in f32 (not cast from f16): rounding it to f16 would change the
// result; nothing folds.
// CHECK-LABEL: func.func @negative_f32_gamma
// CHECK: transformer.layer_norm {{.*}} -> tensor<2x8xf32>
// CHECK: tosa.cast
func.func @negative_f32_gamma(%x: tensor<2x8xf16>, %g: tensor<8xf32>, %b: tensor<8xf16>) -> tensor<2x8xf16> {
  %x32 = tosa.cast %x : (tensor<2x8xf16>) -> tensor<2x8xf32>
  %b32 = tosa.cast %b : (tensor<8xf16>) -> tensor<8xf32>
  %y = transformer.layer_norm %x32, %g, %b32 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %o = tosa.cast %y : (tensor<2x8xf32>) -> tensor<2x8xf16>
  return %o : tensor<2x8xf16>
}

// -----

// The f32 result has another use: the f32 layer_norm stays.
// CHECK-LABEL: func.func @negative_f32_result_used
// CHECK: transformer.layer_norm {{.*}} -> tensor<2x8xf32>
func.func @negative_f32_result_used(%x: tensor<2x8xf16>, %g: tensor<8xf16>, %b: tensor<8xf16>) -> (tensor<2x8xf16>, tensor<2x8xf32>) {
  %x32 = tosa.cast %x : (tensor<2x8xf16>) -> tensor<2x8xf32>
  %g32 = tosa.cast %g : (tensor<8xf16>) -> tensor<8xf32>
  %b32 = tosa.cast %b : (tensor<8xf16>) -> tensor<8xf32>
  %y = transformer.layer_norm %x32, %g32, %b32 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %o = tosa.cast %y : (tensor<2x8xf32>) -> tensor<2x8xf16>
  return %o, %y : tensor<2x8xf16>, tensor<2x8xf32>
}
