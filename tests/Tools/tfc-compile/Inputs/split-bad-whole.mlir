// A weight's tfc.split names a whole length of 9 rows: 2 ranks' parts of
// 5, not of 4.
module attributes {tfc.tensor_parallel = 2 : i64} {
  func.func @main(%x: tensor<4x8xf32> {tfc.name = "x", tfc.role = "input"},
                  %w: tensor<4x8xf32> {tfc.name = "w", tfc.role = "weight", tfc.split = array<i64: 0, 1, 9>}) -> tensor<4x8xf32> {
    %y = tosa.add %x, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
}
