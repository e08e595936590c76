// The fusion preserves values: tfc_testing.tosa_eval (tests/pylib, numpy
// in float64) runs every generated graph before and after
// --transformer-fuse on the same seeded random inputs (transformer.attention
// evaluated by its definition) and compares them by relative norm.
//
// RUN: python3 -m tfc_testing.attention --seed 7 --count 40 --small > %t.mlir
// RUN: tfc-opt %t.mlir --mlir-print-op-generic > %t.ref
// RUN: tfc-opt %t.mlir --transformer-fuse --mlir-print-op-generic > %t.fused
// RUN: python3 -m tfc_testing.tosa_eval compare %t.ref %t.fused --tol 1e-5 | FileCheck %s
// RUN: tfc-opt %t.mlir --transformer-fuse | grep "= transformer.attention" | count 40

// CHECK: functions=40 mismatches=0
