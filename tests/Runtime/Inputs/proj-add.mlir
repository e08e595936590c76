// y = x · w + x: proj.mlir with another output, the same signature
// (tests/Runtime/independence.test).
func.func @proj(%x: tensor<1x96x384xf32> {tfc.name = "x"},
                %w: tensor<1x384x384xf32> {tfc.name = "w", tfc.role = "weight"})
    -> (tensor<1x96x384xf32> {tfc.name = "y"}) {
  %zp = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %y = tosa.matmul %x, %w, %zp, %zp : (tensor<1x96x384xf32>, tensor<1x384x384xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x96x384xf32>
  %z = tosa.add %y, %x : (tensor<1x96x384xf32>, tensor<1x96x384xf32>) -> tensor<1x96x384xf32>
  return %z : tensor<1x96x384xf32>
}
