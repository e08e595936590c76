// RUN: tfc-opt %s --split-input-file --transformer-fuse-rms-norm | FileCheck %s
//
// A half-precision LLaMA's RMSNorm (transformers' LlamaRMSNorm, and
// tfc-import --dtype): f32 statistics between casts, the normalised value
// rounded back before gamma multiplies it in the narrow type. The rms_norm of
// f16/bf16 is defined with exactly these roundings, so the casts fold into
// it. Numerics: tests/Integration/CPU/kernels.py (bit-equality with the
// rounded reference) and llama.py (f16, bf16; CPU and PTX interpreter).

// CHECK-LABEL: func.func @rms_norm_f16_llama
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf16>, %[[G:.*]]: tensor<8xf16>)
// CHECK-NEXT: %[[Y:.*]] = transformer.rms_norm %[[X]], %[[G]] : tensor<2x8xf16>, tensor<8xf16> -> tensor<2x8xf16>
// CHECK-NEXT: return %[[Y]]
func.func @rms_norm_f16_llama(%x: tensor<2x8xf16>, %g: tensor<8xf16>) -> tensor<2x8xf16> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv_n = "tosa.const"() <{values = dense<0.125> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-6> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %gs = tosa.const_shape {values = dense<[1, 8]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %x32 = tosa.cast %x : (tensor<2x8xf16>) -> tensor<2x8xf32>
  %sq = tosa.mul %x32, %x32, %shift : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<1xi8>) -> tensor<2x8xf32>
  %s = tosa.reduce_sum %sq {axis = 1 : i32} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %ms = tosa.mul %s, %inv_n, %shift : (tensor<2x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<2x1xf32>
  %e = tosa.add %ms, %eps : (tensor<2x1xf32>, tensor<1x1xf32>) -> tensor<2x1xf32>
  %r = tosa.rsqrt %e : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = tosa.mul %x32, %r, %shift : (tensor<2x8xf32>, tensor<2x1xf32>, tensor<1xi8>) -> tensor<2x8xf32>
  %n16 = tosa.cast %n : (tensor<2x8xf32>) -> tensor<2x8xf16>
  %g2 = tosa.reshape %g, %gs : (tensor<8xf16>, !tosa.shape<2>) -> tensor<1x8xf16>
  %y = tosa.mul %g2, %n16, %shift : (tensor<1x8xf16>, tensor<2x8xf16>, tensor<1xi8>) -> tensor<2x8xf16>
  return %y : tensor<2x8xf16>
}

// -----

// gamma multiplied in f32 before the rounding (another model's RMSNorm): an
// f32 rms_norm of the widened input, the cast stays after it.
// CHECK-LABEL: func.func @rms_norm_gamma_in_f32
// CHECK: %[[X32:.*]] = tosa.cast %{{.*}} : (tensor<2x8xbf16>) -> tensor<2x8xf32>
// CHECK: %[[Y:.*]] = transformer.rms_norm %[[X32]], %{{.*}} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
// CHECK: tosa.cast %[[Y]] : (tensor<2x8xf32>) -> tensor<2x8xbf16>
func.func @rms_norm_gamma_in_f32(%x: tensor<2x8xbf16>, %g: tensor<1x8xf32>) -> tensor<2x8xbf16> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv_n = "tosa.const"() <{values = dense<0.125> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-6> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %x32 = tosa.cast %x : (tensor<2x8xbf16>) -> tensor<2x8xf32>
  %sq = tosa.mul %x32, %x32, %shift : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<1xi8>) -> tensor<2x8xf32>
  %s = tosa.reduce_sum %sq {axis = 1 : i32} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %ms = tosa.mul %s, %inv_n, %shift : (tensor<2x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<2x1xf32>
  %e = tosa.add %ms, %eps : (tensor<2x1xf32>, tensor<1x1xf32>) -> tensor<2x1xf32>
  %r = tosa.rsqrt %e : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = tosa.mul %x32, %r, %shift : (tensor<2x8xf32>, tensor<2x1xf32>, tensor<1xi8>) -> tensor<2x8xf32>
  %y32 = tosa.mul %n, %g, %shift : (tensor<2x8xf32>, tensor<1x8xf32>, tensor<1xi8>) -> tensor<2x8xf32>
  %y = tosa.cast %y32 : (tensor<2x8xf32>) -> tensor<2x8xbf16>
  return %y : tensor<2x8xbf16>
}

// -----

// bf16 without gamma: the rounding is the whole definition's tail.
// CHECK-LABEL: func.func @rms_norm_bf16_no_gamma
// CHECK: transformer.rms_norm %{{.*}}, %{{.*}} : tensor<3x4xbf16>, tensor<4xbf16> -> tensor<3x4xbf16>
// CHECK-NOT: tosa.cast
func.func @rms_norm_bf16_no_gamma(%x: tensor<3x4xbf16>) -> tensor<3x4xbf16> {
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %inv_n = "tosa.const"() <{values = dense<0.25> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %eps = "tosa.const"() <{values = dense<1.0e-5> : tensor<1x1xf32>}> : () -> tensor<1x1xf32>
  %x32 = tosa.cast %x : (tensor<3x4xbf16>) -> tensor<3x4xf32>
  %sq = tosa.mul %x32, %x32, %shift : (tensor<3x4xf32>, tensor<3x4xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  %s = tosa.reduce_sum %sq {axis = 1 : i32} : (tensor<3x4xf32>) -> tensor<3x1xf32>
  %ms = tosa.mul %s, %inv_n, %shift : (tensor<3x1xf32>, tensor<1x1xf32>, tensor<1xi8>) -> tensor<3x1xf32>
  %e = tosa.add %ms, %eps : (tensor<3x1xf32>, tensor<1x1xf32>) -> tensor<3x1xf32>
  %r = tosa.rsqrt %e : (tensor<3x1xf32>) -> tensor<3x1xf32>
  %n = tosa.mul %x32, %r, %shift : (tensor<3x4xf32>, tensor<3x1xf32>, tensor<1xi8>) -> tensor<3x4xf32>
  %y = tosa.cast %n : (tensor<3x4xf32>) -> tensor<3x4xbf16>
  return %y : tensor<3x4xbf16>
}
