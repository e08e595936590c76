// A 1 GiB temporary (a product of 16384 x 16384 ones) summed to one number:
// the run fails with OUT_OF_MEMORY naming its size where it cannot be
// allocated (tests/Runtime/alloc-failure.test).
func.func @main(%a: tensor<1x16384x1xf32> {tfc.name = "a"}, %b: tensor<1x1x16384xf32> {tfc.name = "b"}) -> (tensor<1x1x1xf32> {tfc.name = "s"}) {
  %zp = "tosa.const"() {values = dense<0.0> : tensor<1xf32>} : () -> tensor<1xf32>
  %p = tosa.matmul %a, %b, %zp, %zp : (tensor<1x16384x1xf32>, tensor<1x1x16384xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x16384x16384xf32>
  %r1 = tosa.reduce_sum %p {axis = 1 : i32} : (tensor<1x16384x16384xf32>) -> tensor<1x1x16384xf32>
  %r2 = tosa.reduce_sum %r1 {axis = 2 : i32} : (tensor<1x1x16384xf32>) -> tensor<1x1x1xf32>
  return %r2 : tensor<1x1x1xf32>
}
