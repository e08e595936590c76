// RUN: tfc-opt %s --convert-linalg-matmul-to-cpu | FileCheck %s
//
// The pass records, per function, the weight arguments that nothing reads
// but the GEMM kernel packing them once (flag 2): through casts, reshapes
// and transposed views. The runtime binds those at any address of a
// weights file (abi.h, tfc_model_weight_alignment). A weight that other
// code reads too (an elementwise op, a copy), a weight the kernel reads as
// A, and an input used as B are not recorded; a function with none has no
// entry.
// CHECK: module attributes {tfc.packed_only_weights = {main = array<i64: 1, 2, 3>, other = array<i64: 1>}}

module {
  func.func @main(%a: memref<4x8xf32>,
                  %w: memref<8x6xf32> {tfc.role = "weight"},
                  %wt: memref<6x8xf32> {tfc.role = "weight"},
                  %w3: memref<48xf32> {tfc.role = "weight"},
                  %shared: memref<8x6xf32> {tfc.role = "weight"},
                  %bias: memref<6xf32> {tfc.role = "weight"},
                  %asA: memref<6x8xf32> {tfc.role = "weight"},
                  %c1: memref<4x6xf32>, %c2: memref<4x6xf32>,
                  %c3: memref<1x4x6xf32>, %c4: memref<4x6xf32>,
                  %copy: memref<8x6xf32>, %c5: memref<6x6xf32>) {
    linalg.matmul ins(%a, %w : memref<4x8xf32>, memref<8x6xf32>)
                  outs(%c1 : memref<4x6xf32>)
    // B = transpose(Wt), folded into a transposed view of the weight.
    %t = memref.alloc() : memref<8x6xf32>
    linalg.transpose ins(%wt : memref<6x8xf32>) outs(%t : memref<8x6xf32>)
                     permutation = [1, 0]
    linalg.matmul ins(%a, %t : memref<4x8xf32>, memref<8x6xf32>)
                  outs(%c2 : memref<4x6xf32>)
    memref.dealloc %t : memref<8x6xf32>
    // A reshaped weight as a batch_matmul's B.
    %e = memref.expand_shape %w3 [[0, 1, 2]] output_shape [1, 8, 6]
        : memref<48xf32> into memref<1x8x6xf32>
    %a3 = memref.expand_shape %a [[0, 1], [2]] output_shape [1, 4, 8]
        : memref<4x8xf32> into memref<1x4x8xf32>
    linalg.batch_matmul ins(%a3, %e : memref<1x4x8xf32>, memref<1x8x6xf32>)
                        outs(%c3 : memref<1x4x6xf32>)
    // Read by the kernel and copied elsewhere.
    linalg.matmul ins(%a, %shared : memref<4x8xf32>, memref<8x6xf32>)
                  outs(%c4 : memref<4x6xf32>)
    memref.copy %shared, %copy : memref<8x6xf32> to memref<8x6xf32>
    // A bias, read by an elementwise op.
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>,
                                     affine_map<(i, j) -> (i, j)>],
                    iterator_types = ["parallel", "parallel"]}
        ins(%bias : memref<6xf32>) outs(%c1 : memref<4x6xf32>) {
    ^bb0(%x: f32, %y: f32):
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
    }
    // A weight as the product's A, which the kernel reads in place.
    linalg.matmul ins(%asA, %w : memref<6x8xf32>, memref<8x6xf32>)
                  outs(%c5 : memref<6x6xf32>)
    return
  }
  func.func @other(%a: memref<4x8xf32>,
                   %w: memref<8x6xf32> {tfc.role = "weight"},
                   %c: memref<4x6xf32>) {
    linalg.matmul ins(%a, %w : memref<4x8xf32>, memref<8x6xf32>)
                  outs(%c : memref<4x6xf32>)
    return
  }
  // No weight: no entry.
  func.func @none(%a: memref<4x8xf32>, %b: memref<8x6xf32>,
                  %c: memref<4x6xf32>) {
    linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x6xf32>)
                  outs(%c : memref<4x6xf32>)
    return
  }
}
