// A tosa.matmul whose inner dimensions disagree (8 against 6): TOSA's
// verifier lets it through (tests/Tools/tfc-compile/errors.test).
func.func @main(%a: tensor<1x4x8xf32> {tfc.name = "a"}, %b: tensor<1x6x5xf32> {tfc.name = "b"}) -> (tensor<1x4x5xf32> {tfc.name = "y"}) {
  %zp = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %y = tosa.matmul %a, %b, %zp, %zp : (tensor<1x4x8xf32>, tensor<1x6x5xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x4x5xf32>
  return %y : tensor<1x4x5xf32>
}
