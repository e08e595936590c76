// A causal attention whose window (INT64_MAX) hides no key: the unfused
// build once computed j + window, which overflowed and hid every key but
// the first (tests/Tools/tfc-compile/verify-fusion.test).
func.func @attn(%q: tensor<1x2x7x16xf32> {tfc.name = "q"}, %k: tensor<1x2x7x16xf32> {tfc.name = "k"}, %v: tensor<1x2x7x16xf32> {tfc.name = "v"}) -> (tensor<1x2x7x16xf32> {tfc.name = "o"}) {
  %o = transformer.attention %q, %k, %v {window = 9223372036854775807 : i64, is_causal} : tensor<1x2x7x16xf32>, tensor<1x2x7x16xf32>, tensor<1x2x7x16xf32> -> tensor<1x2x7x16xf32>
  return %o : tensor<1x2x7x16xf32>
}
