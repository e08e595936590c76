func.func @main(%x: tensor<4xf32>) {
  return
}
