func.func @main(%x: tensor<4xf32> {tfc.role = "bias"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
