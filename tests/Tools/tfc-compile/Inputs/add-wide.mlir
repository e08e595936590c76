func.func @main(%a: tensor<8x1024xf32>, %b: tensor<8x1024xf32>) -> tensor<8x1024xf32> {
  %c = tosa.add %a, %b : (tensor<8x1024xf32>, tensor<8x1024xf32>) -> tensor<8x1024xf32>
  return %c : tensor<8x1024xf32>
}
