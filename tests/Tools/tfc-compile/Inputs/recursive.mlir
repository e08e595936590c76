// Recursion through a second function: refused at compile time
// (tests/Tools/tfc-compile/errors.test).
func.func private @f(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = func.call @g(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
func.func private @g(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = func.call @f(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
func.func @main(%x: tensor<2x3xf32> {tfc.name = "x"}) -> (tensor<2x3xf32> {tfc.name = "a"}) {
  %y = func.call @f(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
