// Attention over no keys: every row sees none and gives zeros, in both
// builds.
func.func @main(%q: tensor<1x2x3x16xf32> {tfc.name = "q"}, %k: tensor<1x2x0x16xf32> {tfc.name = "k"}, %v: tensor<1x2x0x16xf32> {tfc.name = "v"}) -> (tensor<1x2x3x16xf32> {tfc.name = "o"}) {
  %o = transformer.attention %q, %k, %v : tensor<1x2x3x16xf32>, tensor<1x2x0x16xf32>, tensor<1x2x0x16xf32> -> tensor<1x2x3x16xf32>
  return %o : tensor<1x2x3x16xf32>
}
