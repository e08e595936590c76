// examples/gpt-layer: pre-LN layer norms and a causal attention written as
// select(tril, scores * reciprocal(sqrt(D)), finfo.min) are found; the values
// are kept.
//
// RUN: tfc-opt %tfc_src_root/examples/gpt-layer/gpt_layer.mlir --transformer-fuse="explain-missed=1" | FileCheck %s
// RUN: tfc-opt %tfc_src_root/examples/gpt-layer/gpt_layer.mlir --mlir-print-op-generic > %t.ref
// RUN: tfc-opt %tfc_src_root/examples/gpt-layer/gpt_layer.mlir --transformer-fuse --mlir-print-op-generic > %t.fused
// RUN: python3 -m tfc_testing.tosa_eval compare %t.ref %t.fused --tol 1e-6 | FileCheck %s --check-prefix=NUMERIC

// CHECK-LABEL: func.func @gpt_layer
// CHECK-SAME: (%[[X:[^:]*]]: tensor<1x16x64xf32>
// CHECK: transformer.layer_norm %[[X]], %{{.*}}, %{{.*}} : tensor<1x16x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<1x16x64xf32>
// CHECK-NOT: tosa.select
// CHECK: transformer.attention %{{.*}}, %{{.*}}, %{{.*}} {is_causal, scale = 2.500000e-01 : f32} : tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32> -> tensor<1x4x16x16xf32>
// CHECK: transformer.layer_norm
// CHECK: tosa.tanh
// CHECK-NOT: tosa.exp
// CHECK-NOT: tosa.rsqrt

// NUMERIC: gpt_layer ok
