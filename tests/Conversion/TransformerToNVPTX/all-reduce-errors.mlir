// An all-reduce of dynamic shape has no runtime call to become on the GPU.
// RUN: tfc-opt %s --convert-transformer-to-nvptx --verify-diagnostics

func.func @all_reduce_dynamic(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  // expected-error @below {{convert-transformer-to-nvptx: an all-reduce of dynamic shape}}
  %y = transformer.all_reduce %x : tensor<?x5xf32>
  return %y : tensor<?x5xf32>
}
