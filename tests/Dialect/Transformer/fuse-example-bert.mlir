// examples/bert-layer: one attention (4-D through reshapes, scale, additive
// extended mask) and two post-LN layer norms are found; the values are kept.
//
// RUN: tfc-opt %tfc_src_root/examples/bert-layer/bert_layer.mlir --transformer-fuse="explain-missed=1" | FileCheck %s
// RUN: tfc-opt %tfc_src_root/examples/bert-layer/bert_layer.mlir --mlir-print-op-generic > %t.ref
// RUN: tfc-opt %tfc_src_root/examples/bert-layer/bert_layer.mlir --transformer-fuse --mlir-print-op-generic > %t.fused
// RUN: python3 -m tfc_testing.tosa_eval compare %t.ref %t.fused --binary-args 1 --tol 1e-6 | FileCheck %s --check-prefix=NUMERIC

// CHECK-LABEL: func.func @bert_layer
// CHECK-NOT: tosa.exp
// CHECK: transformer.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 2.500000e-01 : f32} : tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x1x1x16xf32> -> tensor<1x4x16x16xf32>
// CHECK-NOT: tosa.rsqrt
// CHECK: transformer.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999996E-13 : f32} : tensor<1x16x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<1x16x64xf32>
// CHECK: tosa.erf
// CHECK: transformer.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.99999996E-13 : f32}
// CHECK-NOT: tosa.rsqrt
// CHECK-NOT: tosa.exp

// NUMERIC: bert_layer ok
