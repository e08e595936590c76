// Attention on the CPU: the kernels take an f32 mask; an f16 op's query
// and result are widened to f32 around it, its keys and values go to the
// kernel as they are (the _f32_f16 entry: a decoder's cache is not
// widened). A bf16 op goes to the _bf16 entry whole, Q, K, V and result
// as they are, with TFC_UK_ATTENTION_BF16 = 2 in its flags beside
// TFC_UK_ATTENTION_MASK = 1 (it may multiply the values as bf16 pairs); a
// bf16 mask is widened, and without one a 4-byte f32 stand-in (never read)
// takes its place. f16 values are not marked.
// RUN: tfc-opt %s --split-input-file --convert-transformer-to-cpu | FileCheck %s
// RUN: tfc-opt %s --split-input-file --pass-pipeline="builtin.module(convert-transformer-to-cpu,func.func(tosa-to-linalg,tosa-to-arith,tosa-to-tensor),one-shot-bufferize{bufferize-function-boundaries})" | FileCheck %s --check-prefix=CALL

// CHECK-LABEL: func.func @attention_f32_masked
// CHECK: transformer.attention
// CHECK-NOT: tfc.bf16_values
// CALL-LABEL: func.func @attention_f32_masked
// CALL: %[[FLAGS:[^ ]+]] = arith.constant 1 : i32
// CALL: call @tfc_uk_attention_f32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[FLAGS]],
func.func @attention_f32_masked(%q: tensor<1x2x9x16xf32>, %k: tensor<1x2x9x16xf32>, %v: tensor<1x2x9x16xf32>, %m: tensor<1x1x9x9xf32>) -> tensor<1x2x9x16xf32> {
  %o = transformer.attention %q, %k, %v mask %m : tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32>, tensor<1x1x9x9xf32> -> tensor<1x2x9x16xf32>
  return %o : tensor<1x2x9x16xf32>
}

// -----

// CHECK-LABEL: func.func @attention_bf16
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x9x16xbf16>, %[[K:.*]]: tensor<1x2x9x16xbf16>, %[[V:.*]]: tensor<1x2x9x16xbf16>)
// CHECK-NOT: tosa.cast
// CHECK: %[[O:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] {{.*}}is_causal{{.*}} : tensor<1x2x9x16xbf16>, tensor<1x2x9x16xbf16>, tensor<1x2x9x16xbf16> -> tensor<1x2x9x16xbf16>
// CHECK-NEXT: return %[[O]]
// CALL-LABEL: func.func @attention_bf16
// CALL: %[[NOMASK:.*]] = memref.alloca() : memref<1x1x1x1xf32>
// CALL: %[[M:.*]] = memref.cast %[[NOMASK]]
// CALL: %[[FLAGS:[^ ]+]] = arith.constant 2 : i32
// CALL: call @tfc_uk_attention_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %[[M]], %{{.*}}, %{{.*}}, %[[FLAGS]], {{.*}} : (memref<?x?x?x?xbf16, {{.*}}>, memref<?x?x?x?xbf16, {{.*}}>, memref<?x?x?x?xbf16, {{.*}}>, memref<?x?x?x?xf32, {{.*}}>, memref<?x?x?x?xbf16,
func.func @attention_bf16(%q: tensor<1x2x9x16xbf16>, %k: tensor<1x2x9x16xbf16>, %v: tensor<1x2x9x16xbf16>) -> tensor<1x2x9x16xbf16> {
  %o = transformer.attention %q, %k, %v {is_causal} : tensor<1x2x9x16xbf16>, tensor<1x2x9x16xbf16>, tensor<1x2x9x16xbf16> -> tensor<1x2x9x16xbf16>
  return %o : tensor<1x2x9x16xbf16>
}

// -----

// A bf16 mask (rank 2) is widened to f32 and made rank 4; the rest stays
// bf16 (TFC_UK_ATTENTION_MASK | TFC_UK_ATTENTION_BF16 = 3).
// CHECK-LABEL: func.func @attention_bf16_masked
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x9x16xbf16>, %[[K:.*]]: tensor<1x2x9x16xbf16>, %[[V:.*]]: tensor<1x2x9x16xbf16>, %[[M:.*]]: tensor<9x9xbf16>)
// CHECK: %[[M32:.*]] = tosa.cast %[[M]] : (tensor<9x9xbf16>) -> tensor<9x9xf32>
// CHECK: %[[M4:.*]] = tosa.reshape %[[M32]]
// CHECK: %[[O:.*]] = transformer.attention %[[Q]], %[[K]], %[[V]] mask %[[M4]] {{.*}}tfc.bf16_values{{.*}} : tensor<1x2x9x16xbf16>, tensor<1x2x9x16xbf16>, tensor<1x2x9x16xbf16>, tensor<1x1x9x9xf32> -> tensor<1x2x9x16xbf16>
// CHECK-NEXT: return %[[O]]
// CALL-LABEL: func.func @attention_bf16_masked
// CALL: %[[FLAGS:[^ ]+]] = arith.constant 3 : i32
// CALL: call @tfc_uk_attention_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[FLAGS]],
func.func @attention_bf16_masked(%q: tensor<1x2x9x16xbf16>, %k: tensor<1x2x9x16xbf16>, %v: tensor<1x2x9x16xbf16>, %m: tensor<9x9xbf16>) -> tensor<1x2x9x16xbf16> {
  %o = transformer.attention %q, %k, %v mask %m : tensor<1x2x9x16xbf16>, tensor<1x2x9x16xbf16>, tensor<1x2x9x16xbf16>, tensor<9x9xbf16> -> tensor<1x2x9x16xbf16>
  return %o : tensor<1x2x9x16xbf16>
}

// -----

// CHECK-LABEL: func.func @attention_f16
// CHECK: transformer.attention {{.*}} : tensor<1x2x9x16xf32>, tensor<1x2x9x16xf16>, tensor<1x2x9x16xf16> -> tensor<1x2x9x16xf32>
// CHECK-NOT: tfc.bf16_values
// CALL-LABEL: func.func @attention_f16
// CALL: %[[FLAGS:[^ ]+]] = arith.constant 0 : i32
// CALL: call @tfc_uk_attention_f32_f16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[FLAGS]],
func.func @attention_f16(%q: tensor<1x2x9x16xf16>, %k: tensor<1x2x9x16xf16>, %v: tensor<1x2x9x16xf16>) -> tensor<1x2x9x16xf16> {
  %o = transformer.attention %q, %k, %v : tensor<1x2x9x16xf16>, tensor<1x2x9x16xf16>, tensor<1x2x9x16xf16> -> tensor<1x2x9x16xf16>
  return %o : tensor<1x2x9x16xf16>
}
