// A graph that declares a C function and calls it: refused unless
// --allow-external-calls (tests/Tools/tfc-compile/errors.test).
func.func private @system(tensor<2xf32>) -> tensor<2xf32>
func.func @main(%x: tensor<2xf32> {tfc.name = "x"}) -> (tensor<2xf32> {tfc.name = "y"}) {
  %y = func.call @system(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
