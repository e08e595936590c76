func.func @main(%q: tensor<1x1x16x16xf16>, %k: tensor<1x1x64x16xf16>, %v: tensor<1x1x64x16xf16>) -> tensor<1x1x16x16xf16> {
  %o = transformer.attention %q, %k, %v : tensor<1x1x16x16xf16>, tensor<1x1x64x16xf16>, tensor<1x1x64x16xf16> -> tensor<1x1x16x16xf16>
  return %o : tensor<1x1x16x16xf16>
}
