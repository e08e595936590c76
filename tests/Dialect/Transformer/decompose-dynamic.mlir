// RUN: not tfc-opt %s --transformer-decompose 2>&1 | FileCheck %s

// CHECK: decompose-dynamic.mlir:[[@LINE+2]]:8: error: cannot decompose 'transformer.softmax': its operands need static shapes
func.func @negative_dynamic(%x: tensor<?x10xf32>) -> tensor<?x10xf32> {
  %y = transformer.softmax %x {dimension = 1 : i64} : tensor<?x10xf32> -> tensor<?x10xf32>
  return %y : tensor<?x10xf32>
}
