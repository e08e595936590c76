// Token ids index a table of 7 rows: tfc-compile records the bounds [0, 7)
// for %ids in the manifest, and the runtime checks them on every run.
func.func @embed(%ids: tensor<2x4xi64> {tfc.name = "ids"},
                 %table: tensor<7x3xf32> {tfc.name = "table", tfc.role = "weight"})
    -> (tensor<2x4x3xf32> {tfc.name = "rows"}) {
  %i32 = tosa.cast %ids : (tensor<2x4xi64>) -> tensor<2x4xi32>
  %s1 = tosa.const_shape {values = dense<[1, 8]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %flat = tosa.reshape %i32, %s1 : (tensor<2x4xi32>, !tosa.shape<2>) -> tensor<1x8xi32>
  %s2 = tosa.const_shape {values = dense<[1, 7, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %t = tosa.reshape %table, %s2 : (tensor<7x3xf32>, !tosa.shape<3>) -> tensor<1x7x3xf32>
  %g = tosa.gather %t, %flat : (tensor<1x7x3xf32>, tensor<1x8xi32>) -> tensor<1x8x3xf32>
  %s3 = tosa.const_shape {values = dense<[2, 4, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %r = tosa.reshape %g, %s3 : (tensor<1x8x3xf32>, !tosa.shape<3>) -> tensor<2x4x3xf32>
  return %r : tensor<2x4x3xf32>
}
