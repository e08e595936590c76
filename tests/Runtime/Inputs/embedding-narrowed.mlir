// The ids pass through an i8 cast before they index the table: values
// outside [0, 7) may wrap into it, so tfc-compile records no bounds.
func.func @embed(%ids: tensor<2x4xi32> {tfc.name = "ids"},
                 %table: tensor<7x3xf32> {tfc.name = "table", tfc.role = "weight"})
    -> (tensor<2x4x3xf32> {tfc.name = "rows"}) {
  %i8 = tosa.cast %ids : (tensor<2x4xi32>) -> tensor<2x4xi8>
  %i32 = tosa.cast %i8 : (tensor<2x4xi8>) -> tensor<2x4xi32>
  %s1 = tosa.const_shape {values = dense<[1, 8]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %flat = tosa.reshape %i32, %s1 : (tensor<2x4xi32>, !tosa.shape<2>) -> tensor<1x8xi32>
  %s2 = tosa.const_shape {values = dense<[1, 7, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %t = tosa.reshape %table, %s2 : (tensor<7x3xf32>, !tosa.shape<3>) -> tensor<1x7x3xf32>
  %g = tosa.gather %t, %flat : (tensor<1x7x3xf32>, tensor<1x8xi32>) -> tensor<1x8x3xf32>
  %s3 = tosa.const_shape {values = dense<[2, 4, 3]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %r = tosa.reshape %g, %s3 : (tensor<1x8x3xf32>, !tosa.shape<3>) -> tensor<2x4x3xf32>
  return %r : tensor<2x4x3xf32>
}
