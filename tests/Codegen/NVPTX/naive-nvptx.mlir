// The unfused graph on the GPU, the simplest route through MLIR's GPU
// pipeline: every parallel loop nest of the decomposed layer_norm becomes a
// kernel, lowered to PTX for sm_90, and ptxas accepts each one. (A first
// check of the toolchain route for the GPU target; the fused kernels with
// shared-memory tiles and tensor cores are not built yet.)
//
// RUN: tfc-opt %s --pass-pipeline="builtin.module(transformer-decompose,func.func(tosa-to-linalg-named,tosa-to-linalg,tosa-to-arith,tosa-to-tensor),canonicalize,cse,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},buffer-results-to-out-params{modify-public-functions=true hoist-static-allocs=true},func.func(convert-linalg-to-parallel-loops,gpu-map-parallel-loops,convert-parallel-loops-to-gpu),lower-affine,gpu-kernel-outlining,canonicalize,cse)" \
// RUN:   | tfc-opt --gpu-lower-to-nvvm-pipeline="cubin-chip=sm_90 cubin-features=+ptx80 cubin-format=isa opt-level=3" > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: rm -rf %t.ptx && python3 %S/extract_ptx.py %t.mlir %t.ptx | FileCheck %s --check-prefix=EXTRACT
// RUN: for f in %t.ptx/*.ptx; do ptxas -arch=sm_90 "$f" -o "$f.cubin" || exit 1; done

// CHECK: gpu.launch_func
// CHECK: gpu.binary @main_kernel
// CHECK-SAME: #nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// CHECK-SAME: .target sm_90
// EXTRACT: extracted {{[1-9][0-9]*}} PTX modules
func.func @main(%x: tensor<64x384xf32>, %g: tensor<384xf32>, %b: tensor<384xf32>) -> tensor<64x384xf32> {
  %y = transformer.layer_norm %x, %g, %b : tensor<64x384xf32>, tensor<384xf32>, tensor<384xf32> -> tensor<64x384xf32>
  return %y : tensor<64x384xf32>
}
