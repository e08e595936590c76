// An input whose name holds a newline: messages write it escaped and stay
// one line (tests/Runtime/errors-cli.test).
func.func @main(%x: tensor<2x3xf32> {tfc.name = "bad\0Aname"}) -> (tensor<2x3xf32> {tfc.name = "y"}) {
  %y = tosa.exp %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
