// RUN: tfc-opt %s | tfc-opt | FileCheck %s
// RUN: tfc-opt %s --mlir-print-op-generic | tfc-opt | FileCheck %s

// CHECK-LABEL: func @attention_plain
// CHECK: transformer.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x16x32xf32>, tensor<2x4x24x32xf32>, tensor<2x4x24x8xf32> -> tensor<2x4x16x8xf32>
func.func @attention_plain(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x24x32xf32>, %v: tensor<2x4x24x8xf32>) -> tensor<2x4x16x8xf32> {
  %o = transformer.attention %q, %k, %v : tensor<2x4x16x32xf32>, tensor<2x4x24x32xf32>, tensor<2x4x24x8xf32> -> tensor<2x4x16x8xf32>
  return %o : tensor<2x4x16x8xf32>
}

// CHECK-LABEL: func @attention_gqa_mask_causal
// CHECK: transformer.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {is_causal, scale = 1.250000e-01 : f32} : tensor<1x12x77x64xf32>, tensor<1x4x200x64xf32>, tensor<1x4x200x64xf32>, tensor<1x1x77x200xf32> -> tensor<1x12x77x64xf32>
func.func @attention_gqa_mask_causal(%q: tensor<1x12x77x64xf32>, %k: tensor<1x4x200x64xf32>, %v: tensor<1x4x200x64xf32>, %m: tensor<1x1x77x200xf32>) -> tensor<1x12x77x64xf32> {
  %o = transformer.attention %q, %k, %v mask %m {is_causal, scale = 0.125 : f32} : tensor<1x12x77x64xf32>, tensor<1x4x200x64xf32>, tensor<1x4x200x64xf32>, tensor<1x1x77x200xf32> -> tensor<1x12x77x64xf32>
  return %o : tensor<1x12x77x64xf32>
}

// CHECK-LABEL: func @attention_f16_mask_rank2
// CHECK: transformer.attention {{.*}} mask {{.*}} : tensor<1x2x1x80xf16>, tensor<1x2x5x80xf16>, tensor<1x2x5x80xf16>, tensor<1x5xf16> -> tensor<1x2x1x80xf16>
func.func @attention_f16_mask_rank2(%q: tensor<1x2x1x80xf16>, %k: tensor<1x2x5x80xf16>, %v: tensor<1x2x5x80xf16>, %m: tensor<1x5xf16>) -> tensor<1x2x1x80xf16> {
  %o = transformer.attention %q, %k, %v mask %m : tensor<1x2x1x80xf16>, tensor<1x2x5x80xf16>, tensor<1x2x5x80xf16>, tensor<1x5xf16> -> tensor<1x2x1x80xf16>
  return %o : tensor<1x2x1x80xf16>
}

// An f32 mask under a bf16 query (the CPU kernels' form).
// CHECK-LABEL: func @attention_bf16_f32_mask
// CHECK: transformer.attention {{.*}} mask {{.*}} : tensor<1x2x3x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x1x3x5xf32> -> tensor<1x2x3x8xbf16>
func.func @attention_bf16_f32_mask(%q: tensor<1x2x3x8xbf16>, %k: tensor<1x2x5x8xbf16>, %v: tensor<1x2x5x8xbf16>, %m: tensor<1x1x3x5xf32>) -> tensor<1x2x3x8xbf16> {
  %o = transformer.attention %q, %k, %v mask %m : tensor<1x2x3x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x2x5x8xbf16>, tensor<1x1x3x5xf32> -> tensor<1x2x3x8xbf16>
  return %o : tensor<1x2x3x8xbf16>
}

// CHECK-LABEL: func @attention_bf16_dynamic
// CHECK: transformer.attention {{.*}} : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16> -> tensor<?x8x?x64xbf16>
func.func @attention_bf16_dynamic(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x2x?x64xbf16>, %v: tensor<?x2x?x64xbf16>) -> tensor<?x8x?x64xbf16> {
  %o = transformer.attention %q, %k, %v {is_causal} : tensor<?x8x?x64xbf16>, tensor<?x2x?x64xbf16>, tensor<?x2x?x64xbf16> -> tensor<?x8x?x64xbf16>
  return %o : tensor<?x8x?x64xbf16>
}

// CHECK-LABEL: func @softmax
// CHECK: transformer.softmax %{{.*}} {dimension = 1 : i64} : tensor<4x10xf32> -> tensor<4x10xf32>
func.func @softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %y = transformer.softmax %x {dimension = 1 : i64} : tensor<4x10xf32> -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// CHECK-LABEL: func @softmax_f16_first_dim
// CHECK: transformer.softmax %{{.*}} {dimension = 0 : i64} : tensor<7xf16> -> tensor<7xf16>
func.func @softmax_f16_first_dim(%x: tensor<7xf16>) -> tensor<7xf16> {
  %y = transformer.softmax %x {dimension = 0 : i64} : tensor<7xf16> -> tensor<7xf16>
  return %y : tensor<7xf16>
}

// CHECK-LABEL: func @layer_norm
// CHECK: transformer.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999996E-13 : f32} : tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<8xbf16> -> tensor<2x3x8xbf16>
func.func @layer_norm(%x: tensor<2x3x8xbf16>, %g: tensor<8xbf16>, %b: tensor<8xbf16>) -> tensor<2x3x8xbf16> {
  %y = transformer.layer_norm %x, %g, %b {epsilon = 1.0e-12 : f32} : tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<8xbf16> -> tensor<2x3x8xbf16>
  return %y : tensor<2x3x8xbf16>
}

// CHECK-LABEL: func @layer_norm_default_epsilon
// CHECK: transformer.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<5x384xf32>
func.func @layer_norm_default_epsilon(%x: tensor<5x384xf32>, %g: tensor<384xf32>, %b: tensor<384xf32>) -> tensor<5x384xf32> {
  %y = transformer.layer_norm %x, %g, %b : tensor<5x384xf32>, tensor<384xf32>, tensor<384xf32> -> tensor<5x384xf32>
  return %y : tensor<5x384xf32>
}

// CHECK-LABEL: func @rms_norm
// CHECK: transformer.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.99999974E-6 : f32} : tensor<2x3x8xf16>, tensor<8xf16> -> tensor<2x3x8xf16>
func.func @rms_norm(%x: tensor<2x3x8xf16>, %g: tensor<8xf16>) -> tensor<2x3x8xf16> {
  %y = transformer.rms_norm %x, %g {epsilon = 1.0e-5 : f32} : tensor<2x3x8xf16>, tensor<8xf16> -> tensor<2x3x8xf16>
  return %y : tensor<2x3x8xf16>
}

// CHECK-LABEL: func @rms_norm_default_epsilon
// CHECK: transformer.rms_norm %{{.*}}, %{{.*}} : tensor<5x4096xf32>
func.func @rms_norm_default_epsilon(%x: tensor<5x4096xf32>, %g: tensor<4096xf32>) -> tensor<5x4096xf32> {
  %y = transformer.rms_norm %x, %g : tensor<5x4096xf32>, tensor<4096xf32> -> tensor<5x4096xf32>
  return %y : tensor<5x4096xf32>
}

// CHECK-LABEL: func @all_gather
// CHECK: transformer.all_gather %{{.*}} : tensor<1x4x5xf16> -> tensor<1x4x10xf16>
func.func @all_gather(%x: tensor<1x4x5xf16>) -> tensor<1x4x10xf16> {
  %y = transformer.all_gather %x : tensor<1x4x5xf16> -> tensor<1x4x10xf16>
  return %y : tensor<1x4x10xf16>
}

// CHECK-LABEL: func @parallel_rank
// CHECK: transformer.parallel_rank : tensor<1xi32>
func.func @parallel_rank() -> tensor<1xi32> {
  %r = transformer.parallel_rank : tensor<1xi32>
  return %r : tensor<1xi32>
}
