func.func @f(%q: tensor<1x2x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %o = transformer.attention %q, %k, %v : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>,
