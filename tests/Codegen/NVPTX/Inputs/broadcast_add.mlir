// A broadcast add over 3 x 5 x 7 points (one elementwise kernel).
func.func @main(%a: tensor<3x5x7xf32>, %b: tensor<1x5x1xf32>) -> tensor<3x5x7xf32> {
  %s = tosa.add %a, %b : (tensor<3x5x7xf32>, tensor<1x5x1xf32>) -> tensor<3x5x7xf32>
  return %s : tensor<3x5x7xf32>
}
