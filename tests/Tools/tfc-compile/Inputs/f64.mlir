func.func @main(%x: tensor<4xf64>) -> tensor<4xf64> {
  %y = tosa.exp %x : (tensor<4xf64>) -> tensor<4xf64>
  return %y : tensor<4xf64>
}
