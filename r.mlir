func.func @main(%q: tensor<4x16x1024x128xf16>, %k: tensor<4x16x1024x128xf16>, %v: tensor<4x16x1024x128xf16>) -> tensor<4x16x1024x128xf16> {
  %o = transformer.attention %q, %k, %v {is_causal} : tensor<4x16x1024x128xf16>, tensor<4x16x1024x128xf16>, tensor<4x16x1024x128xf16> -> tensor<4x16x1024x128xf16>
  return %o : tensor<4x16x1024x128xf16>
}
