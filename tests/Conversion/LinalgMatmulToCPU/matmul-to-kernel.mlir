// RUN: tfc-opt %s --convert-linalg-matmul-to-cpu | FileCheck %s
// RUN: tfc-opt %s --convert-linalg-matmul-to-cpu=quantize-weights=int8 | FileCheck %s --check-prefix=INT8
// RUN: tfc-opt %s --convert-linalg-matmul-to-cpu=quantize-weights=int4 | FileCheck %s --check-prefix=INT4
// RUN: not tfc-opt %s --convert-linalg-matmul-to-cpu=quantize-weights=int3 2>&1 | FileCheck %s --check-prefix=BADQ
// RUN: tfc-opt %s --convert-linalg-matmul-to-cpu="quantize-weights=int8 quantize-activations=int8" | FileCheck %s --check-prefix=INT8A8
// RUN: tfc-opt %s --convert-linalg-matmul-to-cpu="quantize-weights=int4 quantize-activations=int8" | FileCheck %s --check-prefix=INT4A8
// RUN: not tfc-opt %s --convert-linalg-matmul-to-cpu="quantize-weights=int8 quantize-activations=int4" 2>&1 | FileCheck %s --check-prefix=BADA
// RUN: not tfc-opt %s --convert-linalg-matmul-to-cpu=quantize-activations=int8 2>&1 | FileCheck %s --check-prefix=ANOW
//
// With quantize-weights=int8 the weights (and only they) are quantized as
// the kernel packs them: flag 4 next to 2, constant.
// INT8-LABEL: func.func @f16_weight
// INT8: arith.constant 7 : i32
// INT8-LABEL: func.func @f32_weight
// INT8: arith.constant 7 : i32
// INT8-LABEL: func.func @bf16_activations
// INT8: arith.constant 1 : i32
// ... with int4, flag 8.
// INT4-LABEL: func.func @f32_weight
// INT4: arith.constant 11 : i32
// INT4-LABEL: func.func @bf16_activations
// INT4: arith.constant 1 : i32
// BADQ: for the --quantize-weights option: Cannot find option named 'int3'!
// With quantize-activations=int8 as well, flag 16 joins the weight's: the
// products of a weight only (activations times activations stay f32).
// INT8A8-LABEL: func.func @f32_weight
// INT8A8: arith.constant 23 : i32
// INT8A8-LABEL: func.func @bf16_activations
// INT8A8: arith.constant 1 : i32
// INT4A8-LABEL: func.func @f32_weight
// INT4A8: arith.constant 27 : i32
// INT4A8-LABEL: func.func @bf16_activations
// INT4A8: arith.constant 1 : i32
// BADA: for the --quantize-activations option: Cannot find option named 'int4'!
// ANOW: error: convert-linalg-matmul-to-cpu: quantize-activations=int8 needs quantize-weights=int8 or int4
//
// Matmuls with an f32 result go to the packed f32 GEMM micro-kernel. An
// f16 (bf16) B goes to the kernel's _f32_f16 (_f32_bf16) variant as it is
// (the kernel packs it in 16-bit panels, a weight once: flag 2, constant,
// and widens them as it loads them); an f16 A is widened into an f32
// temporary, freed after the call.

// CHECK-LABEL: func.func @f16_weight
// CHECK: %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x16x32xf32>
// CHECK: linalg.generic {{.*}} ins(%arg0 : memref<2x16x32xf16>) outs(%[[A]] : memref<2x16x32xf32>)
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK-NOT: memref.alloc
// CHECK: %[[B:.*]] = memref.cast %arg1 : memref<2x32x24xf16> to memref<?x?x?xf16, strided<[?, ?, ?], offset: ?>>
// CHECK: %[[FLAGS:.*]] = arith.constant 3 : i32
// CHECK-NEXT: call @tfc_uk_batch_matmul_f32_f16({{.*}}, %[[B]], {{.*}}, %[[FLAGS]])
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: return
// The f32 weight is constant (1 | 2).
// CHECK-LABEL: func.func @f32_weight
// CHECK-NOT: memref.alloc
// CHECK: arith.constant 3 : i32
// CHECK: call @tfc_uk_matmul_f32(
// A bf16 B that is not a weight: the _bf16 variant, not constant; A is f32.
// CHECK-LABEL: func.func @bf16_activations
// CHECK-NOT: memref.alloc
// CHECK: arith.constant 1 : i32
// CHECK: call @tfc_uk_matmul_f32_bf16(
// A bf16 A times a bf16 B: the _bf16_bf16 variant reads A as it is (no
// widening), with a weight (1 | 2) or another activation (1); an f16 A
// times a bf16 B is widened for the _f32_bf16 one.
// CHECK-LABEL: func.func @bf16_products
// CHECK-NOT: arith.extf
// CHECK: %[[A:.*]] = memref.cast %arg0 : memref<16x32xbf16> to memref<?x?xbf16, strided<[?, ?], offset: ?>>
// CHECK: arith.constant 3 : i32
// CHECK-NEXT: call @tfc_uk_matmul_bf16_bf16(%[[A]],
// CHECK-NOT: arith.extf
// CHECK: arith.constant 1 : i32
// CHECK-NEXT: call @tfc_uk_matmul_bf16_bf16(
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: arith.constant 1 : i32
// CHECK-NEXT: call @tfc_uk_matmul_f32_bf16(
// An f16 result is not the micro-kernel's.
// CHECK-LABEL: func.func @f16_result
// CHECK: linalg.matmul
func.func @f16_weight(%a: memref<2x16x32xf16>, %w: memref<2x32x24xf16> {tfc.role = "weight"}, %c: memref<2x16x24xf32>) {
  linalg.batch_matmul ins(%a, %w : memref<2x16x32xf16>, memref<2x32x24xf16>) outs(%c : memref<2x16x24xf32>)
  return
}
func.func @f32_weight(%a: memref<16x32xf32>, %w: memref<32x24xf32> {tfc.role = "weight"}, %c: memref<16x24xf32>) {
  linalg.matmul ins(%a, %w : memref<16x32xf32>, memref<32x24xf32>) outs(%c : memref<16x24xf32>)
  return
}
func.func @bf16_activations(%a: memref<16x32xf32>, %b: memref<32x24xbf16>, %c: memref<16x24xf32>) {
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x24xbf16>) outs(%c : memref<16x24xf32>)
  return
}
func.func @bf16_products(%a: memref<16x32xbf16>, %w: memref<32x24xbf16> {tfc.role = "weight"}, %b: memref<32x24xbf16>, %h: memref<16x32xf16>, %c: memref<16x24xf32>) {
  linalg.matmul ins(%a, %w : memref<16x32xbf16>, memref<32x24xbf16>) outs(%c : memref<16x24xf32>)
  linalg.matmul ins(%a, %b : memref<16x32xbf16>, memref<32x24xbf16>) outs(%c : memref<16x24xf32>)
  linalg.matmul ins(%h, %b : memref<16x32xf16>, memref<32x24xbf16>) outs(%c : memref<16x24xf32>)
  return
}
func.func @f16_result(%a: memref<16x32xf16>, %w: memref<32x24xf16>, %c: memref<16x24xf16>) {
  linalg.matmul ins(%a, %w : memref<16x32xf16>, memref<32x24xf16>) outs(%c : memref<16x24xf16>)
  return
}

// C made all zeros right before the matmul (the last op with memory effects
// before it: casts and views have none) is overwritten by the kernel instead:
// a zero fill of C, or a copy into C of a zero-filled buffer, goes away, and
// the call does not accumulate (flag 0). Views of C read after the matmul do
// not matter.
// CHECK-LABEL: func.func @zero_fill
// CHECK-NOT: linalg.fill
// CHECK: arith.constant 0 : i32
// CHECK-NEXT: call @tfc_uk_matmul_f32(
func.func @zero_fill(%a: memref<16x32xf32>, %b: memref<32x24xf32>, %c: memref<16x24xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<16x24xf32>)
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x24xf32>) outs(%c : memref<16x24xf32>)
  return
}
// CHECK-LABEL: func.func @zero_copy_viewed_after
// CHECK: linalg.fill
// CHECK-NOT: memref.copy
// CHECK: arith.constant 0 : i32
// CHECK-NEXT: call @tfc_uk_matmul_f32(
// CHECK: memref.expand_shape
func.func @zero_copy_viewed_after(%a: memref<16x32xf32>, %b: memref<32x24xf32>, %out: memref<2x8x24xf32>) {
  %z = arith.constant 0.0 : f32
  %zeros = memref.alloc() : memref<16x24xf32>
  linalg.fill ins(%z : f32) outs(%zeros : memref<16x24xf32>)
  %c = memref.alloc() : memref<16x24xf32>
  memref.copy %zeros, %c : memref<16x24xf32> to memref<16x24xf32>
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x24xf32>) outs(%c : memref<16x24xf32>)
  %v = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 8, 24] : memref<16x24xf32> into memref<2x8x24xf32>
  memref.copy %v, %out : memref<2x8x24xf32> to memref<2x8x24xf32>
  return
}
// Not zeros, or a write between the fill and the matmul: C is accumulated
// into (flag 1) and the fill stays.
// CHECK-LABEL: func.func @one_fill
// CHECK: linalg.fill
// CHECK: arith.constant 1 : i32
// CHECK-NEXT: call @tfc_uk_matmul_f32(
func.func @one_fill(%a: memref<16x32xf32>, %b: memref<32x24xf32>, %c: memref<16x24xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%c : memref<16x24xf32>)
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x24xf32>) outs(%c : memref<16x24xf32>)
  return
}
// CHECK-LABEL: func.func @write_between
// CHECK: linalg.fill
// CHECK: memref.store
// CHECK: arith.constant 1 : i32
// CHECK-NEXT: call @tfc_uk_matmul_f32(
func.func @write_between(%a: memref<16x32xf32>, %b: memref<32x24xf32>, %c: memref<16x24xf32>) {
  %z = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %i = arith.constant 3 : index
  linalg.fill ins(%z : f32) outs(%c : memref<16x24xf32>)
  memref.store %one, %c[%i, %i] : memref<16x24xf32>
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x24xf32>) outs(%c : memref<16x24xf32>)
  return
}

// One zero-filled buffer initialising two products of one shape (as
// bufferization leaves them): the first takes a copy of it, the second the
// buffer itself, filled well before it. Nothing touches that buffer between
// its fill and the second matmul, so both calls overwrite C (flag 0) and
// the fill goes too.
// CHECK-LABEL: func.func @shared_zeros
// CHECK-NOT: linalg.fill
// CHECK-NOT: memref.copy
// CHECK: arith.constant 0 : i32
// CHECK-NEXT: call @tfc_uk_matmul_f32(
// CHECK: memref.store
// CHECK: arith.constant 0 : i32
// CHECK-NEXT: call @tfc_uk_matmul_f32(
func.func @shared_zeros(%a: memref<16x32xf32>, %b: memref<32x24xf32>, %x: memref<4xf32>) -> (memref<16x24xf32>, memref<16x24xf32>) {
  %z = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %i = arith.constant 3 : index
  %zeros = memref.alloc() : memref<16x24xf32>
  linalg.fill ins(%z : f32) outs(%zeros : memref<16x24xf32>)
  %c = memref.alloc() : memref<16x24xf32>
  memref.copy %zeros, %c : memref<16x24xf32> to memref<16x24xf32>
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x24xf32>) outs(%c : memref<16x24xf32>)
  memref.store %one, %x[%i] : memref<4xf32>
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x24xf32>) outs(%zeros : memref<16x24xf32>)
  return %c, %zeros : memref<16x24xf32>, memref<16x24xf32>
}
// An earlier zero fill with C read in between (a copy out of it), or a view
// of C taken before the matmul: C is accumulated into and the fill stays.
// CHECK-LABEL: func.func @earlier_fill_read_between
// CHECK: linalg.fill
// CHECK: memref.copy
// CHECK: arith.constant 1 : i32
// CHECK-NEXT: call @tfc_uk_matmul_f32(
func.func @earlier_fill_read_between(%a: memref<16x32xf32>, %b: memref<32x24xf32>, %c: memref<16x24xf32>, %d: memref<16x24xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<16x24xf32>)
  memref.copy %c, %d : memref<16x24xf32> to memref<16x24xf32>
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x24xf32>) outs(%c : memref<16x24xf32>)
  return
}
// CHECK-LABEL: func.func @earlier_fill_view_before
// CHECK: linalg.fill
// CHECK: arith.constant 1 : i32
// CHECK-NEXT: call @tfc_uk_matmul_f32(
func.func @earlier_fill_view_before(%a: memref<16x32xf32>, %b: memref<32x24xf32>, %c: memref<16x24xf32>) {
  %z = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %i = arith.constant 3 : index
  %v = memref.expand_shape %c [[0, 1], [2]] output_shape [2, 8, 24] : memref<16x24xf32> into memref<2x8x24xf32>
  linalg.fill ins(%z : f32) outs(%c : memref<16x24xf32>)
  memref.store %one, %v[%i, %i, %i] : memref<2x8x24xf32>
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x24xf32>) outs(%c : memref<16x24xf32>)
  return
}
// C a view of another buffer: a write to that buffer between the fill and
// the matmul is not a user of C, so the earlier fill stays.
// CHECK-LABEL: func.func @earlier_fill_of_a_view
// CHECK: linalg.fill
// CHECK: memref.store
// CHECK: arith.constant 1 : i32
// CHECK-NEXT: call @tfc_uk_matmul_f32(
func.func @earlier_fill_of_a_view(%a: memref<16x32xf32>, %b: memref<32x24xf32>, %x: memref<2x16x24xf32>) {
  %z = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %i = arith.constant 3 : index
  %j = arith.constant 0 : index
  %c = memref.subview %x[0, 0, 0] [1, 16, 24] [1, 1, 1] : memref<2x16x24xf32> to memref<16x24xf32>
  linalg.fill ins(%z : f32) outs(%c : memref<16x24xf32>)
  memref.store %one, %x[%j, %i, %i] : memref<2x16x24xf32>
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x24xf32>) outs(%c : memref<16x24xf32>)
  return
}
