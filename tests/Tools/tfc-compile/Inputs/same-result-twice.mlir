// One value returned twice, an argument returned twice, and two identical
// attentions that CSE makes one: every result gets a buffer of its own
// (tests/Tools/tfc-compile/results.test).
func.func @main(%x: tensor<2x3xf32> {tfc.name = "x"},
                %q: tensor<1x2x5x16xf32> {tfc.name = "q"},
                %k: tensor<1x2x7x16xf32> {tfc.name = "k"},
                %v: tensor<1x2x7x16xf32> {tfc.name = "v"})
    -> (tensor<2x3xf32> {tfc.name = "a"}, tensor<2x3xf32> {tfc.name = "b"},
        tensor<2x3xf32> {tfc.name = "c"}, tensor<2x3xf32> {tfc.name = "d"},
        tensor<1x2x5x16xf32> {tfc.name = "e"}, tensor<1x2x5x16xf32> {tfc.name = "f"}) {
  %y = tosa.exp %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %e = transformer.attention %q, %k, %v : tensor<1x2x5x16xf32>, tensor<1x2x7x16xf32>, tensor<1x2x7x16xf32> -> tensor<1x2x5x16xf32>
  %f = transformer.attention %q, %k, %v : tensor<1x2x5x16xf32>, tensor<1x2x7x16xf32>, tensor<1x2x7x16xf32> -> tensor<1x2x5x16xf32>
  return %y, %y, %x, %x, %e, %f : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<1x2x5x16xf32>, tensor<1x2x5x16xf32>
}
