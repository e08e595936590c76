func.func @main(%x: tensor<?x10xf32>) -> tensor<?x10xf32> {
  %y = transformer.softmax %x {dimension = 1 : i64} : tensor<?x10xf32> -> tensor<?x10xf32>
  return %y : tensor<?x10xf32>
}
