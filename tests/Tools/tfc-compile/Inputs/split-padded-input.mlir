// An input split with padding (7 rows in 2 parts of 4): only a weight's
// part may be padded (the runtime zero-fills its rows past the whole).
module attributes {tfc.tensor_parallel = 2 : i64} {
  func.func @main(%x: tensor<4x8xf32> {tfc.name = "x", tfc.role = "input", tfc.split = array<i64: 0, 1, 7>},
                  %w: tensor<4x8xf32> {tfc.name = "w", tfc.role = "weight", tfc.split = array<i64: 0, 1, 7>}) -> tensor<4x8xf32> {
    %y = tosa.add %x, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
}
