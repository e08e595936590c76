func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = tosa.custom %x {operator_name = "my_op", domain_name = "user", implementation_attrs = ""} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
