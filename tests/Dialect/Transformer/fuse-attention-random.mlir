// Randomised shapes and forms: tfc_testing.attention (tests/pylib; seeded,
// standard library only) writes 60 attention graphs, each with the
// FileCheck lines its fused form must satisfy (one transformer.attention
// with the expected operand types, mask and is_causal; no tosa.matmul
// left).
//
// RUN: python3 -m tfc_testing.attention --seed 2026 --count 60 --check > %t.mlir
// RUN: tfc-opt %t.mlir --transformer-fuse | FileCheck %t.mlir
// RUN: tfc-opt %t.mlir --transformer-fuse | grep "= transformer.attention" | count 60
// RUN: tfc-opt %t.mlir --transformer-fuse | not grep tosa.matmul
